"""The words of the image registry (IO-free): the formats cloudseed stores and boots, the
visibilities and the statuses an image goes through."""

from __future__ import annotations

# What cloudseed boots (and so what it stores): Glance's lists, as a Glance configured with
# ``[image_format] disk_formats = raw,qcow2`` and ``container_formats = bare`` has them.
DISK_FORMATS = ("raw", "qcow2")
CONTAINER_FORMATS = ("bare",)
VISIBILITIES = ("public", "community", "shared", "private")

# Glance's statuses that cloudseed uses: no data yet, data arriving, bootable.
QUEUED, SAVING, ACTIVE = "queued", "saving", "active"
