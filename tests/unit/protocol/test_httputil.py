"""protocol.httputil: size-capped body reads on a real aiohttp server, and Accept negotiation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from protocol.codec import JSON, MSGPACK
from protocol.httputil import media_type, negotiate, read_body

LIMIT = 1024


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, int, list[int]]]:
    """A server whose handler echoes the body length; ``seen`` records what handlers returned."""
    seen: list[int] = []

    async def handler(request: web.Request) -> web.Response:
        body = await read_body(request, LIMIT)
        seen.append(len(body))
        return web.Response(text=str(len(body)))

    app = web.Application()
    app.router.add_post("/", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        yield host, port, seen
    finally:
        await runner.cleanup()


async def test_small_body_is_read(server: tuple[str, int, list[int]]) -> None:
    host, port, seen = server
    async with aiohttp.ClientSession() as s, s.post(f"http://{host}:{port}/", data=b"x" * 100) as r:
        assert r.status == 200 and await r.text() == "100"
    assert seen == [100]


async def test_exactly_the_limit_is_fine(server: tuple[str, int, list[int]]) -> None:
    host, port, _ = server
    async with aiohttp.ClientSession() as s, s.post(f"http://{host}:{port}/", data=b"x" * LIMIT) as r:
        assert r.status == 200


async def test_declared_100mb_refused_before_reading(server: tuple[str, int, list[int]]) -> None:
    """Content-Length says 100 MB, only a few bytes follow: 413 at once, nothing buffered."""
    host, port, seen = server
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 104857600\r\n\r\n{\"type\":"
        )
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), timeout=10)
        assert status_line.startswith(b"HTTP/1.1 413"), status_line
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
        assert b"connection: close" in head.lower()
    finally:
        writer.close()
        await writer.wait_closed()
    assert seen == []


async def test_chunked_body_over_limit_refused_while_streaming(server: tuple[str, int, list[int]]) -> None:
    host, port, seen = server
    sent = 0

    async def body() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(64):  # up to 64 KiB, far beyond the limit
            sent += 1024
            yield b"y" * 1024

    async with aiohttp.ClientSession() as s:
        try:
            async with s.post(f"http://{host}:{port}/", data=body()) as r:
                assert r.status == 413
        except aiohttp.ClientError:
            pass  # the server may close while we are still writing: also a refusal
    assert seen == []


def test_negotiate() -> None:
    assert negotiate(None) == JSON
    assert negotiate("") == JSON
    assert negotiate("*/*") == JSON
    assert negotiate("application/json") == JSON
    assert negotiate("application/*") == JSON
    assert negotiate("application/x-msgpack") == MSGPACK
    assert negotiate("application/x-msgpack, application/json") == MSGPACK
    assert negotiate("application/json, application/x-msgpack") == JSON
    assert negotiate("application/json;q=0.5, application/x-msgpack") == MSGPACK
    assert negotiate("application/x-msgpack;q=0, */*") == JSON
    assert negotiate("application/x-protobuf") is None
    assert negotiate("text/html, application/json;q=0") is None
    assert negotiate("application/json;q=abc") is None
    assert negotiate("APPLICATION/JSON; charset=utf-8") == JSON
    assert negotiate("*/*;q=0.1, application/x-msgpack;q=0.2") == MSGPACK


def test_media_type() -> None:
    assert media_type("application/json; charset=utf-8") == JSON
    assert media_type(" Application/X-Msgpack ") == MSGPACK
    assert media_type(None) is None and media_type("") is None
