"""Vendordata against real HTTP targets (tests/support/vendordata_targets.py: uvicorn on a
loopback port): what DynamicJSON sends, how failures and slow targets are contained, and the
cache's promises (max-age, ETag with 304, no-store, single flight, stale-if-error, back-off).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from cloudseed.errors import ConfigError
from cloudseed.settings import Settings, load_settings
from cloudseed.vendordata import (
    ThreadedVendordata,
    Vendordata,
    VendordataError,
    VendordataRequest,
)
from tests.support.clock import ManualClock
from tests.support.ports import free_port
from tests.support.vendordata_targets import Targets, running_targets
from tests.support.waiting import wait_until

pytestmark = pytest.mark.anyio

READ_TIMEOUT = 1  # seconds; the slow target sleeps 3


@pytest.fixture()
def anyio_backend() -> str:
    return "asyncio"  # the cache uses asyncio tasks


@pytest.fixture(scope="module")
def module_targets() -> Iterator[Targets]:
    with running_targets() as targets:
        yield targets


@pytest.fixture()
def targets(module_targets: Targets) -> Targets:
    module_targets.reset()
    return module_targets


def make_settings(
    tmp_path: Path,
    *,
    providers: str = "DynamicJSON",
    targets: str = "",
    static: Any = None,
    fatal: bool = False,
    auth: dict[str, str] | None = None,
    certfile: str = "",
    read_timeout: int = READ_TIMEOUT,
) -> Settings:
    lines = [
        "[api]",
        f"vendordata_providers = {providers}",
        f"vendordata_dynamic_targets = {targets}",
        f"vendordata_dynamic_read_timeout = {read_timeout}",
        "vendordata_dynamic_connect_timeout = 3",
        f"vendordata_dynamic_failure_fatal = {str(fatal).lower()}",
        f"vendordata_dynamic_ssl_certfile = {certfile}",
    ]
    if static is not None:
        path = tmp_path / "vendor.json"
        path.write_text(json.dumps(static))
        lines.append(f"vendordata_jsonfile_path = {path}")
    if auth is not None:
        lines.append("[vendordata_dynamic_auth]")
        lines.extend(f"{name} = {value}" for name, value in auth.items())
    config = tmp_path / "cloudseed.conf"
    config.write_text("\n".join(lines) + "\n")
    settings = load_settings(config_file=config, environ={})
    assert settings.warnings == ()
    return settings


@asynccontextmanager
async def vendordata(settings: Settings, **options: Any) -> AsyncIterator[Vendordata]:
    service = Vendordata(settings, **options)
    try:
        yield service
    finally:
        await service.aclose()


def request_for(instance_id: str, **changes: Any) -> VendordataRequest:
    fields: dict[str, Any] = {
        "project_id": "proj-1",
        "instance_id": instance_id,
        "image_id": "img-1",
        "user_data": "I2Nsb3VkLWNvbmZpZwo=",
        "hostname": "web-1",
        "metadata": {"role": "web", "env": "prod"},
        "boot_roles": "member,reader",
    }
    fields.update(changes)
    return VendordataRequest(**fields)


def document(data: bytes) -> dict[str, Any]:
    value = json.loads(data)
    assert isinstance(value, dict)
    return value


async def test_what_each_target_receives(tmp_path: Path, targets: Targets) -> None:
    settings = make_settings(
        tmp_path,
        providers="StaticJSON,DynamicJSON",
        static={"cloud-init": "#cloud-config\n"},
        targets=f"first@{targets.url('/record')},second@{targets.url('/record')}",
    )
    async with vendordata(settings) as service:
        data = await service.vendor_data2(request_for("inst-body"))

    assert list(document(data)) == ["static", "first", "second"]
    assert document(data)["static"] == {"cloud-init": "#cloud-config\n"}
    assert document(data)["first"]["instance"] == "inst-body"
    calls = targets.calls_to("/record")
    assert len(calls) == 2
    for call in calls:
        assert call.headers["content-type"] == "application/json"
        assert call.headers["accept"] == "application/json"
        assert call.headers["user-agent"] == "cloudseed-vendordata"
        assert "x-auth-token" not in call.headers  # no [vendordata_dynamic_auth]
        assert call.json == {
            "project-id": "proj-1",
            "instance-id": "inst-body",
            "image-id": "img-1",
            "user-data": "I2Nsb3VkLWNvbmZpZwo=",
            "hostname": "web-1",
            "metadata": {"env": "prod", "role": "web"},
            "boot-roles": "member,reader",
        }
        assert list(call.json) == [
            "project-id",
            "instance-id",
            "image-id",
            "user-data",
            "hostname",
            "metadata",
            "boot-roles",
        ]


async def test_provider_order_is_key_order_and_user_data_may_be_null(
    tmp_path: Path, targets: Targets
) -> None:
    settings = make_settings(
        tmp_path,
        providers="DynamicJSON,StaticJSON",
        static=[1, 2],
        targets=f"vendor@{targets.url('/record')}",
    )
    async with vendordata(settings) as service:
        data = await service.vendor_data2(request_for("inst-order", user_data=None))
        assert service.vendor_data_json == b"[1,2]"
        assert service.static_only_vendor_data2() is None
    assert list(document(data)) == ["vendor", "static"]
    assert targets.calls_to("/record")[0].json["user-data"] is None


async def test_failing_targets_give_empty_entries_and_warnings(
    tmp_path: Path, targets: Targets, caplog: pytest.LogCaptureFixture
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/"  # nothing listens there
    settings = make_settings(
        tmp_path,
        providers="StaticJSON,DynamicJSON",
        targets=",".join(
            [
                f"error@{targets.url('/error')}",
                f"html@{targets.url('/not-json')}",
                f"slow@{targets.url('/slow')}",
                f"dead@{dead}",
                f"redirect@{targets.url('/redirect')}",
                f"empty@{targets.url('/empty')}",
                f"good@{targets.url('/record')}",
            ]
        ),
    )
    caplog.set_level(logging.WARNING, "cloudseed.vendordata")
    async with vendordata(settings) as service:
        started = time.monotonic()
        data = await service.vendor_data2(request_for("inst-fail"))
        elapsed = time.monotonic() - started

    assert document(data) == {
        "static": {},
        "error": {},
        "html": {},
        "slow": {},
        "dead": {},
        "redirect": {},
        "empty": {},
        "good": {"instance": "inst-fail", "n": 1},
    }
    # The targets were called together: the slow one's read timeout is the whole wait.
    assert READ_TIMEOUT <= elapsed < READ_TIMEOUT + 1.5
    messages = "\n".join(r.getMessage() for r in caplog.records)
    assert "'error' failed for instance inst-fail: HTTP 500 Internal Server Error" in messages
    assert "'html' failed for instance inst-fail: answer is not JSON" in messages
    assert f"'slow' failed for instance inst-fail: no answer within {READ_TIMEOUT} s" in messages
    assert "'dead' failed for instance inst-fail: ConnectError" in messages
    assert "'redirect' failed for instance inst-fail: HTTP 307 Temporary Redirect" in messages
    assert "'good'" not in messages and "'empty'" not in messages


async def test_deeply_nested_answer_is_a_failed_target_logged_once(
    tmp_path: Path, targets: Targets, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings(
        tmp_path, providers="DynamicJSON", targets=f"deep@{targets.url('/deep')}"
    )
    caplog.set_level(logging.WARNING, "cloudseed.vendordata")
    async with vendordata(settings) as service:
        for _ in range(3):
            data = await service.vendor_data2(request_for("inst-deep"))
            assert document(data)["deep"] == {}
    failures = [r for r in caplog.records if "'deep' failed" in r.getMessage()]
    assert len(failures) == 1  # backed off, not one per request
    assert "nested too deeply" in failures[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info or "Recursion" in r.getMessage()]


async def test_failure_is_fatal_for_a_build_only_when_configured(
    tmp_path: Path, targets: Targets
) -> None:
    broken = f"good@{targets.url('/record')},broken@{targets.url('/error')}"
    async with vendordata(make_settings(tmp_path, targets=broken, fatal=True)) as service:
        with pytest.raises(VendordataError) as raised:
            await service.check_for_build(request_for("inst-fatal"))
        # The guest's own request is still answered: fatal mode is about builds.
        assert document(await service.vendor_data2(request_for("inst-fatal")))["broken"] == {}
    assert raised.value.target == "broken"
    assert raised.value.reason == "HTTP 500 Internal Server Error"
    assert "broken" in raised.value.message and "HTTP 500" in raised.value.message

    async with vendordata(make_settings(tmp_path, targets=broken)) as service:
        await service.check_for_build(request_for("inst-lenient"))  # not fatal: nothing to do
    assert targets.calls_to("/error", "inst-lenient") == []

    healthy = f"good@{targets.url('/record')}"
    async with vendordata(make_settings(tmp_path, targets=healthy, fatal=True)) as service:
        await service.check_for_build(request_for("inst-healthy"))
        await service.vendor_data2(request_for("inst-healthy"))
    # /record sends no caching headers, so the guest's request calls again.
    assert len(targets.calls_to("/record", "inst-healthy")) == 2


async def test_burst_calls_once_then_revalidates_with_etag(
    tmp_path: Path, targets: Targets
) -> None:
    settings = make_settings(tmp_path, targets=f"cached@{targets.url('/cached')}")
    clock = ManualClock()
    async with vendordata(settings, clock=clock) as service:
        burst = await asyncio.gather(
            *(service.vendor_data2(request_for("inst-burst")) for _ in range(50))
        )
        assert len(set(burst)) == 1
        assert document(burst[0])["cached"] == {"instance": "inst-burst", "n": 1}
        calls = targets.calls_to("/cached")
        assert len(calls) == 1
        assert "if-none-match" not in calls[0].headers

        await service.vendor_data2(request_for("inst-burst"))  # fresh: no call at all
        assert len(targets.calls_to("/cached")) == 1

        clock.advance(targets.cached_max_age + 0.1)
        again = await asyncio.gather(
            *(service.vendor_data2(request_for("inst-burst")) for _ in range(10))
        )
        calls = targets.calls_to("/cached")
        assert len(calls) == 2  # one conditional call for the ten
        assert calls[1].headers["if-none-match"] == '"inst-burst-v1"'
        assert set(again) == {burst[0]}  # the 304 kept the stored value (n stays 1)

        await service.vendor_data2(request_for("inst-burst"))  # the 304 made it fresh again
        assert len(targets.calls_to("/cached")) == 2

        # Other data for the same instance is another key: a miss, without If-None-Match.
        changed = await service.vendor_data2(request_for("inst-burst", hostname="web-2"))
        calls = targets.calls_to("/cached")
        assert len(calls) == 3 and "if-none-match" not in calls[2].headers
        assert document(changed)["cached"]["n"] == 3


async def test_no_store_is_never_reused(tmp_path: Path, targets: Targets) -> None:
    settings = make_settings(tmp_path, targets=f"volatile@{targets.url('/no-store')}")
    async with vendordata(settings) as service:
        first = document(await service.vendor_data2(request_for("inst-nostore")))
        second = document(await service.vendor_data2(request_for("inst-nostore")))
        # Concurrent requests still share the one call in flight.
        burst = await asyncio.gather(
            *(service.vendor_data2(request_for("inst-nostore")) for _ in range(10))
        )
    assert (first["volatile"]["n"], second["volatile"]["n"]) == (1, 2)
    assert len(set(burst)) == 1 and document(burst[0])["volatile"]["n"] == 3
    assert len(targets.calls_to("/no-store")) == 3
    assert all("if-none-match" not in c.headers for c in targets.calls_to("/no-store"))


async def test_stale_if_error_then_back_off(tmp_path: Path, targets: Targets) -> None:
    settings = make_settings(tmp_path, targets=f"flaky@{targets.url('/flaky')}")
    clock = ManualClock()
    async with vendordata(settings, failure_backoff=0.5, clock=clock) as service:
        good = await service.vendor_data2(request_for("inst-flaky"))
        assert document(good)["flaky"] == {"n": 1}
        targets.flaky_failing = True
        assert await service.vendor_data2(request_for("inst-flaky")) == good  # stale
        assert await service.vendor_data2(request_for("inst-flaky")) == good  # backing off
        assert len(targets.calls_to("/flaky")) == 2
        clock.advance(0.6)
        assert await service.vendor_data2(request_for("inst-flaky")) == good
        assert len(targets.calls_to("/flaky")) == 3
        targets.flaky_failing = False
        clock.advance(0.6)
        assert document(await service.vendor_data2(request_for("inst-flaky")))["flaky"] == {"n": 4}
        # A failing target with nothing stored: {}, and the back-off applies as well.
        await service.vendor_data2(request_for("inst-flaky-2"))
    assert len(targets.calls_to("/flaky", "inst-flaky-2")) == 1


async def test_slow_target_does_not_delay_other_instances(tmp_path: Path, targets: Targets) -> None:
    # The stuck targets give up after 2 s (the slow target sleeps 3): that long is the margin
    # a loaded machine has to answer the other instance first.
    settings = make_settings(
        tmp_path,
        targets=(f"lazy@{targets.url('/slow-for-some')},good@{targets.url('/record')}"),
        read_timeout=2,
    )
    async with vendordata(settings) as service:
        # Twenty instances for which "lazy" hangs until the read timeout...
        stuck = [
            asyncio.ensure_future(service.vendor_data2(request_for(f"slow-{i}"))) for i in range(20)
        ]
        # ...once their calls have reached it, it holds them (the calls had their chance).
        await asyncio.to_thread(
            wait_until,
            lambda: len(targets.calls_to("/slow-for-some")) == 20,
            what="the twenty calls to the slow target",
        )
        assert not any(task.done() for task in stuck)
        # ...while another instance is answered by both targets before any of them gives up:
        # an order, not a stopwatch, so a loaded machine cannot fail it.
        data = document(await service.vendor_data2(request_for("fast-1")))
        assert data == {
            "lazy": {"instance": "fast-1"},
            "good": {"instance": "fast-1", "n": data["good"]["n"]},
        }
        assert not any(task.done() for task in stuck)
        results = await asyncio.gather(*stuck)
    assert all(document(r)["lazy"] == {} for r in results)
    assert all(document(r)["good"]["instance"].startswith("slow-") for r in results)


async def test_service_token_is_sent_as_x_auth_token(tmp_path: Path, targets: Targets) -> None:
    # keystoneauth's admin_token plugin: a fixed token, no Keystone (the real one is in
    # tests/compat/test_vendordata_keystone.py).
    settings = make_settings(
        tmp_path,
        targets=f"secure@{targets.url('/token')}",
        auth={
            "auth_type": "admin_token",
            "token": "target-token",
            "endpoint": "http://127.0.0.1:1/",
        },
    )
    async with vendordata(settings) as service:
        data = document(await service.vendor_data2(request_for("inst-token")))
    assert data == {"secure": {"token": "accepted"}}
    assert targets.calls_to("/token")[0].headers["x-auth-token"] == "target-token"

    wrong = make_settings(
        tmp_path,
        targets=f"secure@{targets.url('/token')}",
        fatal=True,
        auth={"auth_type": "admin_token", "token": "other", "endpoint": "http://127.0.0.1:1/"},
    )
    async with vendordata(wrong) as service:
        with pytest.raises(VendordataError, match="HTTP 401 Unauthorized"):
            await service.check_for_build(request_for("inst-token-2"))


async def test_https_target_verified_with_the_configured_ca(
    tmp_path: Path, tls_files: tuple[str, str, str]
) -> None:
    ca, cert, key = tls_files
    with running_targets(ssl_certfile=cert, ssl_keyfile=key) as secure:
        trusted = make_settings(
            tmp_path, targets=f"tls@{secure.url('/record')}", certfile=ca, fatal=True
        )
        async with vendordata(trusted) as service:
            data = document(await service.vendor_data2(request_for("inst-tls")))
        assert data["tls"]["instance"] == "inst-tls"

        system_cas = make_settings(tmp_path, targets=f"tls@{secure.url('/record')}", fatal=True)
        async with vendordata(system_cas) as service:
            with pytest.raises(VendordataError, match="CERTIFICATE_VERIFY_FAILED"):
                await service.check_for_build(request_for("inst-tls"))


def test_threaded_vendordata_from_worker_threads(tmp_path: Path, targets: Targets) -> None:
    settings = make_settings(
        tmp_path,
        providers="StaticJSON,DynamicJSON",
        static={"a": 1},
        targets=(f"cached@{targets.url('/cached')},broken@{targets.url('/error')}"),
        fatal=True,
    )
    threaded = ThreadedVendordata(settings)
    try:
        assert threaded.has_dynamic and threaded.vendor_data_json() == b'{"a":1}'
        with ThreadPoolExecutor(8) as pool:
            outcomes = list(
                pool.map(lambda _: _build_outcome(threaded, request_for("inst-threads")), range(16))
            )
        assert set(outcomes) == {
            "Vendordata target 'broken' failed: HTTP 500 Internal Server Error"
        }
        data = document(threaded.vendor_data2(request_for("inst-threads")))
        assert data["cached"]["n"] == 1 and data["broken"] == {}
        # One cache across threads and calls: /cached (max-age) was called once, and
        # /error once too, then not again during the back-off.
        assert len(targets.calls_to("/cached")) == 1
        assert len(targets.calls_to("/error")) == 1
    finally:
        threaded.close()
    threaded.close()  # idempotent

    bad = make_settings(
        tmp_path,
        providers="DynamicJSON",
        targets="a@https://127.0.0.1:1/",
        certfile=str(tmp_path / "nowhere.pem"),
    )
    with pytest.raises(ConfigError, match="vendordata_dynamic_ssl_certfile"):
        ThreadedVendordata(bad)


def _build_outcome(threaded: ThreadedVendordata, request: VendordataRequest) -> str:
    try:
        threaded.check_for_build(request)
    except VendordataError as exc:
        return exc.message
    return "ok"


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    """A private CA and a certificate it signed for 127.0.0.1."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory = tmp_path_factory.mktemp("tls")
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cloudseed test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = directory / "ca.pem", directory / "cert.pem", directory / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(paths[0]), str(paths[1]), str(paths[2])
