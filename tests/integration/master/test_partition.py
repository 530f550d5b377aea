"""A partition between a real agent and the real master, healed: while the agent's link is cut
the master decides a kill, a framework teardown and a drain, and reports a non-partition-aware
framework's task LOST; when the link heals every such task's process is killed (the kills arrive
in the frame that carries REGISTERED) and each task ends with exactly one terminal update."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pytest

from agent.config import AgentConfig
from agent.service import AgentService
from frameworks.client.driver import Scheduler, SchedulerDriver
from frameworks.client.transport import HttpTransport
from master.records import AgentPhase
from master.service import MasterService
from protocol.backoff import Backoff
from protocol.mesos import (
    Capability,
    CapabilityType,
    CommandInfo,
    FrameworkInfo,
    Reason,
    TaskInfo,
    TaskStatus,
)
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState, is_terminal

from ..cluster import master_config

pytestmark = pytest.mark.slow


class Proxy:
    """A TCP relay to the master that can cut its link (every connection closed, new ones
    refused) and heal it."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.cut = False
        self.port = 0
        self._server: asyncio.Server | None = None
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> Proxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut:
            writer.close()
            return
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        pair = (writer, up_w)
        self._pairs.add(pair)
        loop = asyncio.get_running_loop()
        for src, dst in ((reader, up_w), (up_r, writer)):
            t = loop.create_task(self._pump(src, dst, pair))
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                    pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter]) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self._close(pair)

    def _close(self, pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter]) -> None:
        self._pairs.discard(pair)
        for w in pair:
            w.close()

    def partition(self) -> None:
        self.cut = True
        for pair in list(self._pairs):
            self._close(pair)

    def heal(self) -> None:
        self.cut = False

    async def stop(self) -> None:
        self.partition()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


class Recorder(Scheduler):
    def __init__(self) -> None:
        self.updates: list[TaskStatus] = []

    def update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        self.updates.append(status)

    def terminal(self, tid: str) -> list[TaskState]:
        """Terminal updates of ``tid`` (reconciliation answers restate, they are not updates)."""
        return [s.state for s in self.updates if s.task_id.value == tid and is_terminal(s.state)
                and s.reason is not Reason.REASON_RECONCILIATION]


def _driver(url: str, name: str, rec: Recorder, partition_aware: bool) -> SchedulerDriver:
    caps = [CapabilityType.MULTI_ROLE] + ([CapabilityType.PARTITION_AWARE] if partition_aware else [])
    info = FrameworkInfo(user="nobody", name=name, roles=("*",), failover_timeout=600.0,
                         capabilities=tuple(Capability(type=c) for c in caps))
    return SchedulerDriver(info, HttpTransport(url), scheduler=rec, backoff=Backoff(0.01, 0.2))


async def _launch(d: SchedulerDriver, tid: str) -> None:
    await d.wait_for(lambda: len(d.offers) > 0)
    offer = next(iter(d.offers))
    info = TaskInfo(name=tid, task_id=TaskID(tid), resources=Resources.parse("cpus:0.1;mem:16").to_mesos(),
                    command=CommandInfo(value="exec sleep 600"))
    await d.launch(offer.offer_id, [info])


async def _until(cond: Any, within: float) -> None:
    """Wait for a condition the agent and the processes give no event for (bounded)."""
    deadline = asyncio.get_running_loop().time() + within
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition never held")
        await asyncio.sleep(0.05)


async def test_decisions_taken_during_a_partition_are_carried_out_when_it_heals(tmp_path: Path) -> None:
    master = MasterService(master_config(tmp_path / "master", ping_interval=0.2, ping_timeout=1.0,
                                         agent_reregister_timeout=5.0, offer_hold_bound=0.0))
    await master.start()
    proxy = await Proxy(master.port).start()
    agent = AgentService(AgentConfig(master=f"127.0.0.1:{proxy.port}", work_dir=tmp_path / "agent",
                                     resources="cpus:4;mem:1024;disk:100", default_grace=0.3,
                                     reconnect_initial=0.05, reconnect_max=0.3))
    await agent.start()
    recs = {k: Recorder() for k in ("kill", "lost", "teardown", "drain")}
    drivers = {
        "kill": _driver(master.url, "killed-while-away", recs["kill"], partition_aware=True),
        "lost": _driver(master.url, "not-partition-aware", recs["lost"], partition_aware=False),
        "teardown": _driver(master.url, "torn-down-while-away", recs["teardown"], partition_aware=True),
        "drain": _driver(master.url, "drained-while-away", recs["drain"], partition_aware=True),
    }
    async with contextlib.AsyncExitStack() as stack:
        for d in drivers.values():
            await stack.enter_async_context(d)
            await d.wait_subscribed(30)
        try:
            for key, d in drivers.items():
                await _launch(d, f"t-{key}")
            await _until(lambda: len([t for t in agent.tracker.active() if t.state is TaskState.TASK_RUNNING]) == 4, 30)
            pids = {t.spec.task_id: t.pid for t in agent.tracker.active()}
            assert all(pids.values())
            (agent_id,) = master.state.agents

            proxy.partition()
            await master.wait_until(lambda: master.state.agents[agent_id].phase is AgentPhase.UNREACHABLE, 15)
            await drivers["lost"].wait_for(lambda: recs["lost"].terminal("t-lost") == [TaskState.TASK_LOST])
            await drivers["kill"].kill("t-kill")
            await drivers["teardown"].teardown()
            async with aiohttp.ClientSession() as http, http.post(
                master.url + "/api/v1", headers={"Content-Type": "application/json"},
                data=json.dumps({"type": "DRAIN_AGENT", "drain_agent": {"agent_id": {"value": agent_id}}}),
            ) as r:
                assert r.status == 200, await r.text()
            # the agent, cut off, still runs all four
            assert all(psutil.pid_exists(p) for p in pids.values() if p)

            proxy.heal()
            await _until(lambda: not any(psutil.pid_exists(p) for p in pids.values() if p), 30)
            await _until(lambda: not agent.tracker.active(), 10)
            # every terminal update reached the frameworks still subscribed (acknowledged: forgotten)
            await _until(lambda: not agent.tracker.tasks, 15)
            for key in ("kill", "drain"):
                await drivers[key].wait_for(lambda k=key: recs[k].terminal(f"t-{k}"), 10)
            assert recs["kill"].terminal("t-kill") == [TaskState.TASK_KILLED]
            assert recs["drain"].terminal("t-drain") == [TaskState.TASK_KILLED]
            assert recs["lost"].terminal("t-lost") == [TaskState.TASK_LOST]  # not a second one
            assert all(not is_terminal(s.state) for s in recs["teardown"].updates)  # it left first
            # the master remembers exactly one end for each
            for key in ("kill", "lost", "drain"):
                fid = drivers[key].framework_id
                assert fid is not None and f"t-{key}" not in master.state.frameworks[fid].tasks
        finally:
            await agent.stop()
            await proxy.stop()
            await master.stop()
