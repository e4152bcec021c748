"""``cloudseed nova-metadata`` at its edges, a real process: guests identified by their fixed IP
(direct mode, asked of Neutron as Nova asks it) and forwarding headers nobody trusted, a
metadata provider's X-Metadata-Provider, a database that is not there at start (one line,
exit status 2, no password) or goes away later (503, then back by itself), a database user
that cannot write (the password answers what Nova answers), and a request head over the
listener's limits."""

from __future__ import annotations

import hashlib
import hmac
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, insert, text, update
from sqlalchemy.engine import make_url

from cloudseed.nova_metadata import schema
from tests.support import databases
from tests.support.nova_without_nova import (
    IMAGE,
    SECRET,
    NovaDeployment,
    command,
    nova_deployment,
    running_service,
    signed,
)
from tests.support.ports import free_port
from tests.support.waiting import wait_until


@pytest.fixture()
def nova(tmp_path: Path) -> Iterator[NovaDeployment]:
    with nova_deployment("sqlite", tmp_path) as deployment:
        deployment.neutron.groups["sg-default"] = "default"
        yield deployment


def guest(base: str, address: str) -> httpx.Client:
    """A client calling from ``address`` (127.0.0.0/8: any of it is this machine's)."""
    return httpx.Client(
        base_url=base, timeout=10, transport=httpx.HTTPTransport(local_address=address)
    )


def test_direct_mode_finds_the_caller_by_its_fixed_ip(nova: NovaDeployment) -> None:
    one = nova.add_instance("one", address="127.0.0.21")
    two = nova.add_instance("two", address="127.0.0.22")
    conf = nova.conf(neutron={"service_metadata_proxy": False})
    with running_service(conf) as service:
        with guest(service.url, one.address) as client:
            assert client.get("/latest/meta-data/hostname").text == "one.novalocal"
            # Proxy headers mean nothing here (Nova logs and ignores them), nor does a
            # forwarding header nobody is trusted to set.
            spoofed = client.get(
                "/latest/meta-data/hostname",
                headers={**signed(two.uuid), "X-Forwarded-For": two.address},
            )
            assert spoofed.text == "one.novalocal"
        with guest(service.url, two.address) as client:
            assert client.get("/openstack/latest/meta_data.json").json()["uuid"] == two.uuid
            assert client.get("/latest/meta-data/local-ipv4").text == two.address
        with guest(service.url, "127.0.0.99") as client:  # no port has it
            assert client.get("/latest/meta-data/hostname").status_code == 404
    asked = [r for r in nova.neutron.requests if "fixed_ips=ip_address" in r]
    assert asked, "the fixed IPs are asked of Neutron"


def test_forwarded_for_believed_only_from_trusted_proxies(nova: NovaDeployment) -> None:
    vm = nova.add_instance("vm", address="10.9.0.7")
    conf = nova.conf(
        neutron={"service_metadata_proxy": False},
        oslo_middleware={"enable_proxy_headers_parsing": True},
        cloudseed_metadata={"trusted_proxies": "127.0.0.33"},
    )
    with running_service(conf) as service:
        with guest(service.url, "127.0.0.33") as proxy:
            answer = proxy.get(
                "/latest/meta-data/hostname", headers={"X-Forwarded-For": vm.address}
            )
            assert answer.text == "vm.novalocal"
        with guest(service.url, "127.0.0.34") as stranger:
            answer = stranger.get(
                "/latest/meta-data/hostname", headers={"X-Forwarded-For": vm.address}
            )
            assert answer.status_code == 404


def test_a_metadata_provider_names_the_instance_through_neutron(nova: NovaDeployment) -> None:
    vm = nova.add_instance("vm", address="10.9.0.8")
    with running_service(nova.conf()) as service:
        signature = hmac.new(SECRET.encode(), b"lb-1", hashlib.sha256).hexdigest()
        headers = {
            "X-Metadata-Provider": "lb-1",
            "X-Metadata-Provider-Signature": signature,
            "X-Forwarded-For": vm.address,
        }
        assert service.get("/latest/meta-data/hostname", headers).text == "vm.novalocal"
        unsigned = {**headers, "X-Metadata-Provider-Signature": "0" * 64}
        assert service.get("/latest/meta-data/hostname", unsigned).status_code == 403
        elsewhere = {**headers, "X-Forwarded-For": "10.9.9.9"}
        refused = service.get("/latest/meta-data/hostname", elsewhere)
        assert refused.status_code == 400
        assert "Expected a single port matching provider lb-1 and IP 10.9.9.9. Found 0." in (
            refused.text
        )


def test_a_database_not_there_at_start_is_one_line_without_its_password(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there, nor will
    conf = tmp_path / "nova.conf"
    conf.write_text(
        "[api_database]\n"
        f"connection = mysql+pymysql://nova:Sup3rSecret@127.0.0.1:{port}/nova_api\n"
        "[neutron]\nauth_type = none\nendpoint_override = http://127.0.0.1:9\n"
    )
    result = subprocess.run(
        command("--config-file", str(conf), "--listen", "127.0.0.1:0"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "Sup3rSecret" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1
    assert "cannot reach the API database ([api_database] connection)" in lines[0]
    assert f"mysql+pymysql://nova:***@127.0.0.1:{port}/nova_api" in lines[0]


def test_neutron_options_missing_stop_the_start(nova: NovaDeployment) -> None:
    conf = nova.conf(neutron={"auth_type": "password"})
    result = subprocess.run(
        command("--config-file", str(conf), "--listen", "127.0.0.1:0"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "[neutron] is missing keystoneauth options: auth_url" in result.stderr


def test_a_database_that_goes_away_is_a_503_until_it_is_back(tmp_path: Path) -> None:
    try:
        admin_url = make_url(databases.ADMIN_URLS["postgresql"])
        with nova_deployment("postgresql", tmp_path) as nova:
            vm = nova.add_instance("vm")
            other = nova.add_instance("other")
            nova.backdate(other, 3600)  # neither loaded at start nor reported by the watch
            name = make_url(nova.cell_url).database
            with running_service(nova.conf()) as service:
                assert service.get("/latest/meta-data/hostname", signed(vm.uuid)).status_code == 200
                admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
                try:
                    with admin.connect() as c:
                        c.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))
                        c.execute(
                            text(
                                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                "WHERE datname = :name"
                            ),
                            {"name": name},
                        )
                    # Not cached, so it must be read: the cell is away.
                    away = service.get("/latest/meta-data/hostname", signed(other.uuid))
                    assert away.status_code == 503
                    with admin.connect() as c:
                        c.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
                    wait_until(
                        lambda: (
                            service.get("/latest/meta-data/hostname", signed(other.uuid)).text
                            == "other.novalocal"
                        ),
                        what="the service back by itself",
                    )
                finally:
                    with admin.connect() as c:
                        c.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
                    admin.dispose()
    except databases.Unavailable as exc:
        if databases.required():
            pytest.fail(str(exc))
        pytest.skip(str(exc))


def test_a_password_post_a_read_only_database_refuses(nova: NovaDeployment) -> None:
    vm = nova.add_instance("vm")
    with nova.cell.begin() as c:  # the image's EC2 id, as Nova makes it on first use
        c.execute(insert(schema.s3_images).values(uuid=IMAGE, deleted=0))
    read_only = f"sqlite:///file:{make_url(nova.cell_url).database}?mode=ro&uri=true"
    with nova.api.begin() as a:  # the service reads cell1 through a read-only "user"
        a.execute(
            update(schema.cell_mappings)
            .where(schema.cell_mappings.c.name == "cell1")
            .values(database_connection=read_only)
        )
    conf = nova.conf(database={"connection": read_only})
    with running_service(conf) as service:
        url = service.url + "/openstack/latest/password"
        refused = httpx.post(url, headers=signed(vm.uuid), content=b"secret")
        assert refused.status_code == 500
        assert refused.text == "An unknown error has occurred. Please try your request again."
        assert httpx.get(url, headers=signed(vm.uuid)).content == b""
        # Reading is unaffected.
        assert service.get("/latest/meta-data/hostname", signed(vm.uuid)).status_code == 200


def test_heads_over_the_limits_are_refused_as_by_cloudseed_s_listener(
    nova: NovaDeployment,
) -> None:
    vm = nova.add_instance("vm")
    with running_service(nova.conf()) as service:
        long_header = {**signed(vm.uuid), "X-Pad": "a" * 70000}
        assert service.get("/latest/meta-data/hostname", long_header).status_code == 431
        assert service.get("/" + "a" * 20000, signed(vm.uuid)).status_code == 414


def test_local_metadata_per_cell_reads_only_its_cell(nova: NovaDeployment) -> None:
    vm = nova.add_instance("vm")
    with nova.api.begin() as a:  # the API database is not asked for instances here
        a.execute(text("DELETE FROM instance_mappings"))
        a.execute(text("UPDATE cell_mappings SET database_connection = 'sqlite:////nowhere/x'"))
    conf = nova.conf(api={"local_metadata_per_cell": True})
    with running_service(conf) as service:
        assert service.get("/latest/meta-data/hostname", signed(vm.uuid)).text == "vm.novalocal"
        nova.save(vm, hostname="moved")
        wait_until(
            lambda: (
                service.get("/latest/meta-data/hostname", signed(vm.uuid)).text == "moved.novalocal"
            ),
            what="the change seen in the local cell",
        )

        def cached_after_a_request() -> bool:
            # A changed instance is dropped at every poll until its stamp settles (SETTLE,
            # changes.py): the guest a request loads within that window may be gone again.
            service.get("/latest/meta-data/hostname", signed(vm.uuid))
            return "cloudseed_metadata_cache_guests 1.0" in service.get("/metrics").text

        wait_until(cached_after_a_request, what="the guest cached once its change settled")
