"""Instance rows written straight into a cell database, for tests of the record layer that
need servers in a given state without the API and an agent making them."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from sqlalchemy.orm import Session

from cloudseed.db.engines import Database
from cloudseed.servers.models import Instance


def add_instance(
    db: Database,
    vm_state: str = "active",
    task_state: str | None = None,
    *,
    name: str = "s",
    columns: Mapping[str, object] | None = None,
) -> str:
    """A minimal live instance of project ``p`` in ``db``, with ``columns`` set too; its
    uuid."""
    uid = str(uuid.uuid4())

    def work(session: Session) -> None:
        session.add(
            Instance(
                uuid=uid,
                display_name=name,
                hostname="s",
                project_id="p",
                user_id="u",
                image_ref="img",
                flavor_id="f",
                vm_state=vm_state,
                task_state=task_state,
                reservation_id="r-1",
                **(columns or {}),
            )
        )

    db.run(work, write=True)
    return uid
