"""The drop-in's documents for an identified guest: rendered by render.py from the guest's
facts and what IO brings (security groups from Neutron, vendordata), each cached on the
guest while it depends on the instance alone (``render.cacheable``). ``now`` answers what
takes no IO (the path that answers at once uses it); ``get`` answers everything, waiting on
Neutron or DynamicJSON targets where it must; ``recursive`` is cloudseed's recursive view.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from typing import overload

from cloudseed.metadata import recursive
from cloudseed.metadata.answers import Answer
from cloudseed.metadata.errors import NoSuchDocument
from cloudseed.metadata.etags import Tagger
from cloudseed.nova_metadata import paths, render
from cloudseed.nova_metadata.guests import NovaGuest
from cloudseed.nova_metadata.neutron import Neutron
from cloudseed.vendordata import Vendordata
from cloudseed.vendordata.request import VendordataRequest


class NovaDocuments:
    def __init__(
        self,
        *,
        dhcp_domain: str,
        vendordata: Vendordata,
        neutron: Neutron,
        security_groups_ttl: float,
        dynamic: bool = False,
        network_template: bool = False,
    ) -> None:
        self.dhcp_domain = dhcp_domain
        self.network_template = network_template  # /openstack/content/0000 is served
        self.dynamic = dynamic  # signed identity is served: EC2 versions list dynamic/
        self.vendordata = vendordata
        self.neutron = neutron
        self.security_groups_ttl = security_groups_ttl
        self._rewritten: dict[int, tuple[bytes, bytes]] = {}  # id -> (compact, Nova's)

    def now(
        self,
        target: paths.Target,
        guest: NovaGuest,
        address: str | None,
        groups: tuple[str, ...] | None = None,
    ) -> Answer | None:
        """A GET's document when it takes no IO; None when it does (vendor_data2.json with
        DynamicJSON targets, security groups not known now). ``address``: the caller's."""
        facts = guest.facts
        if target.kind == paths.OPENSTACK and target.rest[0] == paths.META_DATA:
            # A fresh seed in every answer, around bytes rendered once.
            return Answer(200, guest.meta_data(target.version).render(), render.JSON)
        if render.needs_security_groups(target):
            groups = groups if groups is not None else guest.security_groups(time.monotonic())
            if groups is None:
                return None
        vendordata = self.vendordata

        def make() -> tuple[bytes, bytes]:
            inputs = render.Inputs(
                dhcp_domain=self.dhcp_domain,
                address=address,
                security_groups=groups or (),
                vendor_data_json=self.as_nova_writes(vendordata.vendor_data_json),
                vendor_data2=self.as_nova_writes(vendordata.static_only_vendor_data2()),
                today=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"),
                dynamic=self.dynamic,
                network_template=self.network_template,
            )
            return render.document(target, facts, inputs)

        try:
            cacheable = render.cacheable(facts, target)
            body, content_type = guest.document(target, make) if cacheable else make()
        except render.NotInTree as exc:
            raise NoSuchDocument(str(exc) or "nothing at this path") from None
        except render.Later:
            return None
        return Answer(200, body, content_type)

    async def get(self, target: paths.Target, guest: NovaGuest, address: str | None) -> Answer:
        groups = None
        if render.needs_security_groups(target):
            groups = guest.security_groups(time.monotonic())
            if groups is None:
                groups = await asyncio.to_thread(self.neutron.security_groups, guest.uuid)
                guest.remember_security_groups(groups, self.security_groups_ttl)
        now = self.now(target, guest, address, groups)
        if now is not None:
            return now
        body = await self.vendordata.vendor_data2(_vendordata_request(guest))
        return Answer(200, self.as_nova_writes(body), render.JSON)

    @overload
    def as_nova_writes(self, document: bytes) -> bytes: ...
    @overload
    def as_nova_writes(self, document: None) -> None: ...
    def as_nova_writes(self, document: bytes | None) -> bytes | None:
        """A vendordata document of cloudseed's vendordata/ (compact JSON) written as Nova
        writes its JSON (``render.dumps``: ", " and ": "), so it is Nova's byte for byte; the
        last few objects' rewrites are kept (a rewrite per request cost two JSON passes, and
        a new bytes object each time, hashed again for its ETag)."""
        if document is None:
            return None
        known = self._rewritten.get(id(document))
        if known is not None and known[0] is document:  # the entry holds it: its own id
            return known[1]
        rewritten = render.dumps(json.loads(document))
        if len(self._rewritten) >= 16:
            self._rewritten.clear()
        self._rewritten[id(document)] = (document, rewritten)
        return rewritten

    def recursive(self, guest: NovaGuest, version: str) -> Answer:
        """``/openstack/<version>/?recursive=true``: the files drawn from the instance, in one
        document (metadata/recursive.py), made once per change of the instance."""
        vendordata = self.vendordata

        def make() -> bytes:
            return recursive.instance_data(
                version,
                meta_data=guest.meta_data(version),
                user_data=guest.facts.user_data,
                network_data=render.network_data(guest.facts),
                vendor_data_json=vendordata.vendor_data_json,
            )

        return Answer(200, guest.document((recursive.__name__, version), make), render.JSON)


def _vendordata_request(guest: NovaGuest) -> VendordataRequest:
    facts = guest.facts
    return VendordataRequest(
        project_id=facts.project_id,
        instance_id=facts.uuid,
        image_id=facts.image_ref or "",
        user_data=facts.user_data,
        hostname=facts.hostname or "",
        metadata=dict(facts.meta),
        boot_roles=facts.boot_roles,
    )


def tagged(tagger: Tagger, answer: Answer, guest: NovaGuest | None, document: object) -> Answer:
    """``answer`` with its ETag: the instance's version and the document's identity, or a
    digest of the bytes of what is not drawn from the instance alone."""
    if answer.status != 200:
        return answer
    if guest is None or _by_bytes(document):
        tag = tagger.of_bytes(answer.body)
    else:
        tag = tagger.of_record(guest.version, document)
    return Answer(
        answer.status, answer.body, answer.content_type, (*answer.headers, (b"etag", tag))
    )


def _by_bytes(document: object) -> bool:
    """Documents not drawn from the instance alone: vendordata and the security groups."""
    if not isinstance(document, tuple) or not document or not isinstance(document[0], paths.Target):
        return True
    target = document[0]
    if target.kind == paths.OPENSTACK:
        return target.rest[0] in (paths.VENDOR_DATA, paths.VENDOR_DATA2)
    return render.needs_security_groups(target) or target.kind == paths.OPENSTACK_VERSIONS
