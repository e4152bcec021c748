"""A client for the QEMU guest agent (qemu-guest-agent, "QGA") over the UNIX socket of a
guest's ``org.qemu.guest_agent.0`` virtio-serial channel.

The protocol is QMP's JSON, one object per line each way, without a greeting:
``{"execute": NAME, "arguments": {...}}`` is answered ``{"return": ...}`` or ``{"error":
{"class": ..., "desc": ...}}``. The channel is a byte stream that outlives each connection,
so a connection may find a late reply meant for an earlier client that gave up, and the
agent's parser may still hold half a request of one. Every connection therefore starts with
the handshake qga/qapi-schema.json prescribes: a 0xFF byte (invalid JSON: the agent drops
what it had parsed), then ``guest-sync-delimited`` with a random id, answered with 0xFF
and that id. 0xFF never occurs in the agent's UTF-8 output, so everything before the
sentinel that precedes our id is stale and discarded. After a timeout the state of the
stream is unknown again, so a client that timed out is closed, never reused.

Every wait has a deadline, and every read a size bound (a guest controls what comes back).
Failures are ``GuestAgentUnavailable`` with a reason an API user can read;
``GuestAgentCommandFailed`` when the agent answered with an error. The commands cloudseed
uses are the ssh ones of QEMU 5.2+ (Debian 12 ships 7.2): ``guest-ssh-get-authorized-keys``
``{username}`` returns ``{"keys": [...]}``; ``guest-ssh-add-authorized-keys`` ``{username,
keys, reset}`` appends the keys not already there; ``guest-ssh-remove-authorized-keys``
``{username, keys}`` drops exactly those lines. All three edit ``~USER/.ssh/authorized_keys``
and fail for a user the guest does not have.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from cloudseed.compute.errors import GuestAgentCommandFailed, GuestAgentUnavailable

SENTINEL = b"\xff"
# The longest reply line accepted: authorized_keys of a few hundred keys fits many times.
MAX_REPLY = 1 << 20
# Stale output discarded while looking for the handshake's sentinel, at most.
MAX_DISCARD = 4 << 20
DEFAULT_TIMEOUT = 10.0


class _Wait(NamedTuple):
    """What is being waited for, until when (monotonic), out of how many seconds."""

    what: str
    deadline: float
    seconds: float

    @classmethod
    def start(cls, what: str, seconds: float) -> _Wait:
        return cls(what, time.monotonic() + seconds, seconds)

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.expired()
        return left

    def expired(self) -> GuestAgentUnavailable:
        return GuestAgentUnavailable(
            f"the guest agent did not answer {self.what} within {self.seconds:g} s "
            "(not installed, not started yet, or stopped)"
        )


class GuestAgentClient:
    """One synchronised connection to a guest agent; use ``connect``."""

    def __init__(self, sock: socket.socket, *, timeout: float) -> None:
        self._sock = sock
        self._buffer = bytearray()
        self.timeout = timeout

    @classmethod
    @contextlib.contextmanager
    def connect(cls, path: Path, *, timeout: float = DEFAULT_TIMEOUT) -> Iterator[GuestAgentClient]:
        """Connect to the channel at ``path`` and synchronise; closed on exit. ``timeout``
        bounds the connection, the handshake and each command."""
        sock = _connect(path, timeout)
        try:
            client = cls(sock, timeout=timeout)
            client.sync()
            yield client
        finally:
            sock.close()

    # -- the commands cloudseed uses -----------------------------------------------------

    def ping(self) -> None:
        self.execute("guest-ping")

    def authorized_keys(self, username: str) -> list[str]:
        reply = self.execute("guest-ssh-get-authorized-keys", {"username": username})
        keys = reply.get("keys") if isinstance(reply, dict) else None
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise GuestAgentUnavailable(
                "the guest agent sent a malformed guest-ssh-get-authorized-keys reply"
            )
        return keys

    def add_authorized_keys(self, username: str, keys: list[str]) -> None:
        """Append ``keys`` the user does not have yet (reset false: the others stay)."""
        self.execute(
            "guest-ssh-add-authorized-keys", {"username": username, "keys": keys, "reset": False}
        )

    def remove_authorized_keys(self, username: str, keys: list[str]) -> None:
        self.execute("guest-ssh-remove-authorized-keys", {"username": username, "keys": keys})

    # -- the protocol ----------------------------------------------------------------------

    def sync(self) -> None:
        """The guest-sync-delimited handshake: afterwards the next line is our next reply."""
        sync_id = secrets.randbelow(1 << 62)
        request = {"execute": "guest-sync-delimited", "arguments": {"id": sync_id}}
        wait = _Wait.start("the guest-sync-delimited handshake", self.timeout)
        self._send(SENTINEL + _line(request), wait)
        discarded = 0
        while True:
            stale = self._read_until(SENTINEL, wait, MAX_DISCARD - discarded)
            discarded += len(stale) + 1
            reply = self._read_until(b"\n", wait, MAX_REPLY)
            try:
                answer = json.loads(reply)
            except ValueError:
                continue  # a stale line cut by a sentinel: keep looking for ours
            if isinstance(answer, dict) and answer.get("return") == sync_id:
                return

    def execute(
        self, command: str, arguments: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> Any:
        """Run ``command`` and return its ``return`` value."""
        wait = _Wait.start(command, self.timeout if timeout is None else timeout)
        request: dict[str, Any] = {"execute": command}
        if arguments is not None:
            request["arguments"] = arguments
        self._send(_line(request), wait)
        while True:
            line = self._read_until(b"\n", wait, MAX_REPLY).strip()
            if line:
                break
        try:
            answer = json.loads(line)
        except ValueError:
            raise GuestAgentUnavailable(
                f"the guest agent sent something that is not JSON in reply to {command}"
            ) from None
        if not isinstance(answer, dict):
            raise GuestAgentUnavailable(f"the guest agent sent a malformed reply to {command}")
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            raise GuestAgentCommandFailed(
                command, str(error.get("class", "GenericError")), str(error.get("desc", error))
            )
        if "return" not in answer:
            raise GuestAgentUnavailable(f"the guest agent sent a malformed reply to {command}")
        return answer["return"]

    def _send(self, data: bytes, wait: _Wait) -> None:
        try:
            self._sock.settimeout(wait.remaining())
            self._sock.sendall(data)
        except TimeoutError:
            raise wait.expired() from None
        except OSError as exc:
            raise _channel_failed(wait, exc) from None

    def _read_until(self, delimiter: bytes, wait: _Wait, limit: int) -> bytes:
        """The bytes before the next ``delimiter`` (which is consumed); at most ``limit``."""
        while (end := self._buffer.find(delimiter)) < 0:
            if len(self._buffer) > limit:
                raise _too_much(wait, limit)
            try:
                self._sock.settimeout(wait.remaining())
                chunk = self._sock.recv(65536)
            except TimeoutError:
                raise wait.expired() from None
            except OSError as exc:
                raise _channel_failed(wait, exc) from None
            if not chunk:
                raise GuestAgentUnavailable(f"the guest agent channel closed during {wait.what}")
            self._buffer += chunk
        if end > limit:
            raise _too_much(wait, limit)
        data = bytes(self._buffer[:end])
        del self._buffer[: end + len(delimiter)]
        return data


def _connect(path: Path, timeout: float) -> socket.socket:
    # Through /proc/self/fd, as qemu_process.qmp does: a UNIX socket address holds 108 bytes,
    # and a state path can be longer.
    try:
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise GuestAgentUnavailable(
            f"no guest agent channel at {path}: {exc.strerror or exc}"
        ) from None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(f"/proc/self/fd/{directory}/{path.name}")
    except TimeoutError:
        sock.close()
        raise GuestAgentUnavailable(
            f"the guest agent channel did not accept a connection within {timeout:g} s"
        ) from None
    except OSError as exc:
        sock.close()
        raise GuestAgentUnavailable(
            f"cannot connect to the guest agent channel {path.name}: {exc.strerror or exc}"
        ) from None
    finally:
        os.close(directory)
    return sock


def _line(request: dict[str, Any]) -> bytes:
    return json.dumps(request).encode() + b"\n"


def _channel_failed(wait: _Wait, exc: OSError) -> GuestAgentUnavailable:
    return GuestAgentUnavailable(
        f"the guest agent channel failed during {wait.what}: {exc.strerror or exc}"
    )


def _too_much(wait: _Wait, limit: int) -> GuestAgentUnavailable:
    return GuestAgentUnavailable(f"the guest agent sent more than {limit} bytes during {wait.what}")


def push_keys(
    path: Path, *, user: str, add: list[str], remove: list[str], timeout: float = DEFAULT_TIMEOUT
) -> None:
    """Append ``add`` to ``user``'s authorized_keys (lines already there stay), drop
    ``remove``, and read the file back: the agent's own word that the guest holds the set.
    Adding comes first, so a guest is never left without a key it should have."""
    with GuestAgentClient.connect(path, timeout=timeout) as agent:
        if add:
            agent.add_authorized_keys(user, add)
        if remove:
            agent.remove_authorized_keys(user, remove)
        if not add:
            # Nothing to find; and with every key removed the file may not exist, which
            # guest-ssh-get-authorized-keys reports as an error.
            return
        have = set(agent.authorized_keys(user))
    missing = [key for key in add if key not in have]
    kept = [key for key in remove if key in have]
    if missing or kept:
        raise GuestAgentUnavailable(
            f"the guest agent confirmed the change but {user}'s authorized_keys lacks "
            f"{len(missing)} added key(s) and still has {len(kept)} removed one(s)"
        )
