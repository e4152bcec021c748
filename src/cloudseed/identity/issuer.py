"""The issuer every process names: in the tokens the metadata service signs and in the
discovery document the compute API serves, which relying parties compare character for
character."""

from __future__ import annotations

import functools
import socket

from cloudseed.settings import Settings

WILDCARDS = frozenset({"", "0.0.0.0", "::"})

# Asked once per process: a resolver lookup per request would be slow, and the name is fixed.
_fqdn = functools.cache(socket.getfqdn)


def issuer_of(settings: Settings) -> str:
    """``[identity] issuer``, else ``[api] compute_link_prefix`` (the compute API's public
    URL), else the address the compute API listens on (a wildcard address replaced by this
    machine's fully qualified name), without a trailing slash."""
    configured = settings.identity.issuer or settings.api.compute_link_prefix
    if configured:
        return configured.rstrip("/")
    host = settings.default.osapi_compute_listen
    if host in WILDCARDS:
        host = _fqdn()
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.default.osapi_compute_listen_port}"
