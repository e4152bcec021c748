"""cloud-init's crawl of the metadata service: the paths one guest's cloud-init requests (its
OpenStack datasource, then its EC2 crawl), found by crawling one guest; the usual list the
one-guest and side-by-side benchmarks cycle through; a path as one file name for nginx."""

from __future__ import annotations

import httpx
from storm_identity import proxy_headers

# cloud-init's openstack.OS_VERSIONS (22.4 and HEAD): it reads the newest of these that
# /openstack lists, whatever newer versions the server also lists.
CLOUD_INIT_OS_VERSIONS = (
    "2012-08-10",
    "2013-04-04",
    "2013-10-17",
    "2015-10-15",
    "2016-06-30",
    "2016-10-06",
    "2017-02-22",
    "2018-08-27",
)
# What cloud-init's OpenStack and EC2 datasources usually fetch in one boot (reference
# cloud-init.md: the OpenStack documents, then the EC2 tree's listing, key and user data; the
# list the Nova peer benchmark, ../shared/peers/nova_metadata_bench.py, uses too): the one-guest
# and side-by-side benchmarks cycle through it.
CLOUD_INIT_PATHS = [
    "/openstack",
    "/openstack/latest/meta_data.json",
    "/openstack/latest/user_data",
    "/openstack/latest/network_data.json",
    "/openstack/latest/vendor_data2.json",
    "/latest/meta-data/",
    "/latest/meta-data/public-keys/0/openssh-key",
    "/latest/user-data",
]


def newest_known_version(listing: str) -> str:
    """cloud-init's BaseReader._find_working_version()."""
    offered = {line.strip() for line in listing.splitlines() if line.strip()}
    known = [v for v in CLOUD_INIT_OS_VERSIONS if v in offered]
    return known[-1] if known else "latest"


def ec2_crawl(client: httpx.Client, directory: str) -> list[str]:
    """The requests of cloud-init's MetadataMaterializer below ``directory`` (a listing just
    fetched), in its order: sub-directories first (depth first), then the leaves."""
    listing = client.get(directory)
    listing.raise_for_status()
    children: list[str] = []
    leaves: list[str] = []
    for line in listing.text.splitlines():
        line = line.strip()
        name = line.rstrip("/")
        if not line or not name or name == "security-credentials":
            continue
        if line.endswith("/"):
            if name not in children:
                children.append(name)
            continue
        resource = name
        ident, sep, _key_name = line.partition("=")
        if sep and ident.isdigit():  # "0=mykey": the key is at 0/openssh-key
            resource = f"{int(ident)}/openssh-key"
        leaves.append(resource)
    requests: list[str] = []
    for child in children:
        requests.append(f"{directory}{child}/")
        requests += ec2_crawl(client, f"{directory}{child}/")
    requests += [f"{directory}{leaf}" for leaf in leaves]
    return requests


def cloud_init_paths(metadata_base: str, instance_id: str) -> list[str]:
    """The paths one guest's cloud-init (OpenStack datasource) requests, in order."""
    with httpx.Client(
        base_url=metadata_base, headers=proxy_headers(instance_id), timeout=30
    ) as client:
        listing = client.get("/openstack")
        listing.raise_for_status()
        version = newest_known_version(listing.text)
        base = f"/openstack/{version}"
        paths = [
            "/openstack",
            "/openstack",
            f"{base}/meta_data.json",
            f"{base}/user_data",
            f"{base}/vendor_data.json",
            f"{base}/vendor_data2.json",
            f"{base}/network_data.json",
        ]
        meta = client.get(f"{base}/meta_data.json").json()
        content = [f["content_path"] for f in meta.get("files", [])]
        content += [meta["network_config"]["content_path"]] if "network_config" in meta else []
        paths += [f"/openstack/{c.lstrip('/')}" for c in content]
        paths.append("/latest/meta-data/")
        paths += ec2_crawl(client, "/latest/meta-data/")
    return paths


def crawl_bytes(metadata_base: str, instance_id: str, paths: list[str]) -> int:
    """Bytes of response bodies in one guest's crawl."""
    with httpx.Client(
        base_url=metadata_base, headers=proxy_headers(instance_id), timeout=30
    ) as client:
        return sum(len(client.get(path).content) for path in paths)


def flat_name(path: str) -> str:
    """A path as one file name for nginx: ``/openstack`` is a document and a directory at
    once, which a file tree cannot be."""
    return path.strip("/").replace("/", "~") + ("~" if path.endswith("/") else "")
