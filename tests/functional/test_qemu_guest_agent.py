"""The guest agent client against the real qemu-ga (Debian's qemu-guest-agent) run on this
host, listening on a UNIX socket instead of a virtio-serial port (``--method=unix-listen``,
the same protocol): its ssh commands edit the authorized_keys of a throw-away local user made
for the test. Plus the protocol's edges, with a socket peer playing a misbehaving channel:
stale output before the handshake's answer, nothing answering, a flood without a newline.
And the qemu driver's channel on a real QEMU (the dummy guest, which has no agent)."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cloudseed.compute.errors import (
    GuestAgentCommandFailed,
    GuestAgentUnavailable,
    GuestNotRunning,
)
from cloudseed.compute.interfaces import BootImage
from cloudseed.compute.qemu import QemuDriver
from cloudseed.compute.qemu_guest_agent import MAX_REPLY, GuestAgentClient, push_keys
from tests.support import keys
from tests.support.dummy_guest import write_kernel
from tests.support.qemu import ext4_image, guest, settings_for
from tests.support.waiting import wait_until

QEMU_GA = shutil.which("qemu-ga", path="/usr/sbin:/usr/bin:/sbin:/bin")
TOOLS = {"LC_ALL": "C", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
needs_qemu_ga = pytest.mark.skipif(
    QEMU_GA is None,
    reason="needs qemu-ga (Debian: qemu-guest-agent; tools/debian-packages.sh installs it)",
)
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd", path=TOOLS["PATH"]) is None,
    reason="needs root and useradd: the test makes a throw-away local user",
)


@pytest.fixture()
def qga(tmp_path: Path) -> Iterator[Path]:
    """A real qemu-ga on ``<tmp>/qga/qga.sock``; its socket path."""
    assert QEMU_GA is not None
    directory = tmp_path / "qga"
    directory.mkdir()
    path = directory / "qga.sock"
    with (directory / "qemu-ga.log").open("wb") as log:
        agent = subprocess.Popen(
            [QEMU_GA, "--method=unix-listen", f"--path={path}", f"--statedir={directory}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=TOOLS,
        )
    try:

        def listening() -> bool:
            assert agent.poll() is None, (directory / "qemu-ga.log").read_text()
            return path.exists()

        wait_until(listening, timeout=10, interval=0.02, max_interval=0.02, what="qemu-ga's socket")
        yield path
    finally:
        agent.terminate()
        agent.wait(10)


@pytest.fixture()
def login_user(tmp_path: Path) -> Iterator[str]:
    """A local user that exists only for this test, with its home under ``tmp_path``."""
    name = f"csqga{secrets.token_hex(4)}"
    home = tmp_path / "home" / name
    home.parent.mkdir()
    subprocess.run(
        ["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/false", name],
        check=True,
        capture_output=True,
        env=TOOLS,
        timeout=30,
    )
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], check=True, capture_output=True, env=TOOLS, timeout=30)


def authorized_keys_file(user: str) -> Path:
    return Path(pwd.getpwnam(user).pw_dir) / ".ssh" / "authorized_keys"


def lines(path: Path) -> list[str]:
    # qemu-ga 7.2 writes the lines joined by newlines, without a final one.
    return path.read_text().splitlines()


@needs_qemu_ga
@needs_root
def test_ssh_commands_edit_the_users_authorized_keys(qga: Path, login_user: str) -> None:
    k1, k2, k3 = (keys.ed25519_public(f"k{i}") for i in (1, 2, 3))
    with GuestAgentClient.connect(qga, timeout=5) as agent:
        agent.ping()
        agent.add_authorized_keys(login_user, [k1, k2])
        path = authorized_keys_file(login_user)
        assert lines(path) == [k1, k2]
        agent.add_authorized_keys(login_user, [k2, k3])  # reset false: appended, no duplicate
        assert lines(path) == [k1, k2, k3]
        agent.remove_authorized_keys(login_user, [k1])
        # qemu-ga 7.2 lists them last line first.
        assert sorted(agent.authorized_keys(login_user)) == sorted([k2, k3])
    assert lines(path) == [k2, k3]
    # What sshd's StrictModes wants: the user's, and private.
    entry = pwd.getpwnam(login_user)
    for item, mode in ((path.parent, 0o700), (path, 0o600)):
        info = item.stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (entry.pw_uid, mode)


@needs_qemu_ga
@needs_root
def test_push_adds_removes_and_reads_back_keeping_other_lines(qga: Path, login_user: str) -> None:
    mine, old, new = (keys.ed25519_public(c) for c in ("users-own", "old", "new"))
    path = authorized_keys_file(login_user)
    with GuestAgentClient.connect(qga, timeout=5) as agent:
        agent.add_authorized_keys(login_user, [mine, old])  # the user's own line, and ours
    push_keys(qga, user=login_user, add=[new], remove=[old], timeout=5)
    assert lines(path) == [mine, new]
    # Every key taken away: the file stays, with the lines cloudseed did not put there.
    push_keys(qga, user=login_user, add=[], remove=[new], timeout=5)
    assert lines(path) == [mine]


@needs_qemu_ga
def test_an_unknown_user_is_the_agents_error(qga: Path) -> None:
    with pytest.raises(GuestAgentCommandFailed) as caught:
        push_keys(qga, user="no-such-user-here", add=[keys.ed25519_public()], remove=[])
    error = caught.value
    assert error.command == "guest-ssh-add-authorized-keys"
    assert "no-such-user-here" in error.reason and "lookup user" in error.reason
    # The connection after a refused command is in sync: the next one works.
    with GuestAgentClient.connect(qga, timeout=5) as agent:
        agent.ping()


@needs_qemu_ga
def test_half_a_request_left_by_an_earlier_client_does_not_confuse_the_next(qga: Path) -> None:
    with socket.socket(socket.AF_UNIX) as earlier:
        earlier.connect(str(qga))
        earlier.sendall(b'{"execute": "guest-ssh-add-authorized-keys", "arguments": {"user')
    # qemu-ga keeps that in its parser across connections; the handshake's 0xFF clears it.
    with GuestAgentClient.connect(qga, timeout=5) as agent:
        agent.ping()
        with pytest.raises(GuestAgentCommandFailed, match="guest-nonsense"):
            agent.execute("guest-nonsense")
        agent.ping()


def test_no_channel_at_all(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(GuestAgentUnavailable, match="cannot connect to the guest agent channel"):
        push_keys(tmp_path / "qga.sock", user="root", add=["k"], remove=[], timeout=5)
    with pytest.raises(GuestAgentUnavailable, match="no guest agent channel"):
        push_keys(tmp_path / "gone" / "qga.sock", user="root", add=["k"], remove=[], timeout=5)
    assert time.monotonic() - started < 2


Peer = Callable[[socket.socket, dict[str, object]], None]


@pytest.fixture()
def channel(tmp_path: Path) -> Iterator[Callable[[Peer], Path]]:
    """A listening socket whose connections ``peer(conn, sync_request)`` serves: a channel
    that behaves as no real agent should."""
    servers: list[socket.socket] = []

    def make(peer: Peer) -> Path:
        path = tmp_path / f"chan{len(servers)}.sock"
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.listen()
        servers.append(server)

        def serve() -> None:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\n" not in data:
                    data += conn.recv(4096) or b"\n"
                request = json.loads(data.lstrip(b"\xff").split(b"\n")[0] or b"{}")
                peer(conn, request)

        threading.Thread(target=serve, daemon=True).start()
        return path

    yield make
    for server in servers:
        server.close()


def synced(sync: dict[str, object]) -> bytes:
    """The agent's answer to the handshake request ``sync`` (after its 0xFF)."""
    arguments = sync["arguments"]
    assert isinstance(arguments, dict)
    return json.dumps({"return": arguments["id"]}).encode() + b"\n"


def _wait_closed(conn: socket.socket) -> None:
    conn.settimeout(10)
    with contextlib.suppress(OSError):  # reset by the client: closed too
        while conn.recv(4096):
            pass


def test_stale_output_before_the_sentinel_is_discarded(
    channel: Callable[[Peer], Path],
) -> None:
    def peer(conn: socket.socket, sync: dict[str, object]) -> None:
        conn.sendall(
            b'{"return": {"keys": ["stale"]}}\n{"error": {"class": "GenericError", "desc": "JSON'
            + b'\xff{"return": 12345}\n'  # an earlier client's handshake, cut short
            + b"\xff"
            + synced(sync)
        )
        conn.recv(4096)  # guest-ping
        conn.sendall(b'{"return": {}}\n')
        _wait_closed(conn)

    with GuestAgentClient.connect(channel(peer), timeout=5) as agent:
        agent.ping()


def test_a_channel_that_never_answers_times_out(channel: Callable[[Peer], Path]) -> None:
    path = channel(lambda conn, _sync: _wait_closed(conn))  # QEMU's end, no agent in the guest
    started = time.monotonic()
    with pytest.raises(GuestAgentUnavailable) as caught:
        push_keys(path, user="root", add=["k"], remove=[], timeout=0.5)
    assert time.monotonic() - started < 3
    assert caught.value.reason == (
        "the guest agent did not answer the guest-sync-delimited handshake within 0.5 s "
        "(not installed, not started yet, or stopped)"
    )


def test_a_reply_without_end_is_bounded(channel: Callable[[Peer], Path]) -> None:
    def peer(conn: socket.socket, sync: dict[str, object]) -> None:
        conn.sendall(b"\xff" + synced(sync))
        conn.recv(4096)
        with contextlib.suppress(OSError):  # the client hangs up once it has seen enough
            conn.sendall(b"x" * (MAX_REPLY + 70000))
        _wait_closed(conn)

    with (
        pytest.raises(GuestAgentUnavailable, match="more than 1048576 bytes during guest-ping"),
        GuestAgentClient.connect(channel(peer), timeout=5) as agent,
    ):
        agent.ping()


def test_a_channel_that_closes_is_a_clear_error(channel: Callable[[Peer], Path]) -> None:
    with pytest.raises(GuestAgentUnavailable, match="channel closed during the guest-sync"):
        push_keys(channel(lambda conn, _sync: None), user="root", add=["k"], remove=[])


needs_qemu = pytest.mark.skipif(
    shutil.which("qemu-system-x86_64") is None or shutil.which("qemu-img") is None,
    reason="needs qemu-system-x86_64 and qemu-img (Debian: qemu-system-x86, qemu-utils)",
)


@needs_qemu
def test_every_qemu_guest_gets_the_channel_and_a_guest_without_an_agent_times_out(
    tmp_path: Path,
) -> None:
    (tmp_path / "base").mkdir()
    image = BootImage(
        path=str(ext4_image(tmp_path / "base" / "disk.raw")),
        disk_format="raw",
        kernel_path=str(write_kernel(tmp_path / "base" / "kernel.bin")),
    )
    driver = QemuDriver(settings_for(tmp_path / "state", CLOUDSEED_QEMU__GUEST_AGENT_TIMEOUT="1"))
    try:
        spec = guest(image)
        driver.spawn(spec)
        socket_path = driver.root / spec.uuid / "qga.sock"
        assert stat.S_ISSOCK(socket_path.stat().st_mode)
        command = (driver.root / spec.uuid / "qemu.cmd").read_text()
        assert "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0" in command
        # The dummy guest has no agent: QEMU takes the connection, nobody answers.
        started = time.monotonic()
        with pytest.raises(GuestAgentUnavailable) as caught:
            driver.push_keys(spec.uuid, user="root", add=[keys.ed25519_public()], remove=[])
        assert time.monotonic() - started < 5
        assert caught.value.reason.startswith(
            "the guest agent did not answer the guest-sync-delimited handshake within 1 s"
        )
        # A restart finds the old socket file in the way, and replaces it.
        driver.reboot(spec, hard=True)
        with pytest.raises(GuestAgentUnavailable, match="did not answer"):
            driver.push_keys(spec.uuid, user="root", add=["k"], remove=[])
        driver.power_off(spec.uuid)
        with pytest.raises(GuestNotRunning, match=r"^guest is not running$"):
            driver.push_keys(spec.uuid, user="root", add=["k"], remove=[])
    finally:
        driver.close()
