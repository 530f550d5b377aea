"""Oversubscription end to end on loopback: a real agent with ``--resource-estimator fixed
--oversubscribed cpus:4``, a real master and two unchanged pymesos schedulers. The one with
REVOCABLE_RESOURCES is offered the 4 revocable cpus and runs a task on one of them; the one
without the capability never sees a revocable resource."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.service import AgentService
from master.service import MasterService

from ..cluster import running_cluster

HERE = Path(__file__).resolve().parent
WAIT = 60.0


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[MasterService, AgentService]]:
    agent = dict(
        resources="cpus:2;mem:512;disk:256;ports:[31000-31010]",
        resource_estimator="fixed",
        oversubscribed="cpus:4",
        estimate_interval=0.1,
        fsync=False,
    )
    async with running_cluster(tmp_path, agent=agent) as both:
        yield both


class Scheduler:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[dict[str, Any]] = []
        self.changed = asyncio.Event()
        assert proc.stdout is not None
        self.reader = asyncio.create_task(self._read(proc.stdout))

    @classmethod
    async def start(cls, master: MasterService, name: str, tmp_path: Path, *flags: str) -> Scheduler:
        with (tmp_path / f"{name}.stderr").open("wb") as err:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                str(HERE / "pymesos_offers.py"),
                f"127.0.0.1:{master.port}",
                name,
                *flags,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
                start_new_session=True,
            )
        return cls(proc)

    async def _read(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            with contextlib.suppress(ValueError):
                self.lines.append(json.loads(line))
                self.changed.set()

    async def wait_for(self, pred: Any) -> None:
        async def loop() -> None:
            while not pred():
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(loop(), WAIT)

    @property
    def offers(self) -> list[dict[str, Any]]:
        return [x["offer"] for x in self.lines if "offer" in x]

    @property
    def states(self) -> list[str]:
        return [x["status"]["state"] for x in self.lines if "status" in x]

    async def stop(self) -> int:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            return await asyncio.wait_for(self.proc.wait(), WAIT)
        finally:
            if self.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                await self.proc.wait()
            await self.reader


def revocable(offer: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in offer.get("resources", []) if "revocable" in r]


@pytest.mark.slow
async def test_fixed_estimator_offers_revocable_only_to_capable_frameworks(
    cluster: tuple[MasterService, AgentService], tmp_path: Path
) -> None:
    master, _ = cluster
    plain = await Scheduler.start(master, "plain", tmp_path)
    rev: Scheduler | None = None
    try:
        await plain.wait_for(lambda: len(plain.offers) >= 1)
        rev = await Scheduler.start(master, "rev", tmp_path, "--revocable")
        await rev.wait_for(lambda: any(revocable(o) for o in rev.offers))
        first = next(o for o in rev.offers if revocable(o))
        assert [(r["name"], r["scalar"]["value"]) for r in revocable(first)] == [("cpus", 4)]
        await rev.wait_for(lambda: "TASK_KILLED" in rev.states)
        assert rev.states[0] == "TASK_RUNNING", rev.lines
        assert await rev.stop() == 0
        # `plain` kept receiving offers meanwhile, never with a revocable resource.
        n = len(plain.offers)
        await plain.wait_for(lambda: len(plain.offers) > n)
        assert plain.offers and not any(revocable(o) for o in plain.offers)
    finally:
        if rev is not None and rev.proc.returncode is None:
            await rev.stop()
        await plain.stop()
