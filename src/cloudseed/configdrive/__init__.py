"""Config drives: the metadata service's documents on a small filesystem attached to the
guest, for clouds (or guests) without a reachable metadata service.

IO-free: ``contents.py`` (the tree of files, rendered by ``metadata/render.py``, the renderer
the metadata service uses), ``vfat.py`` (a FAT16 image written front to back into any binary
stream), ``ironic.py`` (a drive in the forms Ironic takes for bare metal). Around them:
``iso9660.py`` (pycdlib), ``vfat_reader.py`` (reads FAT images without mounting),
``service.py`` (DriveBuilder: one instance's drive, vendordata fetched once, replaced
atomically), ``api.py`` (the Ironic forms for administrators, 2.108), ``errors.py``;
``cloudseed configdrive build|show`` is ``cli/configdrive.py``.

docs/configdrive.md is the operator's side of this.
"""

from cloudseed.configdrive.errors import DriveBuildFailed, UnknownDriveFormat, UnreadableDrive
from cloudseed.configdrive.service import DriveBuilder, drive_path, read_drive

__all__ = [
    "DriveBuildFailed",
    "DriveBuilder",
    "UnknownDriveFormat",
    "UnreadableDrive",
    "drive_path",
    "read_drive",
]
