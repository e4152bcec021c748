"""The login-time key check's parts as cloud-init 22.4 (Debian's package, its own code) reads
and applies them: through the OpenStack datasource, then ``stages.Init.consume_data`` and the
configuration its modules would see (``tests/support/cloudinit_client.py``, mode
``openstack-consume``).

What it shows: as vendordata, user data's own ``write_files``/``runcmd`` replace the part's
(cloud-init merges vendordata under user data without appending), while
``allow_public_ssh_keys: false`` still applies: which is why vendordata also carries the
installer as a vendor script, which nothing in user data replaces. Included by a user as the
last part of their own user data, the part's ``merge_how`` appends to their lists.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from pathlib import Path
from typing import Any

import httpx
import pytest

from cloudseed.db.engines import Database
from cloudseed.vendordata import login_check
from tests.support.cloud import Cloud, b64
from tests.support.cloudinit_run import SECRET, guest_relay, run_cloud_init
from tests.support.databases import make_settings
from tests.support.guests import boot
from tests.support.server import running_metadata

pytestmark = [
    pytest.mark.compat,
    pytest.mark.loopback_guests,
    pytest.mark.parametrize("backend", ["sqlite"], indirect=True),
]

OPERATOR = "#cloud-config\nbootcmd: [echo operator]\n"
USER = "#cloud-config\nwrite_files: [{path: /etc/mine, content: mine}]\nruncmd: [echo mine]\n"
COMMAND = "/usr/local/sbin/cloudseed-authorized-keys"
DROP_IN = "/etc/ssh/sshd_config.d/60-cloudseed-authorized-keys.conf"

Service = Callable[[bool], AbstractContextManager[str]]


@pytest.fixture()
def service(database_url: str, api_db: Database, tmp_path: Path) -> Iterator[Service]:
    """Start a metadata service in proxy mode with the operator's StaticJSON, with or without
    ``[keys] login_check``."""
    static = tmp_path / "vendor_data.json"
    static.write_text(json.dumps({"cloud-init": OPERATOR}))

    def start(check: bool) -> AbstractContextManager[str]:
        return running_metadata(
            make_settings(
                database_url,
                tmp_path / "state",
                CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY="true",
                CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET=SECRET,
                CLOUDSEED_API__VENDORDATA_JSONFILE_PATH=str(static),
                CLOUDSEED_KEYS__LOGIN_CHECK="true" if check else "false",
            ),
            api_db=api_db,
        )

    yield start


def consume(
    service: Service,
    check: bool,
    api: httpx.Client,
    cloud: Cloud,
    python: Path,
    work: Path,
    **kw: Any,
) -> dict[str, Any]:
    guest = boot(api, cloud, key_name="key1", **kw)
    with service(check) as url, guest_relay(url, guest) as relay:
        out = run_cloud_init(python, relay, guest, work, "openstack-consume").result()
    consumed: dict[str, Any] = out["openstack-consume"]
    assert consumed["get_data"] is True
    return consumed


def paths(config: dict[str, Any]) -> list[str]:
    return [entry["path"] for entry in config.get("write_files", [])]


def test_vendordata_part_with_user_data_of_its_own(
    service: Service, api: httpx.Client, cloud: Cloud, cloud_init: Path, tmp_path: Path
) -> None:
    consumed = consume(service, True, api, cloud, cloud_init, tmp_path, user_data=b64(USER))
    assert consumed["vendordata_raw"] == [OPERATOR, *login_check.parts()]
    config = consumed["config"]
    assert config["allow_public_ssh_keys"] is False
    # The user's write_files and runcmd win over vendordata's, whole...
    assert paths(config) == ["/etc/mine"] and config["runcmd"] == ["echo mine"]
    assert config["bootcmd"] == ["echo operator"]  # ...and the operator's parts still apply
    # ...so the installer, a vendor script, is what puts the command in place.
    (installer,) = consumed["vendor_scripts"].values()
    assert installer == login_check.installer()


def test_vendordata_part_alone(
    service: Service, api: httpx.Client, cloud: Cloud, cloud_init: Path, tmp_path: Path
) -> None:
    config = consume(service, True, api, cloud, cloud_init, tmp_path)["config"]
    assert config["allow_public_ssh_keys"] is False
    assert paths(config) == [COMMAND, DROP_IN]
    assert config["write_files"][0]["content"] == login_check.command_source()
    assert config["write_files"][0]["permissions"] == "0755"
    assert "try-reload-or-restart ssh.service" in config["runcmd"][0][2]


def test_without_login_check_nothing_changes(
    service: Service, api: httpx.Client, cloud: Cloud, cloud_init: Path, tmp_path: Path
) -> None:
    consumed = consume(service, False, api, cloud, cloud_init, tmp_path, user_data=b64(USER))
    assert consumed["vendordata_raw"] == OPERATOR
    assert "allow_public_ssh_keys" not in consumed["config"]
    assert consumed["vendor_scripts"] == {}


def test_the_documented_part_as_the_last_part_of_user_data(
    service: Service, api: httpx.Client, cloud: Cloud, cloud_init: Path, tmp_path: Path
) -> None:
    documented = Path(__file__).parents[2] / "docs" / "keys" / "login-check.cloud-config"
    mime = MIMEMultipart()
    for part in (USER, documented.read_text()):
        mime.attach(MIMEText(part, "cloud-config"))
    user_data = b64(mime.as_string())
    config = consume(service, False, api, cloud, cloud_init, tmp_path, user_data=user_data)[
        "config"
    ]
    assert config["allow_public_ssh_keys"] is False
    assert paths(config) == ["/etc/mine", COMMAND, DROP_IN]
    assert config["runcmd"][0] == "echo mine" and len(config["runcmd"]) == 2
