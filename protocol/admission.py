"""Which connection an HTTP server closes to make room when its general pool is full.

A server (``master.transport.GuardedServer``) keeps a general pool of ``Limits.total``
connections. A connection is *trusted* once it has done something only a real client does: a
scheduler call the master accepted (a framework's SUBSCRIBE stream or its call connection), or a
request with valid credentials; agent channels leave the pool altogether. Every other connection
is *untrusted*: a new one, a browser's, an idle socket's. Three bounds apply to untrusted
connections only:

* the pool: at most ``total`` connections in all;
* the reserved share: at most ``total - reserved`` untrusted connections, so frameworks (their
  call connections and the ones they open next) never find the pool full of anonymous sockets;
* per client address: at most ``per_address`` untrusted connections from one address.

When a new connection would break one, an untrusted connection that is not in the middle of a
request makes room: of the address holding the most untrusted connections (or, when the per-address
bound is the one hit, of the new connection's own address), the oldest one still waiting for its
request head (a slowloris socket), else the longest-idle keep-alive one. Only when there is none is
the new connection refused. A trusted connection is never closed to make room, and neither is one
whose request is being handled. A client that connects and sends its request at once is therefore
served however many idle or half-open sockets others hold.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Hashable, Mapping
from typing import TypeVar

import attrs

__pure__ = True

K = TypeVar("K", bound=Hashable)


class Phase(enum.Enum):
    WAITING = "waiting"  # no request being handled and a request head expected (new, or a head arriving)
    BUSY = "busy"  # a request is being handled (a body upload, a stream, a WebSocket)
    IDLE = "idle"  # a keep-alive connection between requests


@attrs.frozen
class Limits:
    total: int
    per_address: int
    reserved: int

    @classmethod
    def of(cls, total: int, per_address: int = 0, reserved: int = -1) -> Limits:
        """``per_address`` 0: a quarter of the pool; ``reserved`` -1: a tenth of it (at least one
        slot kept whenever the pool has two)."""
        per = per_address if per_address > 0 else max(1, total // 4)
        res = reserved if reserved >= 0 else (max(1, total // 10) if total > 1 else 0)
        return cls(total=total, per_address=per, reserved=min(res, max(0, total - 1)))


@attrs.frozen
class Slot:
    address: str
    phase: Phase
    trusted: bool
    since: float  # when it entered its phase (connected, started its head, went idle)


def over(limits: Limits, total: int, untrusted: int, from_address: int) -> tuple[bool, bool]:
    """``(over_pool, over_address)``: whether one more untrusted connection from an address that
    holds ``from_address`` untrusted ones breaks the pool or reserved-share bound, or the
    per-address bound."""
    return (
        total >= limits.total or untrusted >= limits.total - limits.reserved,
        from_address >= limits.per_address,
    )


def victim(slots: Mapping[K, Slot], address: str | None, own_address_only: bool) -> K | None:
    """The connection to close to make room for a new one from ``address`` (None: not known yet),
    or None when no connection may be closed (the new one is refused)."""
    untrusted = {k: s for k, s in slots.items() if not s.trusted}
    if own_address_only:
        untrusted = {k: s for k, s in untrusted.items() if s.address == address}
    counts = Counter(s.address for s in untrusted.values())
    best: K | None = None
    best_key: tuple[int, bool, float] | None = None
    for k, s in untrusted.items():
        if s.phase is Phase.BUSY:
            continue
        key = (-counts[s.address], s.phase is not Phase.WAITING, s.since)
        if best_key is None or key < best_key:
            best, best_key = k, key
    return best
