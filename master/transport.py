"""TCP-level protection for the master's HTTP server: a connection cap and per-connection read
timeouts (slowloris, RELIABILITY.md S9).

Agent connections are counted apart: once a connection is upgraded to the agent channel
(``admit_agent``) it leaves the ``max_connections`` pool (meant for schedulers, operators and
connections that have not said what they are) and counts against ``max_agent_connections``
instead, so a cluster of 10,000 agents does not need a scheduler-client cap of 10,000.

``GuardedServer`` wraps aiohttp's protocol factory. A connection must deliver a complete request
head within ``read_timeout`` of connecting (or of starting its next request); the deadline is
cleared while a request is being handled (a SUBSCRIBE stream or a WebSocket may then live as long
as it likes). An *idle keep-alive* connection (one that completed a request and sent nothing
since) is never timed out: pymesos keeps one ``http.client`` connection for its calls and dies if
the server closes it silently. Instead, when ``max_connections`` is reached the longest-idle
keep-alive connection is evicted to make room; only if there is none is the new connection closed
at once.
"""

from __future__ import annotations

import asyncio
import logging
import typing
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

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

    # asyncio.Protocol, delegating to aiohttp's RequestHandler
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport implements asyncio.Transport without subclassing it.
        self.transport = typing.cast(asyncio.Transport, transport)
        if self.handshake_lost:  # completed at the very deadline after all: count it again
            self.handshake_lost = False
            self.owner.active += 1
        self.owner.live[self.transport] = self
        self.arm()
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm()
        if self.agent:
            self.owner.agents -= 1
        elif not self.evicted:
            self.owner.active -= 1
        self.owner.changed.set()
        if self.transport is not None:
            self.owner.live.pop(self.transport, None)
        self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.busy == 0 and self.timer is None:
            self.arm()  # a new request head is arriving: it must complete within read_timeout
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

    def _handshake_failed(self) -> None:
        self.timer = None
        self.handshake_lost = True
        self.owner.active -= 1
        self.owner.handshake_failures += 1
        self.owner.changed.set()

    @property
    def idle_keepalive(self) -> bool:
        return self.busy == 0 and self.served > 0 and self.timer is None


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
    ) -> None:
        self.handler = handler
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
        if self.active >= self.max_connections and not self._evict_idle():
            self.refused += 1
            self.changed.set()
            return _Refuse()
        self.active += 1
        g = _Guard(self, self.handler())
        if self.handshake_timeout is not None:
            g.await_handshake(self.handshake_timeout)
        return g

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
        self.agents += 1
        self.changed.set()
        return True

    def _evict_idle(self) -> bool:
        """Close the longest-idle keep-alive connection to make room (True if one was closed)."""
        idle = [g for g in self.live.values() if g.idle_keepalive and g.transport and not g.transport.is_closing()]
        if not idle:
            return False
        victim = min(idle, key=lambda g: g.idle_since)
        assert victim.transport is not None
        victim.transport.close()
        victim.owner.active -= 1  # counted free now; connection_lost will not count it twice
        victim.evicted = True
        self.evicted += 1
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
            try:
                return await handler(request)
            finally:
                if g is not None:
                    g.busy -= 1
                    g.served += 1
                    g.idle_since = asyncio.get_running_loop().time()
                    # idle keep-alive: no timer (the next request head re-arms it on its first byte)

        return guard
