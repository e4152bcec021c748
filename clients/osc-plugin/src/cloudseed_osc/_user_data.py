"""Reading a user data file the way ``openstack server create --user-data`` does: the file's
bytes as they are (binary, gzip and MIME multipart included), base64-encoded for the API."""

from __future__ import annotations

import base64

from osc_lib import exceptions


def read_user_data(path: str) -> str:
    """The base64 text of the file at ``path``; a ``CommandError`` if it cannot be read.

    Read before any request is sent, so a typo in the path costs nothing on the cloud.
    """
    try:
        with open(path, "rb") as stream:
            content = stream.read()
    except OSError as exc:
        raise exceptions.CommandError(f"Can't open '{path}': {exc}") from None
    return base64.b64encode(content).decode("ascii")
