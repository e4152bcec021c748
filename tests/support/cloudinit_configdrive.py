"""cloud-init's own config drive reader on an extracted drive: a script, not a module.

    /usr/bin/python3 -I -B cloudinit_configdrive.py DIR

Prints one JSON object: ``read_v2`` (``openstack.ConfigDriveReader(DIR).read_v2()``) and
``datasource`` (``DataSourceConfigDrive.read_config_drive(DIR)``, what the datasource calls
on a mounted drive), bytes as ``{"base64": ...}``. Nothing in cloud-init is patched.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# -I leaves the script's own directory off sys.path; the sibling client is plain Python.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from cloudinit_client import plain


def main() -> int:
    from cloudinit.sources import DataSourceConfigDrive
    from cloudinit.sources.helpers import openstack

    directory = sys.argv[1]
    result = {
        "read_v2": plain(openstack.ConfigDriveReader(directory).read_v2()),
        "datasource": plain(DataSourceConfigDrive.read_config_drive(directory)),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
