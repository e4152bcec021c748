"""The compute API's sections: ``[DEFAULT]`` (listeners, workers, compute hosts and
scheduling), ``[api]``, ``[quota]``, the two databases, and the request limits
(``[oslo_middleware]``, ``[glance]``, ``[wsgi]``)."""

from __future__ import annotations

from dataclasses import dataclass

from cloudseed.settings._options import option


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
        8774, "Port the compute API listens on (0 picks a free one).", minimum=0, maximum=65535
    )
    metadata_listen: str = option("127.0.0.1", "Address the metadata service listens on.")
    metadata_listen_port: int = option(
        8775,
        "Port the metadata service listens on (0 picks a free one).",
        minimum=0,
        maximum=65535,
    )
    workers: int = option(
        1,
        "Worker processes serving the enabled APIs (Nova has osapi_compute_workers and "
        "metadata_workers; cloudseed's workers serve every enabled API).",
        minimum=1,
    )
    enabled_apis: str = option(
        "osapi_compute,metadata",
        "The APIs `cloudseed serve` runs, comma-separated (Nova's enabled_apis): "
        "osapi_compute (the compute API, and with it this node's compute agent unless "
        "--no-compute) and metadata. One serve for each keeps the metadata service's "
        "processes apart from the API's writes and the agent's builds, which can then run at "
        "a lower CPU priority on the same node (docs/deployment.md).",
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
    # Issue 34: large user data (Ignition configs, bare-metal images).
    max_user_data_bytes: int = option(
        65535,
        "Longest user data accepted (create; rebuild from 2.57; update and HARD reboot from "
        "2.105), in characters of its base64 text; a longer one is refused with Nova's 400 "
        "before it is decoded, and nothing is stored. The default is Nova's fixed limit. Up "
        "to 16,515,072 (16 MiB less 256 KiB: MariaDB's MEDIUMTEXT column, and its 16 MiB "
        "max_allowed_packet, with room for the other fields of the row or operation that "
        "carries it). Above the default, the requests that carry user data may be larger than "
        "[oslo_middleware] max_request_body_size by as much. cloudseed's own option.",
        minimum=1,
        maximum=16 * 1024 * 1024 - 256 * 1024,
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
    image_virtual_size_cap: int = option(
        1024**4,
        "Largest virtual size an image may have, in bytes: what a qcow2 header claims, which "
        "image_size_cap (the bytes sent) does not bound, and the disk a server booted from it "
        "grows to. A larger one is refused with 400 and nothing is kept, both uploaded through "
        "the Glance slice and registered with `cloudseed image add`. Glance has no such option.",
        minimum=1,
    )
    # issue 32: compute agents fetch images over HTTP into a cache of their own.
    api_servers: str = option(
        "",
        "Comma-separated image endpoints (the Glance slice: http://API-NODE:8774/image) a "
        "compute agent downloads images from into its image cache, tried in order; Nova's "
        "option. Empty: this node's own compute API (osapi_compute_listen and its port, a "
        "wildcard address meaning 127.0.0.1). The fake driver reads no image data, so its "
        "agents fetch images only when this is set.",
    )
    num_retries: int = option(
        3,
        "Further attempts a compute agent makes to download an image after one fails (a "
        "transport error, an answer cut short, a checksum that does not match), after waits of "
        "2, 6, 15, then 30 s (23 s in all for three: an API node restarting); each attempt tries "
        "the api_servers in turn and resumes a download cut short. Nova's option.",
        minimum=0,
    )


# --- [wsgi]: request head limits (issue 13, P2) and connection deadlines (issue 30) ---
@dataclass(frozen=True)
class WsgiSection:
    """``[wsgi]``: limits on request heads and how long a connection may take to send one, on
    both listeners (compute API and metadata)."""

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
    header_timeout: int = option(
        20,
        "Seconds from the first byte of a request to the end of its head (request line and "
        "headers); a head not whole by then gets 408 Request Timeout and the connection is "
        "closed, so a client sending a head slowly cannot hold a connection for ever. The "
        "default is the base of Apache's mod_reqtimeout (header=20-40,MinRate=500); nginx's "
        "client_header_timeout is 60. Nova's eventlet server has only client_socket_timeout "
        "(900), the wait for any one read, which a byte every few minutes never reaches.",
        minimum=1,
    )
    first_request_timeout: int = option(
        20,
        "Seconds a new connection may wait before the first byte of its first request; one "
        "that has sent nothing by then is closed without an answer. Between requests on a "
        "kept-alive connection uvicorn's keep-alive timeout (5 s) applies instead. The default "
        "matches header_timeout (nginx times the wait for the first request with "
        "client_header_timeout too).",
        minimum=1,
    )
