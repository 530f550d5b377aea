"""Mesos task features end to end through a real pymesos scheduler (tests/integration/agent_edges/
pymesos_ops.py, a separate process), a real master and a real agent (in-process, loopback): the
fetcher (CommandInfo.uris), health checks and the DEFAULT executor (LAUNCH_GROUP without an
executor command)."""

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

from agent.config import AgentConfig
from agent.isolation import remove_agent_cgroups
from agent.service import AgentService
from master.config import MasterConfig
from master.service import MasterService

from ..agent.conftest import kill_leftovers
from ..agent.fileserver import FileServer, tgz

HERE = Path(__file__).resolve().parent
WAIT = 60.0

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


@pytest.fixture
async def files() -> AsyncIterator[FileServer]:
    s = await FileServer().start()
    yield s
    await s.stop()


async def run_pymesos(master: MasterService, spec: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    """Run pymesos_ops.py with ``spec``; its status updates, in order."""
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    with (tmp_path / "scheduler.stderr").open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(HERE / "pymesos_ops.py"), f"127.0.0.1:{master.port}", str(tmp_path / "spec.json"),
            stdout=asyncio.subprocess.PIPE, stderr=err, start_new_session=True,
        )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), WAIT)
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    statuses = [json.loads(line)["status"] for line in out.decode().splitlines() if line.startswith("{")]
    assert proc.returncode == 0, json.dumps(statuses) + (tmp_path / "scheduler.stderr").read_text()[-3000:]
    return statuses


def res(cpus: float = 0.1, mem: float = 32) -> list[dict[str, Any]]:
    return [{"name": "cpus", "type": "SCALAR", "scalar": {"value": cpus}},
            {"name": "mem", "type": "SCALAR", "scalar": {"value": mem}}]


def launch(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {"type": "LAUNCH", "launch": {"task_infos": list(tasks)}}


def of(statuses: list[dict[str, Any]], tid: str) -> list[dict[str, Any]]:
    return [s for s in statuses if s["task_id"]["value"] == tid]


async def test_fetcher_through_pymesos(cluster: Any, files: FileServer, tmp_path: Path) -> None:
    master, _agent = cluster
    files.files["app.tgz"] = tgz({"bin/hello.sh": (b"echo hello from $(cat conf)\n", 0o755)})
    files.files["conf"] = b"the-archive"
    task = {"name": "fetch", "task_id": {"value": "fetch"}, "agent_id": {"value": "AGENT_ID"}, "resources": res(),
            "command": {"value": "./bin/hello.sh", "uris": [
                {"value": files.url("/f/app.tgz"), "extract": True, "cache": True},
                {"value": files.url("/f/conf"), "extract": False},
            ]}}
    statuses = await run_pymesos(master, {"operations": [launch(task)], "wait": ["fetch"]}, tmp_path)
    states = [s["state"] for s in of(statuses, "fetch")]
    assert states == ["TASK_STARTING", "TASK_RUNNING", "TASK_FINISHED"], statuses
    assert of(statuses, "fetch")[0]["message"] == "Fetching 2 URIs into the sandbox"
    assert "(fetched 2 URIs: " in of(statuses, "fetch")[1]["message"]
    (sandbox,) = list((tmp_path / "agent").rglob("fetch/stdout"))
    assert sandbox.read_text() == "hello from the-archive\n"


async def test_health_check_through_pymesos(cluster: Any, tmp_path: Path) -> None:
    master, _agent = cluster
    task = {"name": "h", "task_id": {"value": "h"}, "agent_id": {"value": "AGENT_ID"}, "resources": res(),
            # healthy until a check has seen it so (the check leaves 'seen'), then not
            "command": {"value": "touch ok; while [ ! -f seen ]; do sleep 0.05; done; rm ok; exec sleep 30"},
            "health_check": {"type": "COMMAND", "command": {"value": "test -f ok && touch seen"}, "delay_seconds": 0,
                             "interval_seconds": 0.1, "grace_period_seconds": 30, "consecutive_failures": 2}}
    statuses = await run_pymesos(master, {"operations": [launch(task)], "wait": ["h"]}, tmp_path)
    seen = [(s["state"], s.get("healthy"), s.get("reason")) for s in of(statuses, "h")]
    assert seen == [
        ("TASK_RUNNING", None, None),
        ("TASK_RUNNING", True, "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"),
        ("TASK_RUNNING", False, "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"),
        ("TASK_RUNNING", False, "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"),
        ("TASK_KILLED", False, None),
    ], statuses
    assert all(s["container_status"]["container_id"]["value"] for s in of(statuses, "h"))


async def test_default_executor_task_group_through_pymesos(cluster: Any, tmp_path: Path) -> None:
    master, _agent = cluster
    executor = {"executor_id": {"value": "pod"}, "type": "DEFAULT", "resources": res(0.1, 32)}
    tasks = [
        {"name": n, "task_id": {"value": n}, "agent_id": {"value": "AGENT_ID"}, "resources": res(), "command": {"value": c}}
        for n, c in (("web", "exec sleep 30"), ("init", "echo ready > ready; sleep 0.3; exit 1"))
    ]
    op = {"type": "LAUNCH_GROUP", "launch_group": {"executor": executor, "task_group": {"tasks": tasks}}}
    statuses = await run_pymesos(master, {"operations": [op], "wait": ["web", "init"]}, tmp_path)
    assert [s["state"] for s in of(statuses, "init")] == ["TASK_RUNNING", "TASK_FAILED"], statuses
    web = of(statuses, "web")
    assert web[-1]["state"] == "TASK_KILLED" and [s["state"] for s in web][:-1] in ([], ["TASK_RUNNING"]), statuses
    assert web[-1]["message"] == "Killed: task 'init' of its task group ended TASK_FAILED"
    assert {s["executor_id"]["value"] for s in statuses} == {"pod"}
