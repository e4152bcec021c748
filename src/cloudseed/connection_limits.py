"""The deadlines a listener's connections must meet, and the cap on how many connections one
source address may hold open (issue 30).

IO-free: the protocol (``coalescing.py``) asks and reports, with the loop's clock as ``now``.

Deadlines, each counted by one timer per connection (``coalescing.py``'s docstring):
``first_request`` from the connection's opening to its first request's first byte (then it
is closed without an answer); ``header`` from a request's first byte to the end of its head,
and ``request`` (None: none) from its first byte to its last, body included (then 408).

The cap counts the connections each source address has open on one listener of one worker
process: each worker has a socket of its own and the kernel hands it a share of the
connections chosen by a hash of their addresses and ports, so one guest's connections spread
over the workers and it may hold at most ``workers`` times the cap, reaching the cap in each
worker at about the same time. A connection over the cap is refused at once (``admit``
answers False); addresses the cap exempts (metadata proxies, which relay many guests) are
never counted. Refusals are logged at most once per ``log_every`` seconds per address.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

log = logging.getLogger(__name__)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Deadlines:
    """Seconds (``[wsgi]`` and ``[metadata] request_timeout`` in settings)."""

    first_request: float = 20.0
    header: float = 20.0
    request: float | None = None

    @property
    def head(self) -> float:
        """The head's deadline: the request's own, when that is the shorter."""
        return self.header if self.request is None else min(self.header, self.request)


def _nothing() -> None:
    pass


class ConnectionCap:
    """Open connections per source address, at most ``per_address`` each, except for the
    addresses in ``exempt``. ``refused`` is called for every refusal (the metric)."""

    def __init__(
        self,
        per_address: int,
        *,
        exempt: Sequence[Network] = (),
        refused: Callable[[], None] = _nothing,
        log_every: float = 60.0,
    ) -> None:
        if per_address < 1:
            raise ValueError("per_address must be at least 1")
        self.per_address = per_address
        self.log_every = log_every
        self._refused = refused
        self._open: dict[str, int] = {}  # only addresses with a connection open: no leak
        # Per address refused since its last log line: (when that line was logged, how many).
        self._logged: dict[str, tuple[float, int]] = {}
        self._exempt_networks = tuple(exempt)
        # Proxies connect again and again: the answer is remembered (for a few addresses).
        self._is_exempt_cached = lru_cache(maxsize=256)(self._is_exempt)

    def _is_exempt(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
        return any(
            ip in net or (mapped is not None and mapped in net) for net in self._exempt_networks
        )

    def exempts(self, address: str) -> bool:
        """Whether connections from ``address`` are left uncounted (ask before ``admit``)."""
        return bool(self._exempt_networks) and self._is_exempt_cached(address)

    def admit(self, address: str, now: float) -> bool:
        """Count a new connection from ``address`` (True: ``release`` it when it closes), or
        refuse it (False) when the address already has ``per_address`` open."""
        count = self._open.get(address, 0)
        if count < self.per_address:
            self._open[address] = count + 1
            return True
        self._refused()
        self._log_refusal(address, now)
        return False

    def release(self, address: str) -> None:
        """A counted connection from ``address`` closed."""
        count = self._open.get(address, 0)
        if count > 1:
            self._open[address] = count - 1
        else:
            self._open.pop(address, None)

    def open_from(self, address: str) -> int:
        """Connections counted for ``address`` (0 when none are open)."""
        return self._open.get(address, 0)

    @property
    def addresses(self) -> int:
        """How many addresses have connections counted."""
        return len(self._open)

    def _log_refusal(self, address: str, now: float) -> None:
        last = self._logged.get(address)
        if last is not None and now - last[0] < self.log_every:
            self._logged[address] = (last[0], last[1] + 1)
            return
        if len(self._logged) > 1024:  # forget the addresses logged longer ago than log_every
            self._logged = {a: v for a, v in self._logged.items() if now - v[0] < self.log_every}
        before = last[1] if last is not None else 0
        self._logged[address] = (now, 0)
        log.warning(
            "refused a connection from %s: it has %d open, the most one address may have in "
            "this worker ([metadata] max_connections_per_address)%s",
            address,
            self.per_address,
            f"; {before} more refused since the last such message" if before else "",
        )
