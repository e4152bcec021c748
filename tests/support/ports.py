"""Loopback ports for the servers tests start: chosen by the kernel, never a fixed number."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (the kernel's choice). Another process may take it
    before the caller binds it; tests that can pass port 0 to the server itself should."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
