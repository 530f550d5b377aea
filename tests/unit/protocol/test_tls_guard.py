"""The master's connection guard with TLS (``master/transport.py``): asyncio gives the protocol
neither ``connection_made`` nor ``connection_lost`` when a handshake fails, so a connection that is
not made within the handshake timeout stops counting; one made at the very deadline counts again."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from aiohttp import web

from master.transport import GuardedServer


class Inner(asyncio.Protocol):
    def __init__(self) -> None:
        self.made = 0
        self.lost = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.made += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost += 1


class FakeTransport:
    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


def guard(handshake_timeout: float) -> tuple[GuardedServer, list[Inner]]:
    made: list[Inner] = []

    def factory() -> Inner:
        made.append(Inner())
        return made[-1]

    g = GuardedServer(cast(web.Server, factory), max_connections=2, read_timeout=30.0,
                      handshake_timeout=handshake_timeout)
    return g, made


async def test_failed_handshakes_stop_counting_and_free_their_slots() -> None:
    g, _ = guard(0.01)
    g(), g()
    assert g.active == 2
    await g.wait_until(lambda: g.active == 0, within=5)
    assert g.handshake_failures == 2
    g()  # the slots are free again: not refused
    assert g.refused == 0 and g.active == 1


async def test_a_handshake_completing_at_the_deadline_counts_again() -> None:
    g, inners = guard(0.01)
    proto = g()
    await g.wait_until(lambda: g.handshake_failures == 1, within=5)
    assert g.active == 0
    transport = FakeTransport()
    proto.connection_made(cast(asyncio.Transport, transport))
    assert g.active == 1 and inners[0].made == 1 and g.connections == 1
    proto.connection_lost(None)
    assert g.active == 0 and inners[0].lost == 1 and g.connections == 0


async def test_a_completed_handshake_disarms_the_handshake_timer() -> None:
    g, _ = guard(0.01)
    proto = cast(Any, g())
    handshake_timer = proto.timer
    proto.connection_made(cast(asyncio.Transport, FakeTransport()))  # handshake done at once
    assert handshake_timer.cancelled()
    # what is armed now is the request-head deadline (read_timeout, 30 s), not the handshake one
    assert proto.timer.when() - asyncio.get_running_loop().time() > 20
    proto.connection_lost(None)
    assert g.active == 0 and g.handshake_failures == 0
