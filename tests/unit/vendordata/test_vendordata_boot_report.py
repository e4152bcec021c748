"""Readiness's webhook part (2.110): cloud-init's reporting configuration, for the servers that
opt in, joined to the operator's vendordata where cloud-init reads it, with the login check's
parts too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from cloudseed.vendordata import Vendordata, boot_report, login_check
from cloudseed.vendordata.boot_report import BootReportParts
from tests.support.vendordata import REQUEST, settings_from

URL = "http://169.254.169.254/openstack/latest/boot_report"
PART = boot_report.cloud_config(URL)
OPTED = {boot_report.METADATA_ITEM: "True"}


def test_the_part_is_cloud_inits_reporting_configuration() -> None:
    config = yaml.safe_load(PART)
    assert PART.startswith("#cloud-config\n")
    assert config["reporting"] == {"cloudseed": {"type": "webhook", "endpoint": URL}}
    odd = yaml.safe_load(boot_report.cloud_config('http://h/"x: y#z'))
    assert odd["reporting"]["cloudseed"]["endpoint"] == 'http://h/"x: y#z'


@pytest.mark.parametrize(
    ("scope", "metadata", "wanted"),
    [
        ("opt-in", OPTED, True),
        ("opt-in", {boot_report.METADATA_ITEM: "no"}, False),
        ("opt-in", {}, False),
        ("all", {}, True),
        ("never", OPTED, False),
    ],
)
def test_who_gets_it(scope: str, metadata: dict[str, str], wanted: bool) -> None:
    assert BootReportParts(endpoint=URL, scope=scope).wanted(metadata) is wanted


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({}, {"cloud-init": [PART]}),
        ({"cloud-init": "#!/bin/sh\n", "x": 1}, {"cloud-init": ["#!/bin/sh\n", PART], "x": 1}),
        ({"cloud-init": ["a", "b"]}, {"cloud-init": ["a", "b", PART]}),
        ({"cloud-init": {"not": "usable"}}, {"cloud-init": {"not": "usable"}}),
        ("#!/bin/sh\n", ["#!/bin/sh\n", PART]),
    ],
)
def test_joined_to_vendor_data_json(document: Any, expected: Any) -> None:
    parts = BootReportParts(endpoint=URL, scope="opt-in")
    raw = json.dumps(document).encode()
    assert json.loads(parts.in_vendor_data(raw)) == expected
    assert parts.in_vendor_data(raw) is parts.in_vendor_data(raw)  # joined once per document


@pytest.mark.anyio
async def test_in_vendor_data2_only_without_vendor_data_json(tmp_path: Path) -> None:
    with_static = Vendordata(settings_from(tmp_path, {}), boot_report=True, login_check=True)
    without = Vendordata(
        settings_from(tmp_path, {"vendordata_providers": ""}), boot_report=True, login_check=True
    )
    plain = Vendordata(settings_from(tmp_path, {}))
    try:
        served = json.loads(with_static.vendor_data_json_for(OPTED) or b"")
        assert served == {"cloud-init": [*login_check.parts(), PART]}
        assert json.loads(with_static.vendor_data_json_for({}) or b"") == {
            "cloud-init": login_check.parts()
        }
        vendor2 = await with_static.vendor_data2(REQUEST)
        assert with_static.vendor_data2_for(OPTED, vendor2) is vendor2  # once is enough
        assert without.vendor_data_json_for(OPTED) is None
        vendor2 = await without.vendor_data2(REQUEST)
        assert json.loads(without.vendor_data2_for(OPTED, vendor2)) == {
            "cloud-init": [*login_check.parts(), PART]
        }
        assert without.vendor_data2_for({}, vendor2) is vendor2
        # A config drive's Vendordata (no boot_report) never carries it.
        assert plain.vendor_data_json_for(OPTED) == b"{}"
    finally:
        for vendordata in (with_static, without, plain):
            await vendordata.aclose()
