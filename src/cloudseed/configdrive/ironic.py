"""A drive in the two forms Ironic takes for a bare-metal node: the ``configdrive`` of
``PUT /v1/nodes/{node}/states/provision`` (``openstack baremetal node deploy --config-drive``).
IO-free: a drive's tree in, text or an object out.

``ironic``: the ISO 9660 image gzipped, then base64-encoded (the string Nova's Ironic driver
sends). The image is the one ``iso9660.write`` makes for cloudseed's own drives, from the same
tree, so it holds every version directory, the EC2 tree and the personality files. The gzip
header carries no name and a zero time, so only the image's own build times (and the random
seed, fresh per drive as Nova's) differ between two builds of one server.

``ironic-json``: the object Ironic builds a drive from itself (ironic's conductor
``build_configdrive``, through openstacksdk's ``configdrive.build``): ``meta_data`` (written as
``meta_data.json``), ``network_data`` (``network_data.json``), ``user_data`` (a string, written
as its UTF-8 bytes) and ``vendor_data`` (written as ``vendor_data2.json``), under
``openstack/2012-08-10`` and ``openstack/latest`` only. What it cannot carry refuses the form
(``NotInJsonForm``) rather than reaching the node without it: user data that is not UTF-8 text
(gzip, for one), and personality files, whose contents that drive has no place for.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
from collections.abc import Mapping
from typing import Any

from cloudseed.configdrive import iso9660
from cloudseed.configdrive.errors import NotInJsonForm, UnknownDriveFormat

ISO = "ironic"
JSON = "ironic-json"
FORMATS = (ISO, JSON)

_LATEST = "openstack/latest/"


def packed_iso(tree: Mapping[str, bytes]) -> str:
    """The ISO 9660 image of ``tree``, gzipped and base64-encoded."""
    image = io.BytesIO()
    iso9660.write(tree, image)
    packed = io.BytesIO()
    # No name and no time in the header: the same image packs to the same bytes.
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=0) as out:
        out.write(image.getbuffer())
    del image
    return base64.b64encode(packed.getbuffer()).decode("ascii")


def json_form(tree: Mapping[str, bytes]) -> dict[str, Any]:
    """The object Ironic builds a drive from, made of the drive's ``openstack/latest``
    documents. Raises NotInJsonForm when the drive holds what the form cannot carry."""
    meta: dict[str, Any] = json.loads(tree[_LATEST + "meta_data.json"])
    if meta.get("files"):
        raise NotInJsonForm(
            "the server has personality files, which Ironic's JSON form has no place for"
        )
    form: dict[str, Any] = {
        "meta_data": meta,
        "network_data": json.loads(tree[_LATEST + "network_data.json"]),
        "vendor_data": json.loads(tree.get(_LATEST + "vendor_data2.json", b"{}")),
    }
    user_data = tree.get(_LATEST + "user_data")
    if user_data is not None:
        try:
            form["user_data"] = user_data.decode("utf-8")
        except UnicodeDecodeError:
            raise NotInJsonForm(
                "the server's user data is not UTF-8 text (gzip, for one), and Ironic "
                "writes the JSON form's user_data as UTF-8"
            ) from None
    return form


def render(fmt: str, tree: Mapping[str, bytes]) -> str | dict[str, Any]:
    """The drive in form ``fmt``: the ISO's text, or the JSON form's object."""
    if fmt == ISO:
        return packed_iso(tree)
    if fmt == JSON:
        return json_form(tree)
    raise UnknownDriveFormat(fmt)
