"""TCP-level protection for the master's HTTP server: a connection cap with a reserved share and
a per-address bound, and per-connection read timeouts (slowloris).

Agent connections are counted apart: once a connection is upgraded to the agent channel
(``admit_agent``) it leaves the ``max_connections`` pool (meant for schedulers, operators and
connections that have not said what they are) and counts against ``max_agent_connections``
instead, so a cluster of 10,000 agents does not need a scheduler-client cap of 10,000.

``GuardedServer`` wraps aiohttp's protocol factory. A connection must deliver a complete request
head within ``read_timeout`` (the master's ``header_timeout``) of connecting or of starting its
next request; the deadline is cleared while a request is being handled (a SUBSCRIBE stream or a
WebSocket may then live as long as it likes). An *idle keep-alive* connection (one that completed
a request and sent nothing since) is never timed out: pymesos keeps one ``http.client``
connection for its calls and dies if the server closes it silently.

Who gets a slot when the pool is full is ``protocol.admission``'s rule: a connection becomes
*trusted* once ``trust(request, response)`` says so (the master: a scheduler call it accepted, or
any request with valid credentials); untrusted connections may hold neither the reserved share
of the pool nor more than ``per_address`` slots from one client address, and the oldest one still
waiting for its request head (else the longest-idle one) makes room for a new connection. A
trusted or busy connection is never closed to make room.
"""

from __future__ import annotations

import asyncio
import logging
import typing
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from protocol import admission

log = logging.getLogger(__name__)


class _Guard(asyncio.Protocol):
    def __init__(self, owner: GuardedServer, inner: asyncio.Protocol) -> None:
        self.owner = owner
        self.inner = inner
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.busy = 0
        self.served = 0  # requests completed on this connection
        self.idle_since = 0.0
        self.evicted = False
        self.agent = False  # upgraded to the agent channel: counted in owner.agents
        self.handshake_lost = False  # TLS: the handshake did not complete in time (not counted)
        self.address = ""  # the client's IP address (known once the connection is made)
        self.trusted = False
        self.in_pool = False  # counted in owner.general (made, in the general pool, not closed to make room)
        self.anon = False  # counted in owner.untrusted and owner.by_address
        self.since = 0.0  # when it entered its phase (admission.Slot.since)

    # asyncio.Protocol, delegating to aiohttp's RequestHandler
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport implements asyncio.Transport without subclassing it.
        self.transport = typing.cast(asyncio.Transport, transport)
        if self.handshake_lost:  # completed at the very deadline after all: count it again
            self.handshake_lost = False
            self.owner.active += 1
        self.owner.live[self.transport] = self
        peer = transport.get_extra_info("peername")
        self.address = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        self.since = asyncio.get_running_loop().time()
        self.arm()
        self.inner.connection_made(transport)
        self.owner._made(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm()
        if self.agent:
            self.owner.agents -= 1
        elif not self.evicted:
            self.owner.active -= 1
        self.owner._leave_pool(self)
        self.owner.changed.set()
        if self.transport is not None:
            self.owner.live.pop(self.transport, None)
        self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.busy == 0 and self.timer is None:
            self.arm()  # a new request head is arriving: it must complete within read_timeout
            self.since = asyncio.get_running_loop().time()
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    # deadline handling
    def arm(self) -> None:
        self.disarm()
        loop = asyncio.get_running_loop()
        self.timer = loop.call_later(self.owner.read_timeout, self._expired)

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expired(self) -> None:
        self.timer = None
        if self.busy == 0 and self.transport is not None and not self.transport.is_closing():
            self.owner.timeouts += 1
            self.transport.close()

    def await_handshake(self, timeout: float) -> None:
        """TLS: the protocol sees ``connection_made`` only after the handshake and, when the
        handshake fails (a plaintext client, a foreign certificate), neither that nor
        ``connection_lost``; so a connection not made within the handshake timeout stops counting."""
        self.timer = asyncio.get_running_loop().call_later(timeout, self._handshake_failed)

    def active_evicted(self) -> None:
        """Closed to make room: free its slot now (``connection_lost`` will not count it twice)."""
        self.evicted = True
        self.owner.active -= 1
        self.owner._leave_pool(self)
        self.owner.evicted += 1

    def _handshake_failed(self) -> None:
        self.timer = None
        self.handshake_lost = True
        self.owner.active -= 1
        self.owner.handshake_failures += 1
        self.owner.changed.set()

    @property
    def idle_keepalive(self) -> bool:
        return self.busy == 0 and self.served > 0 and self.timer is None

    @property
    def phase(self) -> admission.Phase:
        if self.busy:
            return admission.Phase.BUSY
        return admission.Phase.IDLE if self.idle_keepalive else admission.Phase.WAITING


class _Refuse(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


class GuardedServer:
    def __init__(
        self,
        handler: web.Server | None,
        *,
        max_connections: int,
        read_timeout: float,
        max_agent_connections: int | None = None,
        handshake_timeout: float | None = None,
        per_address: int = 0,
        reserved: int = -1,
        trust: Callable[[web.Request, web.StreamResponse], bool] | None = None,
    ) -> None:
        self.handler = handler
        self.limits = admission.Limits.of(max_connections, per_address, reserved)
        self.trust = trust  # None: no connection is ever trusted
        self.general = 0  # made connections in the general pool
        self.untrusted = 0  # ... not (yet) trusted
        self.by_address: dict[str, int] = {}  # ... per client address
        self.refused_per_address = 0
        self.handshake_timeout = handshake_timeout  # TLS: see _Guard.await_handshake
        self.handshake_failures = 0
        self.max_connections = max_connections
        self.max_agent_connections = max_connections if max_agent_connections is None else max_agent_connections
        self.agents = 0  # connections upgraded to the agent channel (not in ``active``)
        self.agents_refused = 0
        self.read_timeout = read_timeout
        self.live: dict[asyncio.BaseTransport, _Guard] = {}
        self.refused = 0
        self.timeouts = 0
        self.active = 0  # protocols created and not yet lost (accepts come in batches)
        self.evicted = 0
        self.changed = asyncio.Event()  # set when a connection is refused or lost

    def __call__(self) -> asyncio.Protocol:
        if self.handler is None:
            return _Refuse()
        if self.active >= self.limits.total + max(64, self.limits.total // 2):
            # accepted but not yet made (an accept burst, TLS handshakes) far beyond the pool:
            # refused before they cost more descriptors (the pool's bounds apply once made)
            self.refused += 1
            self.changed.set()
            return _Refuse()
        self.active += 1
        g = _Guard(self, self.handler())
        if self.handshake_timeout is not None:
            g.await_handshake(self.handshake_timeout)
        return g

    def _made(self, g: _Guard) -> None:
        """A connection is made (its address known): hold it to the pool's bounds, making room
        (``protocol.admission``) or else closing it at once."""
        over_pool, over_address = admission.over(
            self.limits, self.general, self.untrusted, self.by_address.get(g.address, 0)
        )
        g.in_pool = g.anon = True
        self.general += 1
        self.untrusted += 1
        self.by_address[g.address] = self.by_address.get(g.address, 0) + 1
        if (over_pool or over_address) and not self._make_room(g.address, own_address_only=over_address, besides=g):
            if over_address:
                self.refused_per_address += 1
            else:
                self.refused += 1
            self.changed.set()
            assert g.transport is not None
            g.transport.close()

    def _leave_pool(self, g: _Guard) -> None:
        if g.in_pool:
            g.in_pool = False
            self.general -= 1
        self._trusted(g)

    def _trusted(self, g: _Guard) -> None:
        if g.anon:
            g.anon = False
            self.untrusted -= 1
            left = self.by_address.get(g.address, 1) - 1
            if left > 0:
                self.by_address[g.address] = left
            else:
                self.by_address.pop(g.address, None)

    def _make_room(self, address: str | None, *, own_address_only: bool, besides: _Guard | None = None) -> bool:
        """Close the connection ``protocol.admission.victim`` names (True), or none (False)."""
        slots = {
            g: admission.Slot(g.address, g.phase, g.trusted, g.since)
            for g in self.live.values()
            if g is not besides and not g.agent and not g.evicted and g.transport is not None
            and not g.transport.is_closing()
        }
        v = admission.victim(slots, address, own_address_only)
        if v is None:
            return False
        assert v.transport is not None
        v.transport.close()
        v.active_evicted()
        return True

    def admit_agent(self, transport: asyncio.BaseTransport | None) -> bool:
        """Move a connection that is becoming an agent channel out of the general pool into the
        agent pool; False (refuse it) when the agent pool is full."""
        g = self.live.get(transport) if transport is not None else None
        if g is None or g.agent:
            return True
        if self.agents >= self.max_agent_connections:
            self.agents_refused += 1
            return False
        g.agent = True
        if not g.evicted:
            self.active -= 1
        self._leave_pool(g)
        self.agents += 1
        self.changed.set()
        return True

    @property
    def connections(self) -> int:
        return len(self.live)

    async def wait_until(self, pred: Callable[[], bool], within: float) -> None:
        async with asyncio.timeout(within):
            while not pred():
                self.changed.clear()
                await self.changed.wait()

    def middleware(self) -> Callable[..., Awaitable[web.StreamResponse]]:
        @web.middleware
        async def guard(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> Any:
            g = self.live.get(request.transport) if request.transport is not None else None
            if g is not None:
                g.busy += 1
                g.disarm()
            resp = None
            try:
                resp = await handler(request)
                return resp
            finally:
                if g is not None:
                    g.busy -= 1
                    g.served += 1
                    g.idle_since = g.since = asyncio.get_running_loop().time()
                    if resp is not None and not g.trusted and self.trust is not None and self.trust(request, resp):
                        g.trusted = True
                        self._trusted(g)
                    # idle keep-alive: no timer (the next request head re-arms it on its first byte)

        return guard
