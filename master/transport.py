"""TCP-level protection for the master's HTTP server: a connection cap and per-connection read
timeouts (slowloris, RELIABILITY.md S9).

``GuardedServer`` wraps aiohttp's protocol factory. Every accepted connection gets a deadline
by which a request head must have arrived; the deadline is cleared while a request is being
handled (a SUBSCRIBE stream or a WebSocket may then live as long as it likes) and re-armed when
the response is done (an idle keep-alive connection is closed after ``read_timeout``). Past
``max_connections`` a new connection is closed at once.
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

    # asyncio.Protocol, delegating to aiohttp's RequestHandler
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport implements asyncio.Transport without subclassing it.
        self.transport = typing.cast(asyncio.Transport, transport)
        self.owner.live[self.transport] = self
        self.arm()
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm()
        self.owner.active -= 1
        self.owner.changed.set()
        if self.transport is not None:
            self.owner.live.pop(self.transport, None)
        self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
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


class _Refuse(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


class GuardedServer:
    def __init__(self, handler: web.Server | None, *, max_connections: int, read_timeout: float) -> None:
        self.handler = handler
        self.max_connections = max_connections
        self.read_timeout = read_timeout
        self.live: dict[asyncio.Transport, _Guard] = {}
        self.refused = 0
        self.timeouts = 0
        self.active = 0  # protocols created and not yet lost (accepts come in batches)
        self.changed = asyncio.Event()  # set when a connection is refused or lost

    def __call__(self) -> asyncio.Protocol:
        if self.handler is None or self.active >= self.max_connections:
            self.refused += 1
            self.changed.set()
            return _Refuse()
        self.active += 1
        return _Guard(self, self.handler())

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
                    if g.busy == 0 and g.transport is not None and not g.transport.is_closing():
                        g.arm()

        return guard
