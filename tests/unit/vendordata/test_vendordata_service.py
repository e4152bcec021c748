"""Vendordata built from Settings: providers, what is checked at start, the start-up warnings,
and the documents that need no target."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from cloudseed.errors import ConfigError
from cloudseed.settings import Settings
from cloudseed.vendordata import Vendordata, VendordataFileError
from cloudseed.vendordata.targets import parse_targets
from tests.support.clock import ManualClock
from tests.support.vendordata import REQUEST, settings_from

pytestmark = pytest.mark.anyio


async def build(settings: Settings) -> Vendordata:
    service = Vendordata(settings)
    await service.aclose()  # nothing here calls a target; closing early is harmless
    return service


async def test_defaults_static_json_without_a_file() -> None:
    service = await build(Settings())
    assert service.providers == ("StaticJSON",)
    assert service.vendor_data_json == b"{}"
    assert service.static_only_vendor_data2() == b'{"static":{}}'
    assert service.has_dynamic is False
    assert await service.vendor_data2(REQUEST) == b'{"static":{}}'
    await service.check_for_build(REQUEST)  # nothing to check


@pytest.mark.parametrize("providers", ["", "DynamicJSON"])
async def test_without_static_json_vendor_data_json_is_absent(
    tmp_path: Path, providers: str
) -> None:
    service = await build(settings_from(tmp_path, {"vendordata_providers": providers}))
    assert service.vendor_data_json is None
    assert service.static_only_vendor_data2() == b"{}"


async def test_providers_are_taken_once_in_order(tmp_path: Path) -> None:
    service = await build(
        settings_from(tmp_path, {"vendordata_providers": "DynamicJSON, StaticJSON, DynamicJSON"})
    )
    assert service.providers == ("DynamicJSON", "StaticJSON")


async def test_static_file_is_checked_at_start(tmp_path: Path) -> None:
    settings = settings_from(tmp_path, {"vendordata_jsonfile_path": str(tmp_path / "missing.json")})
    with pytest.raises(VendordataFileError, match=r"missing\.json: No such file"):
        Vendordata(settings)


async def test_static_document_follows_the_file(tmp_path: Path) -> None:
    path = tmp_path / "vd.json"
    path.write_text(json.dumps({"cloud-init": "#cloud-config\n"}))
    clock = ManualClock()
    service = Vendordata(
        settings_from(tmp_path, {"vendordata_jsonfile_path": str(path)}), clock=clock
    )
    await service.aclose()  # nothing here calls a target; closing early is harmless
    first = service.static_only_vendor_data2()
    assert first == b'{"static":{"cloud-init":"#cloud-config\\n"}}'
    assert service.static_only_vendor_data2() is first  # assembled once per file version
    path.write_text('{"v": 2}')
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert service.vendor_data_json == b'{"cloud-init":"#cloud-config\\n"}'  # not looked at yet
    clock.advance(1.05)  # the file is looked at once per second
    assert service.vendor_data_json == b'{"v":2}'
    assert service.static_only_vendor_data2() == b'{"static":{"v":2}}'


async def test_targets_without_dynamic_json_are_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    service = await build(
        settings_from(
            tmp_path,
            {
                "vendordata_providers": "StaticJSON",
                "vendordata_dynamic_targets": "t@http://127.0.0.1:1/",
            },
        )
    )
    assert service.has_dynamic is False
    assert "DynamicJSON is not in vendordata_providers" in caplog.text


@pytest.mark.parametrize("auth", [None, {"username": "cloudseed"}])
async def test_warns_at_start_when_no_token_will_be_sent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, auth: dict[str, str] | None
) -> None:
    service = await build(
        settings_from(
            tmp_path,
            {
                "vendordata_providers": "DynamicJSON",
                "vendordata_dynamic_targets": "a@http://127.0.0.1:1/,b@http://127.0.0.1:2/",
            },
            auth,
        )
    )
    assert service.has_dynamic is True
    assert service.static_only_vendor_data2() is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "2 DynamicJSON target(s) but [vendordata_dynamic_auth] is not "
        "configured: no token will be sent to them"
    ]


async def test_no_warning_with_a_service_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await build(
        settings_from(
            tmp_path,
            {
                "vendordata_providers": "DynamicJSON",
                "vendordata_dynamic_targets": "a@http://127.0.0.1:1/",
            },
            {"auth_type": "admin_token", "token": "t", "endpoint": "http://127.0.0.1:1/"},
        )
    )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_bad_auth_section_stops_start_up(tmp_path: Path) -> None:
    settings = settings_from(
        tmp_path,
        {
            "vendordata_providers": "DynamicJSON",
            "vendordata_dynamic_targets": "a@http://127.0.0.1:1/",
        },
        {"auth_type": "password", "username": "cloudseed"},
    )
    with pytest.raises(ConfigError, match="needs: auth_url"):
        Vendordata(settings)


async def test_https_target_with_a_missing_ca_bundle_stops_start_up(tmp_path: Path) -> None:
    settings = settings_from(
        tmp_path,
        {
            "vendordata_providers": "DynamicJSON",
            "vendordata_dynamic_targets": "a@https://127.0.0.1:1/",
            "vendordata_dynamic_ssl_certfile": str(tmp_path / "ca.pem"),
        },
    )
    with pytest.raises(ConfigError, match=r"vendordata_dynamic_ssl_certfile .*ca\.pem"):
        Vendordata(settings)


def test_target_url_may_contain_at() -> None:
    assert [(t.name, t.url) for t in parse_targets(" a@http://u@h/p , b@https://h/ ,")] == [
        ("a", "http://u@h/p"),
        ("b", "https://h/"),
    ]
