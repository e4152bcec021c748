"""``vendordata_dynamic_failure_fatal``: a build whose dynamic vendordata cannot be fetched
fails, and the instance goes to ERROR with the target's name and the reason.

Runs in the operation's worker thread, before the driver is called, through one
ThreadedVendordata per compute app (one Keystone login, one cache for all builds).

What is posted for an instance comes from ``request_for`` (its uuid to its VendordataRequest):
vendordata does not read instances; the compute app passes the metadata service's mapping
(``metadata.loading.vendordata_request_for``).
"""

from __future__ import annotations

from collections.abc import Callable

from cloudseed.settings import Settings, split_list
from cloudseed.vendordata.request import VendordataRequest
from cloudseed.vendordata.threaded import ThreadedVendordata

RequestFor = Callable[[str], VendordataRequest]


class BuildCheck:
    def __init__(self, settings: Settings, request_for: RequestFor) -> None:
        self.request_for = request_for
        self.vendordata = ThreadedVendordata(settings)

    def __call__(self, uuid: str) -> None:
        self.vendordata.check_for_build(self.request_for(uuid))

    def close(self) -> None:
        self.vendordata.close()


def build_check(settings: Settings, request_for: RequestFor) -> BuildCheck | None:
    """The check to run before each build, or None when failures are not fatal."""
    api = settings.api
    if not (
        api.vendordata_dynamic_failure_fatal
        and "DynamicJSON" in split_list(api.vendordata_providers)
        and split_list(api.vendordata_dynamic_targets)
    ):
        return None
    return BuildCheck(settings, request_for)
