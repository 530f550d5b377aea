"""Mesos tools other than pymesos and mesoshttp, unchanged, against a real master and agent
(in-process, loopback): the avmesos 0.4.2 scheduler library (a health-checked task through it) and
the Apache Mesos CLI of avmesos-cli 1.0.0 (`mesos agent list`, `framework list`, `task list`,
`task inspect`). Installed by scripts/install-compat-clients; missing, these tests fail."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.config import AgentConfig
from agent.isolation import remove_agent_cgroups
from agent.service import AgentService
from master.config import MasterConfig
from master.service import MasterService

from ..agent.conftest import kill_leftovers

try:
    import avmesos.client  # noqa: F401
except ImportError as e:  # pragma: no cover - a missing client is a failure, never a skip
    raise ImportError("avmesos and avmesos-cli are required: run scripts/install-compat-clients") from e
if importlib.util.find_spec("avmesos.cli") is None:  # (not imported here: it imports the deprecated imp)
    raise ImportError("avmesos-cli is required: run scripts/install-compat-clients")

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.slow


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[MasterService, AgentService]]:
    master = MasterService(MasterConfig(ip="127.0.0.1", port=0, work_dir=str(tmp_path / "master"),
                                        heartbeat_interval=1.0, ping_interval=0.5))
    await master.start()
    agent = AgentService(AgentConfig(master=f"127.0.0.1:{master.port}", work_dir=tmp_path / "agent",
                                     resources="cpus:2;mem:1024;disk:1024;ports:[31000-31010]", fsync=False))
    await agent.start()
    try:
        yield master, agent
    finally:
        await agent.stop()
        await master.stop()
        await kill_leftovers(tmp_path)  # tasks outlive their agent by design; none may outlive the test
        await asyncio.to_thread(remove_agent_cgroups, agent.config.work_dir)


async def scheduler(master: MasterService, mode: str, tmp_path: Path) -> asyncio.subprocess.Process:
    err = (tmp_path / f"avmesos-{mode}.stderr").open("wb")
    try:
        return await asyncio.create_subprocess_exec(
            sys.executable, str(HERE / "avmesos_scheduler.py"), master.url, mode,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err, start_new_session=True,
        )
    finally:
        err.close()


async def end(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


async def mesos_cli(tmp_path: Path, *args: str) -> str:
    """``mesos ARGS`` (avmesos-cli), configured for this master in its own HOME."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "avmesos.cli.mesos-cli", *args,
        env={**os.environ, "HOME": str(tmp_path)}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    text = out.decode()
    assert proc.returncode == 0 and "Error" not in text, text
    return text


async def test_avmesos_scheduler_health_checked_task(cluster: Any, tmp_path: Path) -> None:
    master, _agent = cluster
    proc = await scheduler(master, "health", tmp_path)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        await end(proc)
    seen = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    detail = json.dumps(seen) + (tmp_path / "avmesos-health.stderr").read_text()[-2000:]
    assert proc.returncode == 0, detail
    assert [(s["state"], s["healthy"], s["reason"]) for s in seen] == [
        ("TASK_RUNNING", None, None),
        ("TASK_RUNNING", True, "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"),
        ("TASK_RUNNING", False, "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"),
        ("TASK_RUNNING", False, "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"),
        ("TASK_KILLED", False, None),
    ], detail


async def test_mesos_cli_lists_agents_frameworks_and_tasks(cluster: Any, tmp_path: Path) -> None:
    master, agent = cluster
    (tmp_path / ".mesos").mkdir()
    (tmp_path / ".mesos" / "config.toml").write_text(f'[master]\naddress = "127.0.0.1:{master.port}"\n')
    proc = await scheduler(master, "hold", tmp_path)
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(60):
            while (line := await proc.stdout.readline()) and line.strip() != b"RUNNING":
                pass
        assert line.strip() == b"RUNNING", (tmp_path / "avmesos-hold.stderr").read_text()[-2000:]
        fid = next(iter(master.state.frameworks))

        agents = (await mesos_cli(tmp_path, "agent", "list")).splitlines()
        assert agents[0].split() == ["Agent", "ID", "Hostname", "Active"]
        assert agents[1].split() == [agent.agent_id, "127.0.0.1", "True"]
        frameworks = (await mesos_cli(tmp_path, "framework", "list")).splitlines()
        assert frameworks[1].split() == [fid, "True", "avmesos-hold"]  # /master/frameworks/ (no hostname given)
        tasks = (await mesos_cli(tmp_path, "task", "list")).splitlines()  # /tasks?limit=-1&order=asc
        assert tasks[1].split() == ["held", "TASK_RUNNING", fid]
        inspected = json.loads(await mesos_cli(tmp_path, "task", "inspect", "held"))
        assert inspected["id"] == "held" and inspected["statuses"][-1]["state"] == "TASK_RUNNING"
        assert proc.stdin is not None
        proc.stdin.close()
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        await end(proc)
