"""Entity tags of metadata documents, and ``If-None-Match``. IO-free.

A document drawn from the instance record is tagged with the record's generation (bumped in
the transaction of every change a guest could see, servers/records.py ``guest_changed``) and
the document's identity (what ``tree.parse`` made of the path, and a fingerprint of the
settings that shape rendering): ``"<generation>-<16 hex digits>"``. Nothing is hashed per
request (a document's identity is digested once per worker), every worker and process of a
deployment gives the same tag, and the tag changes when the record does, even where the bytes
do not (``meta_data.json`` carries a fresh random seed in every answer, so no digest of its
bytes could be the same twice). A change of the record that does not touch a document still
gives it a new tag: a weaker promise than a digest of the content, and the one a guest
acting on a change can rely on never to miss one.

Documents that do not come from the record (vendordata, signed identity, the index of the
EC2 tree) are tagged with a digest of their bytes (``"b-<24 hex digits>"``), kept for the
shared bytes objects that are served again and again (the indexes, a StaticJSON file) so that
those are not hashed per request.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable

_IDS_MAX = 4096  # document identities remembered (the paths guests ask for are few)
_BODIES_MAX = 64  # digests of bytes objects remembered


def fingerprint(*parts: str) -> str:
    """A short digest of the settings and code that shape rendered documents."""
    return hashlib.blake2b("\0".join(parts).encode(), digest_size=8).hexdigest()


class Tagger:
    def __init__(self, fingerprint: str) -> None:
        self._fingerprint = fingerprint
        self._ids: dict[Hashable, str] = {}
        self._bodies: dict[int, tuple[bytes, bytes]] = {}  # id -> (the object, its tag)

    def of_record(self, generation: int | str, document: Hashable) -> bytes:
        """The tag of ``document`` (any hashable naming it, with a stable ``repr``) of an
        instance at ``generation`` (documents.py ``GuestDocuments.version``)."""
        ident = self._ids.get(document)
        if ident is None:
            text = f"{self._fingerprint}\0{document!r}".encode()
            ident = hashlib.blake2b(text, digest_size=8).hexdigest()
            if len(self._ids) >= _IDS_MAX:
                self._ids.clear()
            self._ids[document] = ident
        return f'"{generation}-{ident}"'.encode()

    def of_bytes(self, body: bytes) -> bytes:
        """The tag of a document that is not drawn from the instance record."""
        known = self._bodies.get(id(body))
        if known is not None and known[0] is body:  # the entry holds it: the id is its own
            return known[1]
        tag = b'"b-' + hashlib.blake2b(body, digest_size=12).hexdigest().encode() + b'"'
        if len(self._bodies) >= _BODIES_MAX:
            self._bodies.clear()
        self._bodies[id(body)] = (body, tag)
        return tag


def opaque(tag: bytes) -> bytes:
    """``tag`` without its quotes or weakness marker: how a guest may pass it in a query
    (``last_etag=...``), with or without the quotes."""
    if tag.startswith(b"W/"):
        tag = tag[2:]
    if len(tag) >= 2 and tag.startswith(b'"') and tag.endswith(b'"'):
        tag = tag[1:-1]
    return tag


def none_match(header: bytes, tag: bytes) -> bool:
    """Whether ``If-None-Match: header`` holds back a document tagged ``tag`` (RFC 9110
    13.1.2: ``*``, or a list of tags compared weakly)."""
    value = header.strip()
    if value == b"*":
        return True
    wanted = opaque(tag)
    return any(opaque(item.strip()) == wanted for item in value.split(b","))
