"""Stopping the master while facts are on their way through the effects pipeline: whoever waits
in ``dispatch`` (a request handler, an agent connection) is released, never left waiting forever.

A handler left waiting is a task nobody cancels when its client already went away (aiohttp only
cancels the handlers of connections it still tracks): it outlives the master and its event loop,
and is garbage-collected later with 'no running event loop' (seen once as a teardown error of
the web UI browser test, after its framework disconnected just before the master stopped)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from master.events import Persist
from master.registry_ops import FrameworkRemoved
from master.service import MasterService

from ..cluster import master_config


def _persist() -> list[Persist]:
    return [Persist((FrameworkRemoved("fw-1"),))]


async def test_stop_during_a_registry_write_releases_the_batch_in_flight(tmp_path: Path) -> None:
    svc = MasterService(master_config(tmp_path / "m"))
    await svc.start()
    writing, never = asyncio.Event(), asyncio.Event()

    async def apply(ops: object) -> None:  # a write that is still on its way when the master stops
        writing.set()
        await never.wait()

    assert svc.registry is not None
    svc.registry.apply = apply  # type: ignore[method-assign]
    svc.state.handle = lambda event, now: _persist()  # type: ignore[method-assign]
    waiter = asyncio.create_task(svc.dispatch(object()))  # type: ignore[arg-type]
    await asyncio.wait_for(writing.wait(), 10)
    await asyncio.wait_for(svc.stop(), 10)
    await asyncio.wait_for(asyncio.gather(waiter, return_exceptions=True), 10)
    assert waiter.done()


async def test_a_fact_dispatched_while_the_master_stops_does_not_wait_forever(tmp_path: Path) -> None:
    svc = MasterService(master_config(tmp_path / "m"))
    await svc.start()
    await svc.stop()
    svc.state.handle = lambda event, now: _persist()  # type: ignore[method-assign]
    waiter = asyncio.create_task(svc.dispatch(object()))  # type: ignore[arg-type]
    await asyncio.wait_for(asyncio.gather(waiter, return_exceptions=True), 10)
    assert waiter.done()
