"""cloud-init's own config drive reader on an extracted drive: a script, not a module.

    /usr/bin/python3 -I -B cloudinit_configdrive.py DIR

Prints one JSON object: ``read_v2`` (``openstack.ConfigDriveReader(DIR).read_v2()``) and
``datasource`` (``DataSourceConfigDrive.read_config_drive(DIR)``, what the datasource calls
on a mounted drive), bytes as ``{"base64": ...}``. Nothing in cloud-init is patched.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any


def plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def main() -> int:
    from cloudinit.sources import DataSourceConfigDrive
    from cloudinit.sources.helpers import openstack

    directory = sys.argv[1]
    result = {"read_v2": plain(openstack.ConfigDriveReader(directory).read_v2()),
              "datasource": plain(DataSourceConfigDrive.read_config_drive(directory))}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
