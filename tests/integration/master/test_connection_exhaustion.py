"""Connection exhaustion and slow clients (protocol/admission.py): however many
idle or half-sent sockets one client holds, a framework's call connection is never evicted, a
new framework call and an agent's registration get through at once, and the pool's reserved share
and per-address bound hold."""

from __future__ import annotations

import asyncio
import http.client
import socket
from pathlib import Path

import aiohttp

from master.service import MasterService
from master.testing_agent import FakeAgent
from protocol import codec, mesos

from ..cluster import master_config
from .test_native_msgpack import MsgpackScheduler


def _flood(port: int, idle: int, keepalive: int) -> list[socket.socket]:
    """``idle`` sockets that never send a byte, ``idle`` that send half a request head, and
    ``keepalive`` that complete one request and then sit idle."""
    out: list[socket.socket] = []
    for i in range(2 * idle):
        c = socket.create_connection(("127.0.0.1", port))
        if i % 2:
            c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        out.append(c)
    for _ in range(keepalive):
        c = socket.create_connection(("127.0.0.1", port))
        c.settimeout(5)
        try:
            c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            c.recv(4096)
        except OSError:
            pass  # closed to make room: what the flood is for
        out.append(c)
    return out


async def test_idle_and_slow_sockets_do_not_lock_out_agents_or_frameworks(tmp_path: Path) -> None:
    svc = MasterService(master_config(tmp_path / "m", max_connections=60, header_timeout=30.0, read_timeout=30.0))
    await svc.start()
    guard = svc.guard
    assert guard is not None and guard.limits.per_address == 15 and guard.limits.reserved == 6
    socks: list[socket.socket] = []
    agent = FakeAgent(svc.url)
    async with aiohttp.ClientSession() as http_session:
        sched = MsgpackScheduler(svc.url, http_session)
        calls = http.client.HTTPConnection("127.0.0.1", svc.port, timeout=5)  # like pymesos' one call connection

        def revive() -> int:
            assert sched.framework_id is not None
            calls.request("POST", "/api/v1/scheduler", body=codec.encode_json(mesos.Call.make_revive(sched.framework_id)),
                          headers={"Content-Type": "application/json", "Mesos-Stream-Id": sched.stream_id})
            r = calls.getresponse()
            r.read()
            return r.status

        try:
            await sched.subscribe(mesos.FrameworkInfo(user="u", name="fw"))
            assert await asyncio.to_thread(revive) == 202
            socks = await asyncio.to_thread(_flood, svc.port, idle=100, keepalive=100)
            # one address holds at most its bound of untrusted connections; the pool never filled
            assert guard.by_address.get("127.0.0.1", 0) <= guard.limits.per_address
            assert guard.untrusted <= guard.limits.total - guard.limits.reserved
            # the rest were closed to make room (or, in an accept burst far above the pool, at once)
            assert guard.evicted + guard.refused >= 300 - guard.limits.per_address
            # the framework's call connection was kept: the same socket serves its next call
            assert await asyncio.to_thread(revive) == 202
            # an agent registers at once, a new client is served
            async with asyncio.timeout(5):
                await agent.connect()
            async with http_session.get(svc.url + "/health") as r:
                assert r.status == 200
            # the subscription stream stayed up through it all
            await sched.next(mesos.EventType.HEARTBEAT)
        finally:
            for c in socks:
                c.close()
            calls.close()
            await sched.close()
            await agent.close()
            await svc.stop()


async def test_a_slow_head_or_body_is_cut_off_by_its_timeout(tmp_path: Path) -> None:
    svc = MasterService(master_config(tmp_path / "m", header_timeout=0.3, read_timeout=0.6))
    await svc.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", svc.port)
        writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # the head never ends
        await writer.drain()
        async with asyncio.timeout(5):
            assert await reader.read() == b""  # closed by the header timeout
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", svc.port)
        writer.write(b"POST /api/v1/scheduler HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n{")  # the body never completes
        await writer.drain()
        async with asyncio.timeout(5):
            head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), head[:60]
        writer.close()
        assert svc.guard is not None and svc.guard.timeouts >= 1
    finally:
        await svc.stop()
