"""The POSTs a guest makes to the metadata service, taken for that guest alone.

They are its password, its host keys (phone_home), cloud-init's boot reports, and its
acknowledgements of lifecycle notices (events.json). The app has identified the guest and
checked its token before; each post is written under its uuid, in its own cell.
"""

from __future__ import annotations

import asyncio

from cloudseed.cells.service import CellDatabases
from cloudseed.errors import InvalidInput
from cloudseed.hostkeys.intake import take_report
from cloudseed.metadata import tree
from cloudseed.metadata.answers import Answer
from cloudseed.metadata.documents import GuestDocuments
from cloudseed.metadata.errors import NoSuchDocument
from cloudseed.metadata.event_acks import acknowledge
from cloudseed.metadata.store import GuestStore
from cloudseed.servers.errors import PasswordTooLarge
from cloudseed.servers.lifecycle import password
from cloudseed.servers.readiness.intake import take_event
from cloudseed.types import Receive
from cloudseed.web.bodies import whole_body


class GuestPosts:
    """The POSTs of one metadata app (built at its start-up)."""

    def __init__(self, store: GuestStore[GuestDocuments], cells: CellDatabases) -> None:
        self.store = store
        self.cells = cells

    async def take(
        self, kind: str, uuid: str, receive: Receive, headers: list[tuple[bytes, bytes]]
    ) -> Answer:
        """Take the POST of the guest ``uuid`` to a document of ``kind``."""
        if kind == tree.PHONE_HOME:  # cloud-init's report of its host keys (hostkeys/)
            return Answer(200, await take_report(receive, headers, caller=uuid, cells=self.cells))
        if kind == tree.BOOT_REPORT:  # cloud-init's reporting webhook (readiness/)
            return Answer(200, await take_event(receive, caller=uuid, cells=self.cells))
        if kind == tree.EVENTS:  # lifecycle notices (2.111)
            return await acknowledge(receive, cells=self.cells, uuid=uuid)
        if kind == tree.PASSWORD:
            await self._password(uuid, receive)
            return Answer(200, b"")
        # The app's ALLOWED lets no other document be posted to.
        raise NoSuchDocument("nothing at this path")  # pragma: no cover

    async def _password(self, uuid: str, receive: Receive) -> None:
        body = await whole_body(receive, limit=password.MAX_SIZE, too_large=PasswordTooLarge)
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput("The password is not valid UTF-8.") from None
        if not text:
            # As Nova: an empty post sets nothing, so the guest can still post its password.
            return
        cells = self.cells

        def write() -> None:
            # The app is the caller here: it owns the transaction, password.store takes it.
            cells.for_instance(uuid).run(
                lambda session: password.store(session, uuid, text), write=True
            )

        await asyncio.to_thread(write)
        self.store.changed(uuid)  # this worker answers from the new value at once
