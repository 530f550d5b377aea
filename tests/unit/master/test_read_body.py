"""``master.http_api.read_body``: a body that already arrived whole is taken from the buffer
(no timer); limits hold on both paths."""

from __future__ import annotations

import asyncio
from unittest import mock

import pytest
from aiohttp import streams
from aiohttp.test_utils import make_mocked_request

from master.http_api import BodyTooLarge, read_body


def _request(body: bytes, *, eof: bool, declared: int | None = None) -> tuple[object, streams.StreamReader]:
    proto = mock.Mock(_reading_paused=False)
    reader = streams.StreamReader(proto, 2**16, loop=asyncio.get_running_loop())
    if body:
        reader.feed_data(body)
    if eof:
        reader.feed_eof()
    headers = {"Content-Length": str(len(body) if declared is None else declared)}
    return make_mocked_request("POST", "/api/v1/scheduler", headers=headers, payload=reader), reader


async def test_whole_body_from_the_buffer() -> None:
    req, _ = _request(b"abc" * 10, eof=True)
    assert await read_body(req, 100, 5.0) == b"abc" * 10  # type: ignore[arg-type]


async def test_empty_body() -> None:
    req, _ = _request(b"", eof=True)
    assert await read_body(req, 100, 5.0) == b""  # type: ignore[arg-type]


async def test_limits_on_the_fast_path() -> None:
    req, _ = _request(b"x" * 50, eof=True)
    with pytest.raises(BodyTooLarge):
        await read_body(req, 10, 5.0)  # type: ignore[arg-type]
    req, _ = _request(b"x" * 50, eof=True, declared=5)
    with pytest.raises(BodyTooLarge):
        await read_body(req, 10, 5.0)  # type: ignore[arg-type]


async def test_streaming_body_waits_for_the_rest() -> None:
    req, reader = _request(b"ab", eof=False, declared=4)
    task = asyncio.ensure_future(read_body(req, 100, 5.0))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert not task.done()
    reader.feed_data(b"cd")
    reader.feed_eof()
    assert await asyncio.wait_for(task, 5.0) == b"abcd"
