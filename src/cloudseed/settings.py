"""One typed settings object, built once at start-up and passed to the app factories.

Precedence, lowest first: defaults < config file < ``CLOUDSEED_*`` environment < command-line
flags. The config file is an INI file laid out like ``nova.conf``: where Nova has an option for
the same thing, the section, name and meaning are Nova's, so an operator can carry a nova.conf
over. Each option is declared once, as a dataclass field with its default and help text
(``option()``); ``docs/configuration.md`` is checked against this registry by a test.

Environment variables are ``CLOUDSEED_<SECTION>__<NAME>`` (``CLOUDSEED_API__MAX_LIMIT``), and
``CLOUDSEED_<NAME>`` for the ``[DEFAULT]`` section (``CLOUDSEED_STATE_PATH``).

Nothing else in cloudseed reads the environment or a config file, and nothing reads settings at
import time.
"""

from __future__ import annotations

import configparser
import dataclasses
import ipaddress
import math
import os
import re
import types
import typing
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cloudseed.errors import ConfigError

ENV_PREFIX = "CLOUDSEED_"
# Environment variables with our prefix that are not settings (the test suite's own start
# with CLOUDSEED_TEST_).
NON_SETTING_ENV = frozenset({"CLOUDSEED_CONFIG", "CLOUDSEED_REQUIRE_DBS"})
NON_SETTING_ENV_PREFIX = "CLOUDSEED_TEST_"
# Sections handed to a library as they are; their option names are the library's business.
PASSTHROUGH_SECTIONS = frozenset({"keystone_authtoken", "vendordata_dynamic_auth"})


class Secret(str):
    """A setting's value that must not be shown: a password, a shared secret, a database URL
    with a password in it.

    It is the string itself everywhere it is used (hashing, headers, handing it to a library),
    but its ``repr`` is a mask, so a Settings object in a log line, a traceback's locals or a
    debugger shows ``Secret('**********')`` instead of the value. Messages about a setting name
    the setting, never interpolate its value.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "Secret('**********')"


# Pass-through options whose values are secrets, by the name the library gives them
# (keystonemiddleware's password, admin_token, memcache_secret_key; keystoneauth's password,
# application_credential_secret, token ...).
SECRET_PASSTHROUGH_NAME = re.compile(r"(password|secret|secret_key|_token|^token)$")


def option(
    default: Any,
    help: str,
    *,
    choices: tuple[str, ...] = (),
    minimum: int | None = None,
    secret: bool = False,
) -> Any:
    """Declare a setting: its default, its help text and the checks on its value."""
    return field(
        default=default,
        metadata={"help": help, "choices": choices, "minimum": minimum, "secret": secret},
    )


@dataclass(frozen=True)
class DefaultSection:
    """``[DEFAULT]``: where things live and which sockets are served."""

    state_path: str = option(
        "./var",
        "Directory for cloudseed's own files: the embedded SQLite databases and "
        "the config drives, instances/<uuid>/disk.config (Nova's state_path). Relative "
        "paths are taken from the working directory.",
    )
    osapi_compute_listen: str = option("127.0.0.1", "Address the compute API listens on.")
    osapi_compute_listen_port: int = option(
        8774, "Port the compute API listens on (0 picks a free one).", minimum=0
    )
    metadata_listen: str = option("127.0.0.1", "Address the metadata service listens on.")
    metadata_listen_port: int = option(
        8775, "Port the metadata service listens on (0 picks a free one).", minimum=0
    )
    workers: int = option(
        1,
        "Worker processes serving both HTTP apps (Nova has osapi_compute_workers and "
        "metadata_workers; cloudseed's workers serve both).",
        minimum=1,
    )
    log_level: str = option("info", "Log level.", choices=("debug", "info", "warning", "error"))
    compute_driver: str = option(
        "fake",
        "What runs instances: 'fake' keeps them in memory (development, tests); "
        "'qemu' runs each as a qemu-system-x86_64 process on this host (configure [qemu]; "
        "needs [neutron] service_metadata_proxy).",
        choices=("fake", "qemu"),
    )
    force_config_drive: bool = option(
        False, "Give every new instance a config drive, whatever the request says."
    )
    config_drive_format: str = option(
        "iso9660",
        "Filesystem of new config drives: 'iso9660' (Rock Ridge and Joliet, "
        "attached as a CD-ROM) or 'vfat' (FAT16 with long names, attached as a disk). Both "
        "are labelled config-2 and built in-process.",
        choices=("iso9660", "vfat"),
    )
    # issue 14: compute hosts (Nova's names and defaults).
    host: str = option(
        "",
        "Name of this compute host: the agent that runs here owns the guests scheduled to "
        "it. Empty means the machine's hostname (Nova's host).",
    )
    service_down_time: int = option(
        60,
        "Seconds since its last heartbeat after which a compute service counts as down and "
        "gets no new servers.",
        minimum=1,
    )
    report_interval: int = option(10, "Seconds between a compute agent's heartbeats.", minimum=1)
    default_availability_zone: str = option(
        "nova", "Availability zone of compute hosts (Nova's default_availability_zone)."
    )
    default_schedule_zone: str = option(
        "",
        "Availability zone new servers go to when the request names none (Nova's "
        "default_schedule_zone); empty: any zone.",
    )
    max_concurrent_builds: int = option(
        10, "Operations one compute agent runs at the same time.", minimum=1
    )
    resume_guests_state_on_host_boot: bool = option(
        True,
        "When a compute agent starts, start again the guests of its host that the database "
        "shows running (ACTIVE) but that are switched off: each gets a queued start, an "
        "instance action 'start' by the agent. When false they are recorded as they are: "
        "SHUTOFF (vm_state stopped, power state shutdown), with an instance action 'stop'. "
        "Nova's option, whose default is false; cloudseed's is true because cloudseed "
        "switches guests off whenever its service stops or dies, not only when the host "
        "reboots.",
    )
    reserved_host_memory_mb: int = option(
        512, "RAM kept back for the host itself when scheduling.", minimum=0
    )
    reserved_host_disk_mb: int = option(
        0, "Disk kept back for the host itself when scheduling.", minimum=0
    )
    initial_cpu_allocation_ratio: float = option(
        4.0, "Virtual CPUs per physical CPU the scheduler may hand out."
    )
    initial_ram_allocation_ratio: float = option(1.0, "RAM overcommit the scheduler allows.")
    initial_disk_allocation_ratio: float = option(1.0, "Disk overcommit the scheduler allows.")


@dataclass(frozen=True)
class ComputeSection:
    """``[compute]``: durable operations and the compute agent (cloudseed's own options)."""

    lease_seconds: int = option(
        20,
        "How long an agent's claim on an operation lasts without renewal. An agent that "
        "dies leaves its operations to the next agent of its host after this long, so every "
        "instance reaches a final state within about this time after a restart.",
        minimum=2,
    )
    poll_interval_ms: int = option(
        1000,
        "How often an idle agent looks for new operations when the database cannot push "
        "(PostgreSQL LISTEN/NOTIFY wakes it at once).",
        minimum=10,
    )
    vcpus: int = option(0, "vCPUs this host offers; 0: the machine's CPU count.", minimum=0)
    memory_mb: int = option(0, "RAM this host offers in MiB; 0: the machine's.", minimum=0)
    disk_gb: int = option(
        0, "Disk this host offers in GiB; 0: the free space under state_path.", minimum=0
    )


@dataclass(frozen=True)
class KeysSection:
    """``[keys]``: live keys (2.106), how key changes reach running guests (cloudseed's own
    section)."""

    login_user: str = option(
        "root",
        "The guest account whose authorized_keys the compute agent edits through "
        "qemu-guest-agent when a server's image has no os_admin_user property.",
    )
    login_check: bool = option(
        False,
        "Whether cloudseed's vendordata carries a cloud-config part that installs an sshd "
        "AuthorizedKeysCommand fetching the server's current keys from the metadata service "
        "at each login (and sets allow_public_ssh_keys: false), so key changes and expiry "
        "apply at the next login. Served by the metadata service only, never written to "
        "config drives (a guest without the metadata service would have no keys); "
        "docs/live-keys.md.",
    )


@dataclass(frozen=True)
class ApiSection:
    """``[api]``: the compute API's behaviour."""

    auth_strategy: str = option(
        "noauth2",
        "How API requests are authenticated. 'keystone' validates tokens against "
        "Keystone (configure [keystone_authtoken]); 'noauth2' trusts an "
        "'X-Auth-Token: <user_id>:<project_id>' header and is for development only: the user "
        "'admin' is an administrator.",
        choices=("noauth2", "keystone"),
    )
    max_limit: int = option(1000, "The most items a collection returns in one response.", minimum=0)
    compute_link_prefix: str = option(
        "",
        "Replaces scheme, host and port (and prefixes the path) of links in responses, "
        "for deployments behind a proxy. Empty means links use the request's own URL.",
    )
    keypair_generation_algorithm: str = option(
        "rsa",
        "Key type generated when a client asks the server to generate a key pair "
        "(microversions below 2.92): 'rsa' (2048 bits, as Nova) or 'ed25519'. cloudseed's own "
        "option.",
        choices=("rsa", "ed25519"),
    )
    dhcp_domain: str = option(
        "novalocal",
        "Domain appended to the instance hostname in the metadata service and "
        "config drive ('hostname' in meta_data.json). Empty means none.",
    )
    config_drive_skip_versions: str = option(
        "1.0 2007-01-19 2007-03-01 2007-08-29 2007-10-10 2007-12-15 2008-02-01 2008-09-01",
        "Space-separated EC2 metadata versions (and 'latest') left off config drives, as in "
        "Nova: only the EC2 tree is affected, every OpenStack version is always written.",
    )
    vendordata_providers: str = option(
        "StaticJSON",
        "Comma-separated vendordata providers, in order: 'StaticJSON' (the file "
        "vendordata_jsonfile_path) and 'DynamicJSON' (the services in "
        "vendordata_dynamic_targets).",
    )
    vendordata_jsonfile_path: str = option(
        "",
        "JSON file served as vendor_data.json and as 'static' in vendor_data2.json. "
        "Empty means {}.",
    )
    vendordata_dynamic_targets: str = option(
        "",
        "Comma-separated 'name@url' entries: the services DynamicJSON POSTs each "
        "instance's details to; each answer is served under its name in vendor_data2.json.",
    )
    vendordata_dynamic_ssl_certfile: str = option(
        "", "CA bundle for verifying https vendordata targets. Empty means the system's."
    )
    vendordata_dynamic_connect_timeout: int = option(
        5, "Seconds to wait for a vendordata target to accept the connection.", minimum=3
    )
    vendordata_dynamic_read_timeout: int = option(
        5, "Seconds to wait for a vendordata target's answer.", minimum=0
    )
    # Issue 13: an absolute bound on one create request, before any quota is counted.
    max_count_per_request: int = option(
        500,
        "The most servers one create request may ask for (max_count, or min_count when "
        "larger); more is refused with 400 before anything is counted or allocated. "
        "cloudseed's own option: Nova bounds max_count only by the instance quota, which "
        "may be unlimited (-1); this keeps one request's time and memory bounded even then "
        "(500 servers are written in about 2 s on SQLite, so a stop never waits long for "
        "one). Larger boot storms take several requests.",
        minimum=1,
    )
    vendordata_dynamic_failure_fatal: bool = option(
        False,
        "A failing vendordata target fails the instance's build (ERROR with the "
        "reason). Otherwise its entry is {} and a warning is logged.",
    )
    # Issue 17: live keys (2.106).
    max_keys_per_server: int = option(
        16,
        "The most key pairs a server may name in key_names (create, rebuild, PUT; "
        "microversion 2.106), and the most keys PUT /os-project-keys may attach to a "
        "project; more is refused with 400. cloudseed's own option.",
        minimum=1,
    )


@dataclass(frozen=True)
class QuotaSection:
    """``[quota]``: default limits; per-project and per-user overrides live in the API DB."""

    key_pairs: int = option(100, "Key pairs each user may have (-1 for unlimited).", minimum=-1)
    injected_files: int = option(
        5,
        "Personality files a server create or rebuild may carry (microversions below "
        "2.57; they go onto the config drive). -1 for unlimited.",
        minimum=-1,
    )
    injected_file_content_bytes: int = option(
        10240,
        "Longest personality file content, counted as Nova does: the length of its "
        "base64 text. -1 for unlimited.",
        minimum=-1,
    )
    injected_file_path_length: int = option(
        255, "Longest personality file path, in characters. -1 for unlimited.", minimum=-1
    )
    # Instance quotas (issue 13): Nova's [quota] instances, cores, ram.
    instances: int = option(10, "Instances each project may have (-1 for unlimited).", minimum=-1)
    cores: int = option(
        20,
        "Instance cores (the flavors' vcpus) each project may use (-1 for unlimited).",
        minimum=-1,
    )
    ram: int = option(
        51200,
        "Megabytes of instance RAM (the flavors' memory_mb) each project may use "
        "(-1 for unlimited).",
        minimum=-1,
    )
    recheck_quota: bool = option(
        True,
        "Count again after creating, and undo the creation if concurrent requests "
        "pushed the user over the limit.",
    )


@dataclass(frozen=True)
class ApiDatabaseSection:
    """``[api_database]``: the global database (key pairs, cell and instance mappings, quotas)."""

    connection: str = option(
        "",
        "SQLAlchemy URL of the API database. Empty means SQLite at "
        "<state_path>/cloudseed_api.sqlite.",
        secret=True,
    )


@dataclass(frozen=True)
class DatabaseSection:
    """``[database]``: the default cell's database (instances); more cells are registered
    in the API database's cell mappings."""

    connection: str = option(
        "",
        "SQLAlchemy URL of the default cell's database. Empty means SQLite at "
        "<state_path>/cloudseed_cell1.sqlite.",
        secret=True,
    )


@dataclass(frozen=True)
class OsloMiddlewareSection:
    """``[oslo_middleware]``: request limits (Nova applies them through oslo.middleware)."""

    max_request_body_size: int = option(
        114688, "Largest request body accepted, in bytes; larger ones get 413.", minimum=1
    )


@dataclass(frozen=True)
class GlanceSection:
    """``[glance]``: the Glance slice's image uploads (Glance's own option names)."""

    image_size_cap: int = option(
        10 * 1024**3,
        "Largest image a project may upload through the Glance slice (PUT /v2/images/{id}/file), "
        "in bytes; a larger one gets 413 and nothing is kept. Glance's default is 1 TiB; "
        "cloudseed's is 10 GiB, since its store is the host's own disk.",
        minimum=1,
    )


# --- [wsgi]: request head limits (issue 13, P2) ---
@dataclass(frozen=True)
class WsgiSection:
    """``[wsgi]``: limits on request heads, on both listeners (compute API and metadata)."""

    max_header_line: int = option(
        16384,
        "Longest header line accepted, in bytes (Nova's option); a longer one gets 431 and the "
        "connection is closed.",
        minimum=256,
    )
    max_request_line: int = option(
        8192,
        "Longest request line (method, URL, version) accepted, in bytes; a longer one gets "
        "414 and the connection is closed.",
        minimum=256,
    )
    max_header_size: int = option(
        65536,
        "Largest request head (request line and all headers) accepted, in bytes; a larger one "
        "gets 431 and the connection is closed.",
        minimum=1024,
    )


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
        "X-aws-ec2-metadata-token) on every request, on both trees. Per instance, the server "
        "metadata item metadata_http_tokens=required does the same.",
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
        "IP TTL of the metadata service's responses (EC2's hop limit: 1 keeps answers "
        "from leaving the first hop). 0 means the system default.",
        minimum=0,
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


@dataclass(frozen=True)
class LibvirtSection:
    """``[libvirt]``: disk image injection (Nova's option names)."""

    inject_partition: int = option(
        -2,
        "Where to inject into the image: -2 never, -1 find the root filesystem by "
        "inspection, 0 the whole disk is the filesystem, N partition N.",
        minimum=-2,
    )
    inject_key: bool = option(False, "Inject the instance's key into /root/.ssh/authorized_keys.")
    inject_password: bool = option(False, "Inject the admin password into /etc/shadow.")
    inject_handlers: str = option(
        "guestfs,debugfs,loop,nbd",
        "Comma-separated image handlers tried in order: guestfs "
        "(libguestfs), debugfs (raw ext2/3/4, rootless), loop (raw, root), nbd (qcow2 and "
        "others, root). cloudseed's own option.",
    )


@dataclass(frozen=True)
class FakeDriverSection:
    """``[fake_driver]``: the in-memory driver (cloudseed's own section)."""

    delay_ms: int = option(
        0,
        "How long each fake operation takes, in milliseconds, so that BUILD, REBOOT and "
        "REBUILD can be observed.",
        minimum=0,
    )


@dataclass(frozen=True)
class QemuSection:
    """``[qemu]``: the qemu driver (cloudseed's own section; see docs/qemu-driver.md)."""

    binary: str = option("qemu-system-x86_64", "The QEMU system emulator to run guests with.")
    accel: str = option(
        "auto",
        "Accelerator: 'kvm', 'tcg' (software emulation), or 'auto': KVM when "
        "/dev/kvm is usable hardware virtualization (vmx or svm, and not a nested PVM "
        "host), otherwise TCG.",
        choices=("auto", "kvm", "tcg"),
    )
    images_type: str = option(
        "qcow2",
        "Instance disks: 'qcow2' is a copy-on-write overlay of the image; 'raw' a "
        "full sparse copy, which the rootless debugfs injection handler can write into "
        "(Nova's [libvirt] images_type).",
        choices=("qcow2", "raw"),
    )
    kernel_cmdline: str = option(
        "root=/dev/vda rw console=ttyS0,115200",
        "Kernel command line for images that "
        "name a kernel (kernel_id) but no os_command_line property.",
    )
    metadata_url: str = option(
        "",
        "Where each guest's metadata proxy forwards to (http://host:port). Empty means "
        "this service's own metadata listener ([DEFAULT] metadata_listen and "
        "metadata_listen_port, a wildcard address meaning 127.0.0.1).",
    )
    shutdown_timeout: int = option(
        60,
        "Seconds a guest gets to power off after the ACPI power button (stop, soft "
        "reboot) before it is switched off (Nova's [DEFAULT] shutdown_timeout).",
        minimum=0,
    )
    start_timeout: int = option(
        30, "Seconds to wait for a QEMU process to come up before the operation fails.", minimum=1
    )
    # issue 17: key changes pushed through qemu-guest-agent.
    guest_agent_timeout: int = option(
        10,
        "Seconds the driver waits for a guest's qemu-guest-agent (its channel to accept, the "
        "sync handshake, each command of a key push) before the push counts as failed.",
        minimum=1,
    )
    # issue 13: a guest printing in a loop must not fill the host's disk.
    console_log_max_size: int = option(
        2 * 1024 * 1024,
        "Bytes a guest's console.log may reach before it is rotated once to console.log.0 "
        "(the previous one is dropped), as virtlogd's max_size and max_backups = 1 bound a "
        "Nova/libvirt guest's: about twice this on disk per guest. 0: never rotated.",
        minimum=0,
    )
    # issue 20: SSH into a guest on user-mode networking, opted in per server.
    ssh_forward_address: str = option(
        "127.0.0.1",
        "Host IPv4 address a guest's SSH forward listens on, for servers with the metadata "
        "item cloudseed:ssh_forward = true (a port of ssh_forward_ports leads to the guest's "
        "port 22). 127.0.0.1 keeps it to this host; 0.0.0.0 opens it to the network.",
    )
    ssh_forward_ports: str = option(
        "10022-10999",
        "Host ports (FIRST-LAST) SSH forwards are taken from: a guest keeps its port across "
        "reboots and stop/start while the port is free.",
    )

    @property
    def ssh_forward_port_range(self) -> range:
        first, last = parse_port_range(self.ssh_forward_ports)
        return range(first, last + 1)


@dataclass(frozen=True)
class IdentitySection:
    """``[identity]``: signed instance identity (cloudseed's own section; docs/identity.md)."""

    issuer: str = option(
        "",
        "The iss of identity tokens and the issuer of the OpenID discovery document: a URL "
        "relying parties reach the compute API at. Empty means [api] compute_link_prefix, or "
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


@dataclass(frozen=True)
class Settings:
    default: DefaultSection = field(default_factory=DefaultSection)
    api: ApiSection = field(default_factory=ApiSection)
    quota: QuotaSection = field(default_factory=QuotaSection)
    api_database: ApiDatabaseSection = field(default_factory=ApiDatabaseSection)
    database: DatabaseSection = field(default_factory=DatabaseSection)
    oslo_middleware: OsloMiddlewareSection = field(default_factory=OsloMiddlewareSection)
    glance: GlanceSection = field(default_factory=GlanceSection)
    wsgi: WsgiSection = field(default_factory=WsgiSection)
    fake_driver: FakeDriverSection = field(default_factory=FakeDriverSection)
    neutron: NeutronSection = field(default_factory=NeutronSection)
    metadata: MetadataSection = field(default_factory=MetadataSection)
    libvirt: LibvirtSection = field(default_factory=LibvirtSection)
    qemu: QemuSection = field(default_factory=QemuSection)
    compute: ComputeSection = field(default_factory=ComputeSection)
    keys: KeysSection = field(default_factory=KeysSection)
    identity: IdentitySection = field(default_factory=IdentitySection)
    metrics: MetricsSection = field(default_factory=MetricsSection)
    # [keystone_authtoken] and other pass-through sections, exactly as written.
    passthrough: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # What was reported while loading (unknown options); logged by whoever starts the service.
    warnings: tuple[str, ...] = ()

    @property
    def state_dir(self) -> Path:
        return Path(self.default.state_path)

    @property
    def api_database_url(self) -> str:
        return self.api_database.connection or _sqlite_url(self.state_dir / "cloudseed_api.sqlite")

    @property
    def cell_database_url(self) -> str:
        return self.database.connection or _sqlite_url(self.state_dir / "cloudseed_cell1.sqlite")


def _sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


# The INI section name for each attribute of Settings.
SECTIONS: dict[str, str] = {
    "default": "DEFAULT",
    "api": "api",
    "quota": "quota",
    "api_database": "api_database",
    "database": "database",
    "oslo_middleware": "oslo_middleware",
    "glance": "glance",
    "wsgi": "wsgi",
    "fake_driver": "fake_driver",
    "neutron": "neutron",
    "metadata": "metadata",
    "libvirt": "libvirt",
    "qemu": "qemu",
    "compute": "compute",
    "keys": "keys",
    "identity": "identity",
    "metrics": "metrics",
}


def parse_port_range(value: str) -> tuple[int, int]:
    """``FIRST-LAST`` (or one port) as two ints; ValueError unless 1 <= FIRST <= LAST <= 65535."""
    first, dash, last = value.strip().partition("-")
    try:
        bounds = int(first, 10), int(last if dash else first, 10)
    except ValueError:
        raise ValueError("must be FIRST-LAST, e.g. 10022-10999") from None
    if not 1 <= bounds[0] <= bounds[1] <= 65535:
        raise ValueError("must be FIRST-LAST with 1 <= FIRST <= LAST <= 65535")
    return bounds


def split_list(value: str) -> list[str]:
    """A comma-separated option value as a list, without empty entries."""
    return [item.strip() for item in value.split(",") if item.strip()]


@dataclass(frozen=True)
class OptionInfo:
    section: str
    name: str
    type: type
    default: Any
    help: str
    choices: tuple[str, ...]
    minimum: int | None
    secret: bool

    @property
    def env_var(self) -> str:
        if self.section == "DEFAULT":
            return f"{ENV_PREFIX}{self.name.upper()}"
        return f"{ENV_PREFIX}{self.section.upper()}__{self.name.upper()}"


def all_options() -> Iterator[OptionInfo]:
    """Every registered option, in declaration order."""
    hints = typing.get_type_hints(Settings)
    for attr, section in SECTIONS.items():
        section_cls = hints[attr]
        field_types = typing.get_type_hints(section_cls)
        for f in dataclasses.fields(section_cls):
            yield OptionInfo(
                section=section,
                name=f.name,
                type=field_types[f.name],
                default=f.default,
                help=f.metadata["help"],
                choices=f.metadata["choices"],
                minimum=f.metadata["minimum"],
                secret=f.metadata["secret"],
            )


def load_settings(
    *,
    config_file: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[tuple[str, str], Any] | None = None,
) -> Settings:
    """Build Settings from defaults, the config file, the environment and explicit overrides.

    ``overrides`` are the command-line flags, keyed by (INI section, option name).
    ``config_file`` falls back to ``CLOUDSEED_CONFIG`` from ``environ``.
    Raises ConfigError for an unreadable file or an invalid value; unknown options become
    ``Settings.warnings``.
    """
    environ = os.environ if environ is None else environ
    config_file = config_file or environ.get("CLOUDSEED_CONFIG") or None
    options = {(o.section, o.name): o for o in all_options()}
    raw: dict[tuple[str, str], tuple[Any, str]] = {}  # value, where it came from
    warnings: list[str] = []
    passthrough: dict[str, dict[str, str]] = {}

    if config_file is not None:
        parser = _read_ini(Path(config_file))
        for section in ["DEFAULT", *parser.sections()]:
            items = (
                parser.defaults()
                if section == "DEFAULT"
                else {
                    k: v for k, v in parser.items(section, raw=True) if k not in parser.defaults()
                }
            )
            if section in PASSTHROUGH_SECTIONS:
                passthrough[section] = {
                    name: Secret(value) if SECRET_PASSTHROUGH_NAME.search(name) else value
                    for name, value in items.items()
                }
                continue
            for name, value in items.items():
                if (section, name) in options:
                    raw[(section, name)] = (value, f"{config_file} [{section}] {name}")
                else:
                    warnings.append(f"unknown option [{section}] {name} in {config_file} (ignored)")

    by_env = {o.env_var: key for key, o in options.items()}
    for var, value in environ.items():
        if (
            not var.startswith(ENV_PREFIX)
            or var in NON_SETTING_ENV
            or var.startswith(NON_SETTING_ENV_PREFIX)
        ):
            continue
        if var in by_env:
            raw[by_env[var]] = (value, f"environment variable {var}")
        else:
            warnings.append(f"unknown environment variable {var} (ignored)")

    for key, value in (overrides or {}).items():
        if key not in options:
            raise ConfigError(f"unknown option [{key[0]}] {key[1]}")
        if value is not None:
            raw[key] = (value, f"command-line option for [{key[0]}] {key[1]}")

    sections: dict[str, dict[str, Any]] = {attr: {} for attr in SECTIONS}
    attr_of = {section: attr for attr, section in SECTIONS.items()}
    for key, (value, origin) in raw.items():
        sections[attr_of[key[0]]][key[1]] = _cast(options[key], value, origin)

    hints = typing.get_type_hints(Settings)
    built = {attr: hints[attr](**values) for attr, values in sections.items()}
    settings = Settings(**built, passthrough=passthrough, warnings=tuple(warnings))
    _check_lists(settings)
    return settings


def _check_lists(settings: Settings) -> None:
    """Comma-separated options are checked item by item, so a typo stops start-up."""

    def fail(section: str, name: str, item: str, why: str) -> None:
        raise ConfigError(f"invalid item {item!r} in [{section}] {name}: {why}")

    for item in split_list(settings.api.vendordata_providers):
        if item not in ("StaticJSON", "DynamicJSON"):
            fail("api", "vendordata_providers", item, "must be StaticJSON or DynamicJSON")
    names: set[str] = set()
    for item in split_list(settings.api.vendordata_dynamic_targets):
        name, at, url = item.partition("@")
        if not at or not name or not url.startswith(("http://", "https://")):
            fail("api", "vendordata_dynamic_targets", item, "must be name@http(s)://...")
        if name in names or name == "static":
            fail("api", "vendordata_dynamic_targets", item, f"the name {name!r} is taken")
        names.add(name)
    networks = (("metadata", "trusted_proxies"), ("metrics", "allow_from"))
    for section, name in networks:
        for item in split_list(getattr(getattr(settings, section), name)):
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                fail(section, name, item, "not an address or network")
    url = settings.qemu.metadata_url
    if url and not _is_host_port_url(url):
        raise ConfigError(
            f"invalid value {url!r} for [qemu] metadata_url: must be http://host:port"
        )
    try:
        parse_port_range(settings.qemu.ssh_forward_ports)
    except ValueError as exc:
        raise ConfigError(
            f"invalid value {settings.qemu.ssh_forward_ports!r} for [qemu] ssh_forward_ports: {exc}"
        ) from None
    try:
        ipaddress.IPv4Address(settings.qemu.ssh_forward_address)
    except ValueError:
        raise ConfigError(
            f"invalid value {settings.qemu.ssh_forward_address!r} for [qemu] "
            "ssh_forward_address: must be an IPv4 address"
        ) from None
    for item in split_list(settings.libvirt.inject_handlers):
        if item not in ("guestfs", "debugfs", "loop", "nbd"):
            fail("libvirt", "inject_handlers", item, "must be guestfs, debugfs, loop or nbd")
    identity = settings.identity
    # A token signed just before a rotation must stay verifiable until it expires.
    least = identity.token_ttl_seconds + 2 * identity.key_cache_seconds
    if identity.key_grace_seconds < least:
        raise ConfigError(
            f"invalid value {identity.key_grace_seconds} for [identity] key_grace_seconds: "
            f"must be at least token_ttl_seconds + 2 * key_cache_seconds ({least})"
        )


def _is_host_port_url(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return False
    return (
        parts.scheme == "http"
        and bool(parts.hostname)
        and port is not None
        and parts.path in ("", "/")
        and not parts.query
        and not parts.fragment
    )


def _read_ini(path: Path) -> configparser.RawConfigParser:
    # Interpolation off: a password with '%' in it must mean itself.
    parser = configparser.RawConfigParser(strict=True)
    try:
        with path.open(encoding="utf-8") as fh:
            parser.read_file(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} is not a valid INI file: {exc}") from exc
    return parser


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _cast(opt: OptionInfo, value: Any, origin: str) -> Any:
    """Turn a raw value into the option's type, or stop with a message naming its origin
    (and the value, unless the option is secret)."""
    target = opt.type
    shown = "(secret value)" if opt.secret else repr(value)
    if isinstance(target, types.UnionType) or typing.get_origin(target) is Literal:
        raise AssertionError(f"unsupported option type for {opt.name}")  # pragma: no cover
    try:
        if target is bool:
            if isinstance(value, bool):
                result: Any = value
            elif str(value).strip().lower() in _TRUE:
                result = True
            elif str(value).strip().lower() in _FALSE:
                result = False
            else:
                raise ValueError("expected true or false")
        elif target is int:
            if isinstance(value, bool):
                raise ValueError("expected an integer")
            result = int(str(value).strip(), 10) if not isinstance(value, int) else value
        elif target is float:
            if isinstance(value, bool):
                raise ValueError("expected a number")
            result = float(str(value).strip())
            if not math.isfinite(result) or result <= 0:
                raise ValueError("expected a positive number")
        else:
            result = str(value).strip()
    except ValueError as exc:
        raise ConfigError(
            f"invalid value {shown} for [{opt.section}] {opt.name} (from {origin}): {exc}"
        ) from exc
    if opt.choices and result not in opt.choices:
        raise ConfigError(
            f"invalid value {shown} for [{opt.section}] {opt.name} "
            f"(from {origin}): must be one of {', '.join(opt.choices)}"
        )
    if opt.minimum is not None and result < opt.minimum:
        raise ConfigError(
            f"invalid value {shown} for [{opt.section}] {opt.name} "
            f"(from {origin}): must be at least {opt.minimum}"
        )
    if opt.secret and isinstance(result, str):
        result = Secret(result)
    return result
