"""Mesos executors end to end: a real pymesos scheduler, a real master and a real agent (both
in-process, loopback), and a pymesos CUSTOM executor the agent launches. The executor receives its
task over the agent's executor API and the scheduler sees TASK_RUNNING then TASK_FINISHED."""

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

import psutil
import pytest

from agent.service import AgentService
from master.service import MasterService

from ..cluster import running_cluster

HERE = Path(__file__).resolve().parent
WAIT = 60.0


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[MasterService, AgentService]]:
    agent = dict(resources="cpus:2;mem:1024;disk:1024;ports:[31000-31010]", fsync=False, executor_shutdown_grace=1.0)
    try:
        async with running_cluster(tmp_path, agent=agent) as both:
            yield both
    finally:
        # Nothing the test started may outlive it (the executor runs in its own session).
        for p in psutil.process_iter(["cmdline"]):
            with contextlib.suppress(psutil.Error):
                cmd = " ".join(p.info["cmdline"] or [])
                if str(HERE / "pymesos_executor.py") in cmd and str(tmp_path) in p.environ().get(
                    "MESOS_SANDBOX", ""
                ):
                    p.kill()


async def read_lines(stream: asyncio.StreamReader, out: list[dict[str, Any]]) -> None:
    while line := await stream.readline():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))


@pytest.mark.slow
async def test_pymesos_scheduler_runs_a_task_on_a_pymesos_executor(
    cluster: tuple[MasterService, AgentService], tmp_path: Path
) -> None:
    master, _agent = cluster
    with (tmp_path / "scheduler.stderr").open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(HERE / "pymesos_scheduler.py"),
            f"127.0.0.1:{master.port}",
            str(HERE / "pymesos_executor.py"),
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            start_new_session=True,
        )
    events: list[dict[str, Any]] = []
    try:
        assert proc.stdout is not None
        reader = asyncio.create_task(read_lines(proc.stdout, events))
        rc = await asyncio.wait_for(proc.wait(), WAIT)
        await asyncio.wait_for(reader, 5)
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    statuses = [e["status"] for e in events if "status" in e]
    detail = json.dumps(events) + "\n" + (tmp_path / "scheduler.stderr").read_text()[-3000:]
    assert rc == 0, detail
    states = [s["state"] for s in statuses if s["task_id"]["value"] == "finish-1"]
    assert "TASK_RUNNING" in states and states[-1] == "TASK_FINISHED", detail
    assert states.index("TASK_RUNNING") < states.index("TASK_FINISHED")
    finished = statuses[-1]
    assert finished["executor_id"] == {"value": "pymesos-ex"}
    assert finished["agent_id"]["value"]  # filled by the agent: pymesos acknowledges with it
    assert finished["source"] == "SOURCE_EXECUTOR"
    # The executor's framework message reached the scheduler through agent and master.
    assert any(str(e.get("message", "")).startswith("registered:") for e in events), detail
