"""The clouds.yaml docs/deployment.md shows for a noauth2 cloudseed, as written, with the real
``openstack`` CLI and nothing else running: identity v3 is cloudseed's own stand-in
(``/identity/v3``), so no Keystone and no stub is needed."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from tests.support.cloud import Cloud
from tests.support.osc_cli import Cli
from tests.support.tool_venv import clean_env

pytestmark = [
    pytest.mark.compat,
    pytest.mark.parametrize("backend", ["sqlite"], indirect=True),
]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"
DOCUMENTED_API = "http://127.0.0.1:8774"


def documented_clouds_yaml() -> str:
    """The yaml block of the page's "The openstack CLI" section."""
    text = DOCS.read_text()
    section = text[text.index("## The openstack CLI") :]
    found = re.search(r"^```yaml\n(.*?)^```$", section, re.M | re.S)
    assert found, "no clouds.yaml in docs/deployment.md"
    return found.group(1)


def test_the_documented_clouds_yaml_works_alone(
    openstack: Path, api: httpx.Client, api_url: str, cloud: Cloud, tmp_path: Path
) -> None:
    clouds = documented_clouds_yaml()
    assert "/identity/v3" in clouds and DOCUMENTED_API in clouds
    config = tmp_path / "osc"
    (config / "home").mkdir(parents=True)
    (config / "clouds.yaml").write_text(clouds.replace(DOCUMENTED_API, api_url))
    env = clean_env(
        {
            "OS_CLIENT_CONFIG_FILE": str(config / "clouds.yaml"),
            "OS_CLOUD": "cloudseed",
            "HOME": str(config / "home"),
            "XDG_CONFIG_HOME": str(config / "home"),
            "XDG_CACHE_HOME": str(config / "home"),
        }
    )
    cli = Cli(openstack, env, tmp_path)
    key = tmp_path / "key.pub"
    key.write_text(cloud.key1 + "\n")
    cli("keypair", "create", "--public-key", str(key), "mine")
    assert "mine" in [k["Name"] for k in cli.json("keypair", "list")]  # alice's
    assert isinstance(cli.json("server", "list"), list)
    # A project look-up through the stand-in: every project exists, named as its id.
    quota = cli.json("quota", "show", "--compute", "demo")
    assert any(q.get("Resource") == "instances" for q in quota) or "instances" in quota
    # Version documents are public; projects need the noauth2 token like everything else.
    assert httpx.get(f"{api_url}/identity/v3").json()["version"]["id"] == "v3.14"
    assert httpx.get(f"{api_url}/identity/v3/projects").status_code == 401
