"""Malformed HTTP requests are logged as one line each, without a traceback, and at most a burst
per client address per window (protocol/requestlog.py), on a real master."""

from __future__ import annotations

import asyncio
import logging

import pytest

from master.service import MasterService
from protocol.requestlog import MalformedRequestFilter

BAD = b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"


async def _send(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    try:
        async with asyncio.timeout(5):
            return await reader.read(64)
    finally:
        writer.close()


async def test_a_flood_of_malformed_requests_logs_a_few_lines(master: MasterService, caplog: pytest.LogCaptureFixture) -> None:
    flt = master.request_log
    flt.burst, flt.window = 3, 3600.0
    before_logged, before_suppressed = flt.logged, flt.suppressed
    with caplog.at_level(logging.INFO, logger="aiohttp.server"):
        for _ in range(30):
            assert (await _send(master.port, BAD)).startswith(b"HTTP/1.0 400")
    lines = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert len(lines) == 3 and flt.logged - before_logged == 3 and flt.suppressed - before_suppressed == 27
    assert all(r.exc_info is None and r.levelno == logging.WARNING for r in lines)
    assert lines[0].getMessage().startswith("malformed request from 127.0.0.1: 400 Invalid character in Content-Length")


def test_the_window_resets_and_says_what_was_left_out() -> None:
    from aiohttp.http_exceptions import BadHttpMessage

    now = [0.0]
    flt = MalformedRequestFilter(burst=1, window=10.0, clock=lambda: now[0])

    def record(client: str) -> logging.LogRecord:
        exc = BadHttpMessage("bad\nthing")
        return logging.LogRecord("aiohttp.server", logging.ERROR, __file__, 1, "Error handling request from %s",
                                 (client,), (type(exc), exc, None))

    assert flt.filter(r := record("a")) and r.getMessage() == "malformed request from a: 400 bad thing"
    assert not flt.filter(record("a")) and not flt.filter(record("a"))
    assert flt.filter(record("b"))  # per client
    now[0] = 10.0
    assert flt.filter(r := record("a")) and r.getMessage().endswith("(2 more from this client left out before)")
    # a failure that is not the client's keeps its traceback
    err = RuntimeError("bug")
    plain = logging.LogRecord("aiohttp.server", logging.ERROR, __file__, 1, "Error handling request from %s", ("a",),
                              (type(err), err, None))
    assert flt.filter(plain) and plain.exc_info is not None


async def test_clients_gone_before_their_body_came_log_a_few_lines_without_a_traceback(
    master: MasterService, caplog: pytest.LogCaptureFixture
) -> None:
    """A request head promising a body, then the connection closed (found by the fault soak's
    fuzzing: each was an ERROR with a 30-line traceback)."""
    flt = master.request_log  # one per process: earlier tests' lines from 127.0.0.1 are forgotten
    flt.burst, flt.window = 3, 3600.0
    flt._seen.clear()
    before = flt.logged + flt.suppressed
    all_seen = asyncio.Event()
    real_filter = flt.filter

    def counting_filter(record: logging.LogRecord) -> bool:
        keep = real_filter(record)
        if flt.logged + flt.suppressed - before >= 10:
            all_seen.set()
        return keep

    flt.filter = counting_filter  # type: ignore[method-assign]
    head = b"POST /api/v1/scheduler HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
    with caplog.at_level(logging.INFO, logger="aiohttp.server"):
        for _ in range(10):
            _, writer = await asyncio.open_connection("127.0.0.1", master.port)
            writer.write(head)
            await writer.drain()
            writer.close()
            await writer.wait_closed()
        try:
            await asyncio.wait_for(all_seen.wait(), 10)  # the server notices each closed connection in its own time
        finally:
            del flt.filter
    lines = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert all(r.exc_info is None and r.levelno == logging.WARNING for r in lines), [r.getMessage() for r in lines]
    assert len(lines) == 3
    assert lines[0].getMessage() == "request from 127.0.0.1 cut short: the connection closed before the request was read"
