"""``vendordata_dynamic_failure_fatal``: a build whose dynamic vendordata cannot be fetched
fails, and the instance goes to ERROR with the target's name and the reason.

Runs in the operation's worker thread, before the driver is called, through one
ThreadedVendordata per compute app (one Keystone login, one cache for all builds).
"""

from __future__ import annotations

from cloudseed.cells.service import CellDatabases
from cloudseed.metadata.facts import GuestFacts, facts_from_record
from cloudseed.servers import records
from cloudseed.settings import Settings, split_list
from cloudseed.vendordata import ThreadedVendordata, VendordataRequest


def vendordata_request(facts: GuestFacts) -> VendordataRequest:
    return VendordataRequest(
        project_id=facts.project_id,
        instance_id=facts.uuid,
        image_id=facts.image_ref,
        user_data=facts.user_data,
        hostname=facts.hostname,
        metadata=dict(facts.meta),
        boot_roles=facts.boot_roles,
    )


class BuildCheck:
    def __init__(self, settings: Settings, cells: CellDatabases) -> None:
        self.cells = cells
        self.vendordata = ThreadedVendordata(settings)

    def __call__(self, uuid: str) -> None:
        with self.cells.for_instance(uuid).read() as session:
            facts = facts_from_record(records.load(session, uuid))
        self.vendordata.check_for_build(vendordata_request(facts))

    def close(self) -> None:
        self.vendordata.close()


def build_check(settings: Settings, cells: CellDatabases) -> BuildCheck | None:
    """The check to run before each build, or None when failures are not fatal."""
    api = settings.api
    if not (
        api.vendordata_dynamic_failure_fatal
        and "DynamicJSON" in split_list(api.vendordata_providers)
        and split_list(api.vendordata_dynamic_targets)
    ):
        return None
    return BuildCheck(settings, cells)
