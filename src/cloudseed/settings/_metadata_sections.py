"""What guests and scrapers reach: the metadata service's ``[neutron]`` (its proxy) and
``[metadata]``, signed instance identity ``[identity]``, and ``[metrics]`` (both listeners)."""

from __future__ import annotations

from dataclasses import dataclass

from cloudseed.settings._options import option


@dataclass(frozen=True)
class NeutronSection:
    """``[neutron]``: how the metadata service trusts a metadata proxy (Nova's options)."""

    service_metadata_proxy: bool = option(
        False,
        "Requests come through a metadata proxy that names the instance in signed "
        "X-Instance-ID headers (Neutron's metadata agent, or the qemu driver's proxy). "
        "Otherwise the instance is found by the request's source address.",
    )
    metadata_proxy_shared_secret: str = option(
        "",
        "Secret the proxy signs X-Instance-ID (and X-Metadata-Provider) with: hex HMAC-SHA256.",
        secret=True,
    )


@dataclass(frozen=True)
class MetadataSection:
    """``[metadata]``: the metadata service's own behaviour (cloudseed's section)."""

    trusted_proxies: str = option(
        "",
        "Comma-separated addresses or networks of HTTP proxies in front of the metadata "
        "service. Only requests from these may name the client in X-Forwarded-For or "
        "Forwarded; from anyone else those headers are ignored.",
    )
    # -- issue 13 (P3): which forwarding header the trusted proxies set --
    forwarded_header: str = option(
        "x-forwarded-for",
        "The one forwarding header the trusted proxies set: x-forwarded-for (as Nova "
        "reads) or forwarded (RFC 7239). The other kind is the guest's own and never counts, "
        "and the client is the right-most hop that is not a trusted proxy (the one the "
        "proxy appended), never an address the guest wrote.",
        choices=("x-forwarded-for", "forwarded"),
    )
    require_token: bool = option(
        False,
        "Require a session token (PUT /latest/api/token, then "
        "X-aws-ec2-metadata-token) on every request, on both trees, for servers whose "
        "metadata options (microversion 2.109) leave http_tokens unset. Per instance, the "
        "server metadata item metadata_http_tokens=required does the same.",
    )
    token_secret: str = option(
        "",
        "Key that session tokens are signed with. Empty means a random key per start "
        "(tokens then end with a restart; guests ask for a new one on 401). Set the same "
        "value on every host behind one address.",
        secret=True,
    )
    hop_limit: int = option(
        0,
        "IP TTL and IPv6 hop limit of the metadata service's responses, and of the qemu "
        "driver's metadata proxies on bridged networks (EC2's hop limit: 1 keeps answers "
        "from leaving the first hop). 0 means the system default. A server's metadata option "
        "http_put_response_hop_limit (microversion 2.109) sets its token answers' own.",
        minimum=0,
    )
    # -- issue 35 (part 4): the token-less access audit (docs/metadata.md) --
    access_audit_interval: int = option(
        5,
        "How often each metadata worker writes the token-less access audit's counts (the "
        "requests each server made without a session token, its user data and password "
        "reads among them) to the cell databases, in seconds: what GET "
        "/servers/{id}/metadata-access shows is up to this far behind, and a worker killed "
        "loses at most this much of its counting.",
        minimum=1,
    )
    # -- issue 35 (part 5): readiness, cloud-init's reporting webhook (docs/metadata.md) --
    boot_report_webhook: str = option(
        "opt-in",
        "Which servers' vendordata turns on cloud-init's reporting webhook, posting each step "
        "of the boot to boot_report_url so that the compute API shows the server's "
        "bootstrap_status (microversion 2.110): 'opt-in', those whose metadata item "
        "cloudseed:boot_report is true; 'all'; 'never'. Served by the metadata service "
        "only, never written to config drives or NoCloud seeds.",
        choices=("opt-in", "all", "never"),
    )
    boot_report_url: str = option(
        "http://169.254.169.254/openstack/latest/boot_report",
        "Where the webhook of boot_report_webhook posts: this listener's "
        "/openstack/latest/boot_report as guests reach it.",
    )
    change_poll_interval_ms: int = option(
        20,
        "How often each worker looks for changed instances in the cell databases, in "
        "milliseconds. A change is served by every worker within this time. On PostgreSQL "
        "this applies only while a worker's LISTEN connection is down (see "
        "change_fallback_interval_ms).",
        minimum=1,
    )
    change_fallback_interval_ms: int = option(
        1000,
        "On PostgreSQL, where each worker LISTENs for changes (a NOTIFY is sent when one "
        "commits) and looks at once when told, how often it looks anyway, in milliseconds: "
        "the bound on staleness should a notification never arrive (a connection that died "
        "unnoticed). SQLite and MariaDB have no NOTIFY and use change_poll_interval_ms.",
        minimum=1,
    )
    load_ahead_seconds: int = option(
        300,
        "Each worker loads the guests whose instances began to boot (a build, rebuild, reboot "
        "or start finished) ahead of their first request, as the change feed tells of them, "
        "and, when it starts, those that began within this many seconds (at most 600, the "
        "feed's retention): a boot storm's first requests find them cached. Loading ahead "
        "waits while the worker answers more than 1,000 lookups a second (a guest that asks "
        "meanwhile loads at its request), and never evicts a cached guest. 0: none is "
        "loaded ahead; each loads at its first request.",
        minimum=0,
        maximum=600,
    )
    cache_size: int = option(
        100000,
        "Instances whose rendered documents each worker keeps in memory (least "
        "recently used ones are dropped).",
        minimum=1,
    )
    access_log: bool = option(
        False, "Log every metadata request. Refused and failed requests are always logged."
    )
    # -- issue 18 (part 1): long-poll on the OpenStack tree (docs/change-notification.md) --
    wait_timeout_sec: int = option(
        300,
        "How long a long-poll (?wait_for_change=true) waits for a change when the guest "
        "gives no timeout_sec, in seconds.",
        minimum=1,
    )
    max_wait_timeout_sec: int = option(
        3600,
        "The longest timeout_sec a guest may ask a long-poll to wait, in seconds "
        "(a larger value is refused with 400).",
        minimum=1,
    )
    max_waiters_per_instance: int = option(
        16,
        "Long-polls one instance may have waiting in one worker at once; one more is answered 503.",
        minimum=1,
    )
    max_waiters: int = option(
        20000,
        "Long-polls waiting in one worker at once, all instances together; one more is "
        "answered 503.",
        minimum=1,
    )
    # -- issue 30: slow and many connections from one guest (docs/deployment.md) --
    request_timeout: int = option(
        60,
        "Seconds from the first byte of a request on the metadata listener to its last, body "
        "included (a password or phone_home POST); a request not whole by then gets 408 "
        "Request Timeout, nothing of it is kept, and the connection is closed. "
        "[wsgi] header_timeout still bounds the head. The default is nginx's "
        "client_body_timeout; the compute API has no such deadline (image uploads take as "
        "long as they take).",
        minimum=1,
    )
    max_connections_per_address: int = option(
        100,
        "Connections one source address may hold open on the metadata listener, in each "
        "worker process; one more is answered 503 (Retry-After: 1) at once, without reading "
        "it, and closed, and logged at most once a minute per address. A guest's connections "
        "are spread over the workers by the kernel, so it may hold at most this times "
        "[DEFAULT] workers. Never applied to addresses in trusted_proxies, nor to any address "
        "with [neutron] service_metadata_proxy (the callers are then metadata proxies, each "
        "relaying many guests: bound each guest at the proxy). 0 means no cap. Nova has none; "
        "100 leaves room for max_waiters_per_instance (16) long-polls and a guest's usual "
        "handful of connections.",
        minimum=0,
    )
    # -- issue 34 (part 1): NoCloud seed URLs (docs/metadata.md#nocloud-seeds) --
    nocloud_seed_url: str = option(
        "http://169.254.169.254/nocloud/",
        "The base of the NoCloud seed URLs the compute API hands out (GET "
        "/servers/{id}/nocloud-seed, microversion 2.107): where guests reach this "
        "listener's /nocloud/ path. The default is the metadata address guests of "
        "cloudseed's networks see; for bare metal on a provisioning network, the address "
        "(and port) of a metadata listener that network reaches, e.g. "
        "http://10.0.0.2:8775/nocloud/. A seed URL is this plus the seed's token and /.",
    )
    nocloud_seed_lifetime: int = option(
        604800,
        "How long a NoCloud seed URL works after it is made (its first GET, or a rotate), in "
        "seconds; a GET after it expired makes a new one. 0 means seed URLs never expire.",
        minimum=0,
    )
    nocloud_seed_secret: str = option(
        "",
        "Key that NoCloud seed tokens are derived with (HMAC-SHA256 of the server and the "
        "seed's random nonce). Set it (the same on every API and metadata node) so that a copy "
        "of the cell databases does not give away seed URLs; empty means the nonce kept in "
        "the server's system metadata is all the token's secrecy. Changing it invalidates "
        "every seed URL handed out.",
        secret=True,
    )


@dataclass(frozen=True)
class IdentitySection:
    """``[identity]``: signed instance identity (cloudseed's own section; docs/identity.md)."""

    issuer: str = option(
        "",
        "The iss of identity tokens and the issuer of the OpenID discovery document, whose "
        "jwks_uri is built from it: a URL relying parties reach the compute API at. Empty "
        "means [api] compute_link_prefix, or "
        "else http://<osapi_compute_listen>:<osapi_compute_listen_port> (a wildcard address "
        "replaced by this machine's fully qualified name). Set it in production: relying "
        "parties match it exactly.",
    )
    region: str = option(
        "",
        "The region of EC2 identity documents. Empty means the instance's availability zone.",
    )
    token_ttl_seconds: int = option(
        600,
        "How long an identity token (/openstack/latest/identity_token) is valid, in seconds.",
        minimum=30,
    )
    key_grace_seconds: int = option(
        86400,
        "How long the public key of a signing key retired by `cloudseed identity rotate` stays "
        "published (certificates, JWKS), so what it signed can still be verified; then it is "
        "dropped. At least token_ttl_seconds plus twice key_cache_seconds.",
        minimum=60,
    )
    key_cache_seconds: int = option(
        10,
        "How long each process keeps the signing keys it read from the API database. A "
        "rotated key is published at once and signs only after twice this time, when every "
        "process has seen it. 0 reads them for every request (tests, a single process).",
        minimum=0,
    )
    key_encryption_secret: str = option(
        "",
        "Passphrase the signing keys' private halves are encrypted with in the API database "
        "(PKCS#8, the best encryption the cryptography library offers). Empty means they are "
        "stored unencrypted, readable by whoever can read the database. Keys written before it "
        "was set stay as they were until the next rotation.",
        secret=True,
    )


@dataclass(frozen=True)
class MetricsSection:
    """``[metrics]``: the Prometheus endpoint, GET /metrics on both listeners (docs/metrics.md)."""

    enabled: bool = option(True, "Serve GET /metrics on the compute API and metadata listeners.")
    allow_from: str = option(
        "127.0.0.0/8,::1",
        "Comma-separated addresses or networks of the scrapers /metrics answers (no token "
        "needed). On the compute API anyone else gets 403; on the metadata listener anyone "
        "else, and any request relayed for a guest (proxy or identity headers), gets the 404 of "
        "an unknown path.",
    )
