"""``frameworks/batch/tails.py``: the ends of one tick's attempts fetched with one ``/files/tails``
request per agent, and per attempt from an agent that does not serve it (a real HTTP server on
loopback stands for the agents)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from frameworks.batch.logtail import KeptTail
from frameworks.batch.tails import TailKeeper, TailPorts


@pytest.fixture
async def agents() -> AsyncIterator[tuple[str, list[list[tuple[str, str]]]]]:
    """``/new/files/tails`` answers every asked task's stdout; ``/old/...`` is an older agent (404)."""
    asked: list[list[tuple[str, str]]] = []

    async def new(request: web.Request) -> web.Response:
        asked.append(list(request.query.items()))
        return web.json_response({t: {"stdout": {"offset": 90, "data": f"end of {t}"}, "stderr": {"offset": 0, "data": ""}}
                                  for t in request.query.getall("task") if t != "silent"})

    app = web.Application()
    app.router.add_get("/new/files/tails", new)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", asked
    finally:
        await runner.cleanup()


async def test_one_request_per_agent_and_tick_and_per_attempt_where_not_served(
    agents: tuple[str, list[list[tuple[str, str]]]],
) -> None:
    base, asked = agents
    saved: dict[str, tuple[int, Mapping[str, KeptTail]]] = {}
    singles: list[tuple[int, str, str]] = []
    tasks: list[asyncio.Task[Any]] = []

    async def save(job: int, task: str, tails: Mapping[str, KeptTail]) -> None:
        saved[task] = (job, tails)

    async def one_by_one(job: int, task: str, agent: str) -> None:
        singles.append((job, task, agent))

    async with aiohttp.ClientSession() as http:
        keeper = TailKeeper(TailPorts(
            log_tail=lambda: 4,
            agent_url=lambda a: f"{base}/{a}" if a in ("new", "old") else None,
            framework=lambda: "fw",
            http=lambda: (http, {}),
            save=save,
            spawn=lambda coro, name: tasks.append(asyncio.get_running_loop().create_task(coro, name=name)),
            one_by_one=one_by_one,
        ), asyncio.Semaphore(4), delay=0.0)
        for job, task in ((1, "a"), (1, "b"), (2, "silent")):
            keeper.add(job, task, "new")
        keeper.add(3, "c", "old")
        keeper.add(3, "d", "old")
        while tasks:
            await tasks.pop(0)
        keeper.add(4, "e", "old")  # known now not to serve it: straight to the per-attempt copy
        while tasks:
            await tasks.pop(0)

    assert asked == [[("path", "fw"), ("task", "a"), ("task", "b"), ("task", "silent"), ("length", "4")]]
    assert keeper.requests == 2  # one to each agent
    # the last 4 bytes kept (offsets moved with them); empty streams and silent tasks not saved
    assert saved == {"a": (1, {"stdout": KeptTail(94, b"of a")}), "b": (1, {"stdout": KeptTail(94, b"of b")})}
    assert singles == [(3, "c", "old"), (3, "d", "old"), (4, "e", "old")]
