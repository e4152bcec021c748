"""ETags, ``If-None-Match`` and long-polls for the metadata app (etags.py tags, changes.py
waits; docs/change-notification.md).

Every 200 answer to a GET or HEAD of a document carries an ETag; ``If-None-Match`` naming it
(or ``*``) gets 304 with no body. On the OpenStack tree's documents (``WAITABLE``) a query may
ask to wait for a change (``wait_for_change``) or for the recursive view of ``/openstack/<v>/``.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Awaitable, Callable

from cloudseed.errors import InvalidInput
from cloudseed.metadata import changes, etags, render_ec2, tree
from cloudseed.metadata.answers import Answer
from cloudseed.metadata.documents import GuestDocuments
from cloudseed.settings import Settings
from cloudseed.types import Receive

# The OpenStack tree's documents a guest may long-poll.
WAITABLE = frozenset(
    {
        tree.OPENSTACK_VERSION,
        tree.META_DATA,
        tree.USER_DATA,
        tree.NETWORK_DATA,
        tree.PASSWORD,
        tree.VENDOR_DATA,
        tree.VENDOR_DATA2,
        tree.EVENTS,  # and EC2's events (metadata/events.py), the one EC2 path that waits
        tree.EC2_EVENTS,
    }
)
# Documents not drawn from the instance record: their ETag is a digest of their bytes.
TAGGED_BY_BYTES = frozenset(
    {
        tree.EC2_INDEX,
        tree.EC2_INDEX_IDENTIFIED,
        tree.OPENSTACK_INDEX,
        tree.VENDOR_DATA,
        tree.VENDOR_DATA2,
        tree.EC2_DYNAMIC,
        # Events: a watcher wakes when they change, not at each change of the record.
        tree.EVENTS,
        tree.EC2_EVENTS,
    }
)


def fingerprint(settings: Settings) -> str:
    """What shapes the documents besides the record: the code and the settings it reads."""
    try:
        code = importlib.metadata.version("cloudseed")
    except importlib.metadata.PackageNotFoundError:
        code = "unknown"
    m = settings.metadata  # the recursive view holds vendor_data.json with readiness's part
    return etags.fingerprint(
        code,
        settings.api.dhcp_domain,
        settings.api.vendordata_providers,
        m.boot_report_webhook,
        m.boot_report_url,
    )


class Freshness:
    def __init__(self, settings: Settings) -> None:
        m = settings.metadata
        self.default_timeout = m.wait_timeout_sec
        self.max_timeout = m.max_wait_timeout_sec
        self.tagger = etags.Tagger(fingerprint(settings))
        self.waiters = changes.Waiters(per_instance=m.max_waiters_per_instance, total=m.max_waiters)

    def query(self, target: tree.Target, query: bytes) -> changes.Query:
        """What the query asks of ``target`` beyond the document (InvalidInput if wrong)."""
        if not query or target.kind not in WAITABLE:
            return changes.NO_QUERY
        ask = changes.parse_query(
            query, default_timeout=self.default_timeout, max_timeout=self.max_timeout
        )
        if ask.recursive and target.kind != tree.OPENSTACK_VERSION:
            raise InvalidInput("recursive=true is only for /openstack/<version>/.")
        return ask

    def tagged(
        self,
        answer: Answer,
        guest: GuestDocuments | None,
        document: tuple[tree.Target, bool] | None = None,
        address: str | None = None,
    ) -> Answer:
        """``answer`` with its ETag; ``document`` is (target, recursive), ``address`` the
        caller's."""
        if answer.status != 200:
            return answer
        if guest is None or document is None or document[0].kind in TAGGED_BY_BYTES:
            tag = self.tagger.of_bytes(answer.body)
        elif (
            document[0].kind == tree.EC2_META_DATA
            and address
            and render_ec2.first_ipv4(guest.facts) is None
        ):
            # local-ipv4 is then the address asked from (render_ec2.ec2_meta_data): one more
            # thing the document depends on.
            tag = self.tagger.of_record(guest.version, (*document, address))
        else:
            tag = self.tagger.of_record(guest.version, document)
        headers = (*answer.headers, (b"etag", tag))
        return Answer(answer.status, answer.body, answer.content_type, headers, answer.sent)

    @staticmethod
    def conditional(answer: Answer, headers: list[tuple[bytes, bytes]]) -> Answer:
        """304 for an ``If-None-Match`` that names ``answer``'s tag (or ``*``)."""
        tag = answer.etag
        if tag:
            for name, value in headers:
                if name == b"if-none-match" and etags.none_match(value, tag):
                    # The guest has the document: what a 200 would record, a 304 does too.
                    return Answer(304, b"", headers=((b"etag", tag),), sent=answer.sent)
        return answer

    async def wait(
        self,
        uuid: str,
        ask: changes.Query,
        receive: Receive,
        current: Callable[[], Awaitable[Answer]],
        expiry: Callable[[], float | None],
    ) -> Answer:
        """``expiry()``: when the next key the guest is served expires (POSIX time)."""
        return await changes.long_poll(
            self.waiters, uuid, ask, receive, current=current, tag_of=_etag_of, expiry=expiry
        )


def _etag_of(answer: Answer) -> bytes:
    return answer.etag
