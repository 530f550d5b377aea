"""A real batch service (its SQLite store, its scheduling loop; no master needed) driven by a
test clock: a periodic job's run is started once, the service restarts around it, and neither
loses nor doubles the run; runs missed while it was down fold into one."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp

from frameworks.batch.service import BatchService

NO_MASTER = "127.0.0.1:9"  # discard port: nothing listens; the driver keeps retrying quietly


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


async def runs_of(http: aiohttp.ClientSession, svc: BatchService, parent: int) -> list[dict[str, Any]]:
    jobs = (await (await http.get(f"{svc.url}/api/v1/jobs")).json())["jobs"]
    return [j for j in jobs if j.get("parent_id") == parent]


async def until_runs(http: aiohttp.ClientSession, svc: BatchService, parent: int, n: int) -> list[dict[str, Any]]:
    """Wake the service's loop (the clock moved) and wait, bounded, for ``n`` runs."""
    async with asyncio.timeout(10):
        while True:
            svc.host.poke()
            runs = await runs_of(http, svc, parent)
            if len(runs) >= n:
                return runs
            await asyncio.sleep(0.02)


async def test_a_restart_around_a_periodic_run_neither_loses_nor_doubles_it(tmp_path: Path) -> None:
    clock = Clock(1001.0)
    async with aiohttp.ClientSession() as http:
        async with BatchService(NO_MASTER, tmp_path, now=clock) as svc:
            r = await http.post(f"{svc.url}/api/v1/jobs", json={"argv": ["true"], "name": "tick", "schedule": "*/2 * * * * *"})
            assert r.status == 201
            parent = (await r.json())["id"]
            clock.t = 1002.2
            (run,) = await until_runs(http, svc, parent, 1)
            assert run["due_at"] == 1002.0
        async with BatchService(NO_MASTER, tmp_path, now=clock) as svc:  # the same moment again
            svc.host.poke()
            summary = await (await http.get(f"{svc.url}/api/v1/jobs/{parent}?summary=1")).json()
            assert summary["next_run"] == 1004.0 and summary["runs"] == 1
            assert [r["id"] for r in await runs_of(http, svc, parent)] == [run["id"]]
        clock.t = 1011.0  # down from 1002.2 to 1011: 1004..1010 were due
        async with BatchService(NO_MASTER, tmp_path, now=clock) as svc:
            runs = await until_runs(http, svc, parent, 2)
            assert [r["due_at"] for r in runs] == [1002.0, 1010.0]
            detail = await (await http.get(f"{svc.url}/api/v1/jobs/{parent}")).json()
            assert "3 run(s) missed before 1970-01-01T00:16:50Z; one run stands for them" in [
                c["what"] for c in detail["changes"]
            ]
