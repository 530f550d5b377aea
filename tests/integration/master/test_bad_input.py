"""Bad peers on a real master: malformed agent frames, oversized bodies/frames,
msgpack bombs, idle/slowloris connections and the connection cap. Each bad peer gets a
clear error or a close; the master keeps serving everyone else."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import aiohttp
import msgpack
import psutil
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from master.service import MasterService
from master.testing_agent import FakeAgent
from protocol import agent_channel as ac
from protocol import codec, mesos
from protocol.resources import Resources

from ..cluster import master_config

BAD_FRAMES = [
    b"\xc1",  # never-used msgpack byte
    b"\x92\x01",  # truncated array
    msgpack.packb([1, 2, 3]),  # wrong top-level type
    msgpack.packb({"messages": [{"type": "NO_SUCH_TYPE"}]}),  # unknown message type
    msgpack.packb({"messages": [{"type": "PONG", "pong": {"seq": 1}, "bogus": 1}]}),  # extra field
    msgpack.packb({"messages": [{"type": "PONG"}]}),  # body missing
    b"\x91" * 10_000 + b"\xc0",  # nesting 10k deep
    b"\xdd\xff\xff\xff\xff",  # S8: array declaring 2^32-1 elements
    b"\xdb\xff\xff\xff\xff",  # S8: a 4 GiB string
]


async def _closed_code(url: str, data: bytes, register_first: bool) -> int | None:
    async with aiohttp.ClientSession() as s, s.ws_connect(url + ac.PATH) as ws:
        if register_first:
            reg = ac.Register(hostname="h", port=1, resources=Resources.parse("cpus:1;mem:64").to_mesos())
            await ws.send_bytes(codec.encode_msgpack(ac.frame(reg)))
            msg = await ws.receive(timeout=5)
            assert msg.type is aiohttp.WSMsgType.BINARY
        await ws.send_bytes(data)
        async with asyncio.timeout(5):
            while True:
                msg = await ws.receive()
                if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING):
                    return ws.close_code
                if msg.type is aiohttp.WSMsgType.ERROR:
                    return ws.close_code


async def test_malformed_agent_frames_close_only_that_agent(master: MasterService) -> None:
    good = FakeAgent(master.url)
    await good.connect()
    try:
        before = master.counters["invalid_messages_total"]
        for i, data in enumerate(BAD_FRAMES):
            code = await _closed_code(master.url, data, register_first=bool(i % 2))
            assert code == 1007, (data[:20], code)
        assert master.counters["invalid_messages_total"] - before == len(BAD_FRAMES)
        # text frames and a non-REGISTER first message are refused too
        code = await _closed_code(master.url, codec.encode_msgpack(ac.frame(ac.Pong(seq=1))), register_first=False)
        assert code == 1008
        # an empty frame is well formed (no messages) but is not a REGISTER either
        code = await _closed_code(master.url, ac.encode_frame([]), register_first=False)
        assert code == 1008
        # the good agent is untouched and still answers pings through the master
        assert not good.closed.is_set()
        assert good.agent_id in master.state.agents and master.state.agents[good.agent_id].conn_id is not None
        async with aiohttp.ClientSession() as s, s.get(master.url + "/health") as r:
            assert r.status == 200
        assert master.counters["errors_total"] == 0
    finally:
        await good.close()


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.binary(max_size=200))
async def test_random_bytes_on_the_agent_channel(tmp_path_factory: object, data: bytes) -> None:
    # one master for all examples would be nicer; a fresh one per example keeps it independent
    svc = MasterService(master_config(Path(str(tmp_path_factory.mktemp("m")))))  # type: ignore[attr-defined]
    await svc.start()
    try:
        try:
            frame = codec.decode_msgpack(ac.Frame, data)
            valid = all(m.body() is not None for m in frame.messages)
        except codec.DecodeError:
            valid = False
        code = await _closed_code(svc.url, data, register_first=True) if not valid else None
        if not valid:
            assert code == 1007
        assert svc.counters["errors_total"] == 0
    finally:
        await svc.stop()


async def test_oversized_http_body_and_ws_frame(master: MasterService) -> None:
    proc = psutil.Process()
    rss0 = proc.memory_info().rss
    # S7: a 100 MB body is refused from its Content-Length, before it is buffered
    reader, writer = await asyncio.open_connection("127.0.0.1", master.port)
    writer.write(
        b"POST /api/v1/scheduler HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 104857600\r\n\r\n" + b"{" * 65536
    )
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 413")
    writer.close()
    # ... and a chunked body without a length is cut at the cap
    async with aiohttp.ClientSession() as s:

        async def gen() -> object:
            for _ in range(200):
                yield b" " * 65536  # 12.5 MB total

        async with s.post(master.url + "/api/v1/scheduler", data=gen(),
                          headers={"Content-Type": "application/json"}) as r:
            assert r.status == 413
    # a WebSocket frame declaring 100 MB: close 1009 from its header, nothing buffered
    reader, writer = await asyncio.open_connection("127.0.0.1", master.port)
    writer.write(
        b"GET /api/v1/agent HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 101")
    writer.write(b"\x82\xff" + (100 * 1024 * 1024).to_bytes(8, "big") + b"\x00\x00\x00\x00" + b"\x00" * 4096)
    await writer.drain()
    close = await asyncio.wait_for(reader.readexactly(4), 5)
    assert close[0] == 0x88 and int.from_bytes(close[2:4], "big") == 1009
    writer.close()
    assert proc.memory_info().rss - rss0 < 30 * 1024 * 1024  # the body was never buffered whole


async def test_slowloris_and_connection_cap(tmp_path: Path) -> None:
    svc = MasterService(master_config(tmp_path / "m", max_connections=1010, read_timeout=2.5,
                                      max_connections_per_address=1010, reserved_connections=0))
    await svc.start()
    socks: list[socket.socket] = []
    try:
        # 1,000 peers: idle or slowloris (half a request head, never finished)
        for i in range(1000):
            c = socket.create_connection(("127.0.0.1", svc.port))
            if i % 2:
                c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            socks.append(c)
        # a working client is still served
        async with aiohttp.ClientSession() as s, s.get(svc.url + "/health") as r:
            assert r.status == 200
        # above the cap the oldest sockets still without a request head make room
        extra = [socket.create_connection(("127.0.0.1", svc.port)) for _ in range(20)]
        socks += extra
        assert svc._guard is not None
        guard = svc._guard
        await guard.wait_until(lambda: guard.evicted >= 10, 10)
        assert guard.refused == 0
        # the read timeout frees every idle slot
        await guard.wait_until(lambda: guard.connections == 0, 15)
        assert svc._guard.timeouts + svc._guard.evicted >= 1020
        async with aiohttp.ClientSession() as s, s.get(svc.url + "/health") as r:
            assert r.status == 200
        # a subscription stream is not subject to the read timeout
        body = codec.encode_msgpack(mesos.Call.make_subscribe(mesos.FrameworkInfo(user="u", name="n")))
        async with aiohttp.ClientSession() as s, s.post(
            svc.url + "/api/v1/scheduler", data=body, headers={"Content-Type": codec.MSGPACK}
        ) as r:
            assert r.status == 200
            for _ in range(3):  # heartbeats keep flowing past read_timeout
                n = int(await asyncio.wait_for(r.content.readuntil(b"\n"), 5))
                await r.content.readexactly(n)
    finally:
        for c in socks:
            c.close()
        await svc.stop()


async def test_agent_that_never_registers_is_closed(tmp_path: Path) -> None:
    svc = MasterService(master_config(tmp_path / "m", read_timeout=0.3))
    await svc.start()
    try:
        async with aiohttp.ClientSession() as s, s.ws_connect(svc.url + ac.PATH) as ws:
            msg = await ws.receive(timeout=5)
            assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
            assert ws.close_code == 1008
        assert svc.state.agents == {}
    finally:
        await svc.stop()


async def test_idle_keepalive_survives_and_is_evicted_only_under_pressure(tmp_path: Path) -> None:
    """pymesos keeps one http.client connection for its calls and dies if the server closes it
    silently: idle keep-alive connections are never timed out, only evicted at the cap."""
    import http.client

    svc = MasterService(master_config(tmp_path / "m", max_connections=4, read_timeout=0.3,
                                      max_connections_per_address=4, reserved_connections=0))
    await svc.start()
    conns = [http.client.HTTPConnection("127.0.0.1", svc.port, timeout=5) for _ in range(5)]

    def get(c: http.client.HTTPConnection) -> int:
        c.request("GET", "/health")
        r = c.getresponse()
        r.read()
        return r.status

    try:
        assert await asyncio.to_thread(get, conns[0]) == 200
        await asyncio.sleep(0.8)  # idle well past read_timeout: the point of this test
        assert await asyncio.to_thread(get, conns[0]) == 200  # same socket, still open
        for c in conns[1:4]:
            assert await asyncio.to_thread(get, c) == 200
        assert svc._guard is not None and svc._guard.connections == 4
        # a fifth client: the longest-idle keep-alive connection (conns[0]) makes room
        assert await asyncio.to_thread(get, conns[4]) == 200
        assert svc._guard.evicted == 1 and svc._guard.refused == 0
    finally:
        for c in conns:
            c.close()
        await svc.stop()
