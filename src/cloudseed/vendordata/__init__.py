"""Vendordata: what the operator (StaticJSON) and external services (DynamicJSON) add to each
instance's bootstrap data, served as vendor_data.json and vendor_data2.json by the metadata
service and written to config drives.

    request.py        VendordataRequest: what DynamicJSON posts (IO-free)
    documents.py      strict JSON, compact bytes, vendor_data2.json assembly (IO-free)
    cache_control.py  a target's Cache-Control as a CachePolicy (IO-free)
    cache.py          AnswerCache: freshness, ETag, single flight, stale-if-error, back-off
                      (asyncio only; the calls are passed in)
    static.py         StaticFile: the operator's JSON file, re-read when it changes
    targets.py        TargetClient: one httpx client per target; what an answer means
    service_token.py  keystoneauth1 service token (imported only when configured)
    service.py        Vendordata: the providers together, as the metadata service uses them
    threaded.py       ThreadedVendordata: a Vendordata on its own loop, for worker threads
    build_check.py    the check before a build when dynamic failures are fatal
    login_check.py    the login-time key check's parts ([keys] login_check; IO-free)
    authorized_keys_command.py  the guest's AuthorizedKeysCommand (stdlib, never imported)
    errors.py         VendordataFileError (ConfigError), VendordataError (ServiceUnavailable)

docs/vendordata.md is the operator's side of this.
"""

from cloudseed.vendordata.errors import VendordataError, VendordataFileError
from cloudseed.vendordata.request import VendordataRequest
from cloudseed.vendordata.service import Vendordata
from cloudseed.vendordata.threaded import ThreadedVendordata

__all__ = [
    "ThreadedVendordata",
    "Vendordata",
    "VendordataError",
    "VendordataFileError",
    "VendordataRequest",
]
