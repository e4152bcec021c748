"""Whether a server boots from an image, for the Glance slice's delete: a server's disk may be
a qcow2 overlay on the image's file (the qemu driver), so the file stays while one does.

The question spans the cells and the instance table, which the images domain is below; the
app's lifespan hands this function to it in the images' state fragment
(``images.glance_api.ImagesState``), as it hands quotas their usage counter.
"""

from __future__ import annotations

from sqlalchemy import select

from cloudseed.cells.service import CellDatabases
from cloudseed.servers.models import Instance


def image_in_use(cells: CellDatabases, image_uuid: str) -> bool:
    for db in cells.all_cells_by_id().values():
        with db.read() as session:
            used = session.scalar(
                select(Instance.id)
                .where(Instance.image_ref == image_uuid, Instance.deleted == 0)
                .limit(1)
            )
        if used is not None:
            return True
    return False
