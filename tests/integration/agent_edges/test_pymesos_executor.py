"""A real pymesos MesosExecutorDriver against ExecutorAPI on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from agent.executor_api import ExecutorAPI, executor_environment
from protocol.mesos import (
    AgentID,
    AgentInfo,
    CommandInfo,
    ExecutorID,
    ExecutorInfo,
    ExecutorType,
    FrameworkID,
    FrameworkInfo,
    Source,
    TaskID,
    TaskInfo,
    TaskStatus,
)
from protocol.task_states import TaskState

HERE = Path(__file__).resolve().parent
FW, EX = "fw-0000", "ex-1"
WAIT = 30.0


@attrs.define
class FakeHost:
    updates: asyncio.Queue[TaskStatus] = attrs.field(factory=asyncio.Queue)
    messages: asyncio.Queue[bytes] = attrs.field(factory=asyncio.Queue)
    subscribed: asyncio.Event = attrs.field(factory=asyncio.Event)
    disconnected: asyncio.Event = attrs.field(factory=asyncio.Event)
    log: list[str] = attrs.field(factory=list)

    def on_executor_update(self, framework_id: str, executor_id: str, status: TaskStatus) -> None:
        assert (framework_id, executor_id) == (FW, EX)
        self.updates.put_nowait(status)

    def on_executor_message(self, framework_id: str, executor_id: str, data: bytes) -> None:
        assert (framework_id, executor_id) == (FW, EX)
        self.messages.put_nowait(data)

    def on_executor_subscribed(self, framework_id: str, executor_id: str) -> None:
        self.log.append("subscribed")
        self.subscribed.set()

    def on_executor_disconnected(self, framework_id: str, executor_id: str) -> None:
        self.log.append("disconnected")
        self.disconnected.set()

    async def update(self) -> TaskStatus:
        return await asyncio.wait_for(self.updates.get(), WAIT)

    async def message(self) -> str:
        return (await asyncio.wait_for(self.messages.get(), WAIT)).decode()


@attrs.define
class Rig:
    host: FakeHost
    api: ExecutorAPI
    server: TestServer
    proc: asyncio.subprocess.Process | None = None

    async def restart_agent(self) -> None:
        """Stop the API and its server, then serve a fresh API on the same port (an agent restart)."""
        port = self.server.port
        # Stop listening first, as a dying process would: the executor's reconnect is refused
        # (and backs off) instead of racing into the old server while it shuts down.
        assert self.server.runner is not None
        for site in list(self.server.runner.sites):
            await site.stop()
        await self.api.close()
        await self.server.close()
        self.api = ExecutorAPI(self.host, lambda: AGENT, heartbeat_interval=0.5)
        app = web.Application()
        app.add_routes(self.api.routes())
        self.server = TestServer(app, host="127.0.0.1", port=port)
        await self.server.start_server()


AGENT = AgentInfo(hostname="127.0.0.1", port=0, id=AgentID("agent-S0"))


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    host = FakeHost()
    api = ExecutorAPI(host, lambda: AGENT, heartbeat_interval=0.5)
    app = web.Application()
    app.add_routes(api.routes())
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    r = Rig(host, api, server)
    try:
        yield r
    finally:
        await r.api.close()
        await r.server.close()
        if r.proc is not None and r.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(r.proc.pid, signal.SIGKILL)
            await r.proc.wait()


def task(name: str) -> TaskInfo:
    return TaskInfo(name=name, task_id=TaskID(name), agent_id=AGENT.id)


def register(api: ExecutorAPI) -> None:
    fw_info = FrameworkInfo(user="tester", name="compat", id=FrameworkID(FW))
    ex_info = ExecutorInfo(
        executor_id=ExecutorID(EX),
        type=ExecutorType.CUSTOM,
        command=CommandInfo(value=f"{sys.executable} pymesos_executor.py"),
    )
    api.register_executor(fw_info, ex_info)


async def start_executor(r: Rig, tmp_path: Path, checkpoint: bool = False) -> None:
    register(r.api)
    env = dict(os.environ)
    env.pop("MESOS_LOCAL", None)
    env.update(
        executor_environment(
            FW,
            EX,
            "agent-S0",
            str(tmp_path),
            f"127.0.0.1:{r.server.port}",
            checkpoint,
            shutdown_grace_seconds=2.0,
        )
    )
    if not checkpoint:
        assert "MESOS_CHECKPOINT" not in env  # never "0": pymesos would read it as true
    # Own session and process group: pymesos kills its whole group after SHUTDOWN.
    with (tmp_path / "executor.stderr").open("wb") as stderr:
        r.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(HERE / "pymesos_executor.py"),
            env=env,
            cwd=str(tmp_path),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )


async def test_pymesos_executor_full_lifecycle(rig: Rig, tmp_path: Path) -> None:
    host, api = rig.host, rig.api
    # A task queued before the executor process exists is delivered after SUBSCRIBED.
    await start_executor(rig, tmp_path)
    await api.launch(FW, EX, task("finish-1"))
    await asyncio.wait_for(host.subscribed.wait(), WAIT)
    assert api.subscribed(FW, EX)
    assert await host.message() == "registered:127.0.0.1:compat"

    running = await host.update()
    assert running.task_id == TaskID("finish-1") and running.state is TaskState.TASK_RUNNING
    # The agent filled what pymesos leaves out.
    assert running.executor_id == ExecutorID(EX) and running.agent_id == AgentID("agent-S0")
    assert running.source is Source.SOURCE_EXECUTOR
    assert running.uuid is not None and len(running.uuid) == 16 and running.timestamp is not None
    finished = await host.update()
    assert finished.state is TaskState.TASK_FINISHED and finished.uuid != running.uuid

    for st in (running, finished):
        assert st.uuid is not None
        await api.acknowledged(FW, EX, "finish-1", st.uuid)
        assert await host.message() == f"acked:finish-1:{st.uuid.hex()}"

    # MESSAGE both ways.
    await api.message(FW, EX, b"ping")
    assert await host.message() == "echo:ping"

    # LAUNCH_GROUP.
    await api.launch_group(FW, EX, [task("g-a"), task("g-b")])
    group = [await host.update() for _ in range(4)]
    assert [(s.task_id.value, s.state) for s in group] == [
        ("g-a", TaskState.TASK_RUNNING),
        ("g-b", TaskState.TASK_RUNNING),
        ("g-a", TaskState.TASK_FINISHED),
        ("g-b", TaskState.TASK_FINISHED),
    ]

    # KILL.
    await api.launch(FW, EX, task("long-1"))
    assert (await host.update()).state is TaskState.TASK_RUNNING
    await api.kill(FW, EX, "long-1", grace_seconds=1.0)
    killed = await host.update()
    assert killed.task_id == TaskID("long-1") and killed.state is TaskState.TASK_KILLED

    # SHUTDOWN: the executor hears it, stops its driver and its process exits.
    await api.shutdown(FW, EX)
    assert await host.message() == "shutdown"
    assert rig.proc is not None
    assert await asyncio.wait_for(rig.proc.wait(), WAIT) == 0
    await asyncio.wait_for(host.disconnected.wait(), WAIT)
    assert not api.subscribed(FW, EX)
    assert host.log == ["subscribed", "disconnected"]
    assert host.updates.empty()


async def test_checkpointing_executor_resubscribes_after_agent_restart(rig: Rig, tmp_path: Path) -> None:
    host = rig.host
    await start_executor(rig, tmp_path, checkpoint=True)
    await rig.api.launch(FW, EX, task("long-1"))
    await asyncio.wait_for(host.subscribed.wait(), WAIT)
    assert (await host.message()).startswith("registered:")
    running = await host.update()
    assert running.state is TaskState.TASK_RUNNING  # not acknowledged: pymesos still lists it

    host.subscribed.clear()
    await rig.restart_agent()
    register(rig.api)
    # The recovered agent queues long-1 again (it does not know the executor has it) and a new task.
    await rig.api.launch(FW, EX, task("long-1"))
    await rig.api.launch(FW, EX, task("finish-2"))
    await asyncio.wait_for(host.subscribed.wait(), WAIT)
    assert await host.message() == "reregistered:agent-S0"
    # Only finish-2 is delivered: a second LAUNCH of long-1 would crash pymesos (assert).
    got = [(s.task_id.value, s.state) for s in [await host.update(), await host.update()]]
    assert got == [("finish-2", TaskState.TASK_RUNNING), ("finish-2", TaskState.TASK_FINISHED)]
    await rig.api.kill(FW, EX, "long-1", grace_seconds=None)
    killed = await host.update()
    assert (killed.task_id.value, killed.state) == ("long-1", TaskState.TASK_KILLED)

    await rig.api.shutdown(FW, EX)
    assert await host.message() == "shutdown"
    assert rig.proc is not None
    assert await asyncio.wait_for(rig.proc.wait(), WAIT) == 0
