"""Ansible's ``openstack.cloud`` collection (ansible 12.3, openstack.cloud 2.5, openstacksdk 4)
against a real cloudseed, in one playbook run: a key pair, a server with user data waited to
ACTIVE, ``server_info``, and the server and key pair deleted.

``openstack.cloud.server`` sends ``tags`` in the create body (Nova's 2.52), which cloudseed
refused before it had server tags. The clouds.yaml is the openstack CLI tests' (tests/support/
osc.py: ``admin_token`` with noauth2's ``alice:proj``, endpoint overrides for the compute API and
the Glance and Neutron slices), and a recording proxy shows what the collection sent.

Only SQLite: one playbook run costs some 10 s of Ansible's own start-up and polling, and the
API's behaviour on each backend is covered by tests/functional.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.support import ansible, osc
from tests.support.cloud import Cloud, mv
from tests.support.osc_cli import TOKEN

pytestmark = [
    pytest.mark.compat,
    pytest.mark.parametrize("backend", ["sqlite"], indirect=True),
]

USER_DATA = "#cloud-config\nruncmd:\n  - [echo, from-ansible]\n"

PLAYBOOK = """\
- hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  tasks:
    - name: key pair
      openstack.cloud.keypair:
        cloud: cloudseed
        name: ansible-key
        public_key: "{{ public_key }}"
    - name: server with user data, waited to ACTIVE
      openstack.cloud.server:
        cloud: cloudseed
        name: ansible-vm
        image: cirros
        flavor: "1"
        key_name: ansible-key
        network: private
        userdata: "{{ user_data }}"
        auto_ip: false
        wait: true
        timeout: 120
      register: created
    - name: server info
      openstack.cloud.server_info:
        cloud: cloudseed
        name: ansible-vm
      register: info
    - name: write what the modules returned
      ansible.builtin.copy:
        content: "{{ {'created': created, 'info': info} | to_json }}"
        dest: "{{ results }}"
    - name: delete the server
      openstack.cloud.server:
        cloud: cloudseed
        name: ansible-vm
        state: absent
        wait: true
        timeout: 120
    - name: delete the key pair
      openstack.cloud.keypair:
        cloud: cloudseed
        name: ansible-key
        state: absent
"""


@pytest.fixture(scope="session")
def ansible_venv() -> Path:
    try:
        return ansible.ansible_venv()
    except ansible.AnsibleUnavailable as exc:
        if osc.required():
            pytest.fail(f"CLOUDSEED_REQUIRE_DBS=1 but Ansible is unavailable: {exc}")
        pytest.skip(f"Ansible cannot be installed here: {exc}")


def test_playbook_creates_shows_and_deletes_a_server(
    ansible_venv: Path,
    api: httpx.Client,
    cloud: Cloud,
    proxy: osc.RecordingProxy,
    identity: osc.IdentityStub,
    tmp_path: Path,
) -> None:
    config = tmp_path / "osc"
    config.mkdir()
    env = osc.cloud_env(config, f"{proxy.url}/v2.1", TOKEN, identity.url)
    env.update(ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"), ANSIBLE_NOCOLOR="1")
    playbook, results = tmp_path / "playbook.yml", tmp_path / "results.json"
    playbook.write_text(PLAYBOOK)
    extra = {"public_key": cloud.key1, "user_data": USER_DATA, "results": str(results)}
    started = time.monotonic()
    binary = str(ansible.playbook_binary(ansible_venv))
    run = subprocess.run(
        [binary, "-i", "localhost,", str(playbook), "-e", json.dumps(extra)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    seconds = time.monotonic() - started
    assert run.returncode == 0, f"{run.stdout[-6000:]}\n{run.stderr[-3000:]}"
    print(f"ansible-playbook: {seconds:.1f} s")

    # What the collection sent: the create body with its tags, accepted.
    create = proxy.last("POST", "/v2.1/servers")
    assert create.status == 202, create.body
    sent = json.loads(create.body)["server"]
    assert "tags" in sent
    assert base64.b64decode(sent["user_data"]).decode() == USER_DATA
    assert sent["key_name"] == "ansible-key"

    # What it saw: the server ACTIVE, then found by server_info.
    returned = json.loads(results.read_text())
    server = returned["created"]["server"]
    assert server["status"] == "ACTIVE"
    assert server["key_name"] == "ansible-key"
    (found,) = returned["info"]["servers"]
    assert (found["id"], found["status"]) == (server["id"], "ACTIVE")

    # And it cleaned up after itself.
    assert proxy.last("DELETE", f"/v2.1/servers/{server['id']}").status == 204
    assert api.get(f"/v2.1/servers/{server['id']}", headers=mv("2.1")).status_code == 404
    assert api.get("/v2.1/os-keypairs/ansible-key").status_code == 404
