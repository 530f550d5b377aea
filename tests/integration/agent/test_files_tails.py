"""``GET /files/tails`` (``agent/files.py``): the ends of many sandboxes' stdout/stderr in one answer,
read as ``/files/read`` reads them (rotation, confinement), over real HTTP on loopback."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from agent import files, logrotate


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    root = tmp_path / "sandboxes"
    (root / "f1").mkdir(parents=True)
    app = web.Application()
    files.add_routes(app, root, max_read=100)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", root / "f1"
    finally:
        await runner.cleanup()


async def tails(url: str, params: list[tuple[str, str]]) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as s, s.get(f"{url}/files/tails", params=params) as r:
        return r.status, (await r.json() if r.status == 200 else await r.text())


def sandbox(fw: Path, tid: str, **streams: bytes) -> Path:
    d = fw / tid
    d.mkdir()
    for name, data in streams.items():
        (d / name).write_bytes(data)
    return d


async def test_the_ends_of_several_sandboxes_in_one_answer(served: tuple[str, Path]) -> None:
    url, fw = served
    sandbox(fw, "a", stdout=b"x" * 30 + b"the end of a\n", stderr=b"warn\n")
    sandbox(fw, "quiet", stdout=b"", stderr=b"")  # printed nothing: left out
    rot = sandbox(fw, "rotated", **{"stdout.1": b"A" * 100})  # 100 bytes rotated away, 50 current
    (rot / "stdout").write_bytes(b"B" * 50)
    (rot / logrotate.state_name("stdout")).write_bytes(logrotate.state_json(100, os.stat(rot / "stdout").st_ino))
    (fw / "other").mkdir()
    (fw / "other" / "secret").write_bytes(b"not yours")
    sandbox(fw, "escape").joinpath("stdout").symlink_to(fw / "other" / "secret")  # refused: left out

    status, body = await tails(url, [("path", "f1"), ("task", "a"), ("task", "quiet"), ("task", "rotated"),
                                     ("task", "missing"), ("task", "escape"), ("task", "a"), ("length", "20")])
    assert status == 200
    assert body == {
        "a": {"stdout": {"offset": 23, "data": "x" * 7 + "the end of a\n"}, "stderr": {"offset": 0, "data": "warn\n"}},
        "rotated": {"stdout": {"offset": 130, "data": "B" * 20}},
    }
    # across the rotation, and capped at the agent's max_read (100 bytes here)
    status, body = await tails(url, [("path", "f1"), ("task", "rotated"), ("length", "1000")])
    assert status == 200 and body == {"rotated": {"stdout": {"offset": 50, "data": "A" * 50 + "B" * 50}}}


async def test_bad_requests_are_refused(served: tuple[str, Path]) -> None:
    url, _ = served
    assert (await tails(url, [("path", "f1")]))[0] == 400  # no task
    assert (await tails(url, [("task", "a")]))[0] == 400  # no framework
    assert (await tails(url, [("path", "f1"), ("task", "../f2/a")]))[0] == 400
    assert (await tails(url, [("path", "f1/a"), ("task", "b")]))[0] == 400
    assert (await tails(url, [("path", "f1"), ("task", "..")]))[0] == 400
    status, text = await tails(url, [("path", "f1"), *(("task", f"t{i}") for i in range(files.MAX_TAILS + 1))])
    assert status == 400 and "at most 256" in text
    assert (await tails(url, [("path", "f1"), ("task", "nothing-here")])) == (200, {})
