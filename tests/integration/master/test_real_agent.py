"""The master with a real ``agora-agent`` process: pymesos 0.3.15 launches real commands,
kills one, reconciles and tears down (the same scenario as with the in-test agent)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from pymesos import MesosSchedulerDriver

from master.service import MasterService

from .test_pymesos import N, Sched, _wait


@contextlib.asynccontextmanager
async def agent_process(master: MasterService, work: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agent.main", "--master", f"127.0.0.1:{master.port}", "--work-dir", str(work),
        "--resources", "cpus:2;mem:1024;disk:1000", "--isolation", "psutil", "--log-level", "WARNING",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith("agora-agent listening on"), line
        yield proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()


@pytest.mark.slow
async def test_pymesos_with_a_real_agent(master: MasterService, tmp_path: Path) -> None:
    async with agent_process(master, tmp_path / "agent"):
        await master.wait_until(lambda: any(a.conn_id is not None for a in master.state.agents.values()), 20)
        sched = Sched()
        framework = {"user": os.environ.get("USER", "nobody"), "name": "real-agent", "hostname": "localhost"}
        driver = MesosSchedulerDriver(sched, framework, f"127.0.0.1:{master.port}", use_addict=False)
        await asyncio.to_thread(driver.start)
        try:
            await _wait(sched.all_done, "N real tasks finished", 60)
            await _wait(sched.sleeper_running, "sleeper running", 30)
            for i in range(N):
                assert sched.states[f"task-{i}"][-1] == "TASK_FINISHED"
                assert "TASK_RUNNING" in sched.states[f"task-{i}"]
            await asyncio.to_thread(driver.killTask, {"value": f"task-{N}"})
            await _wait(sched.sleeper_killed, "sleeper killed", 30)
            await asyncio.to_thread(
                driver.reconcileTasks, [{"task_id": {"value": "task-0"}}, {"task_id": {"value": "ghost"}}]
            )
            await _wait(sched.reconcile_done, "reconciliation", 30)
            assert sched.reconciled == {"task-0": "TASK_FINISHED", "ghost": "TASK_LOST"}
        finally:
            await asyncio.to_thread(driver.stop)
            await asyncio.to_thread(driver.join)
        assert sched.errors == []
        async with aiohttp.ClientSession() as s, s.get(master.url + "/metrics/snapshot") as r:
            snap = await r.json()
        assert snap["master/tasks_finished"] == N and snap["master/tasks_killed"] == 1
