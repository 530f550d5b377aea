"""R10/R11: ``kill -9`` the master (a real ``agora-master`` process) with running tasks, restart it
on the same registry: the agent re-registers with the same id, the framework re-subscribes with
its id, reconciliation gives no answer about unknown tasks during the re-registration window and
the right states after it, nothing is killed and new offers work."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from master.testing_agent import FakeAgent
from protocol import codec, mesos
from protocol.resources import Resources
from protocol.task_states import TaskState

from .test_native_msgpack import MsgpackScheduler

ET = mesos.EventType


@contextlib.asynccontextmanager
async def master_process(work: Path, port: int = 0) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "master.main", "--ip", "127.0.0.1", "--port", str(port), "--work-dir", str(work),
        "--heartbeat-interval", "0.5", "--ping-interval", "0.5", "--ping-timeout", "10",
        "--agent-reregister-timeout", "30", "--log-level", "WARNING",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
        assert line.startswith("agora-master listening on http://127.0.0.1:"), line
        yield proc, line.split()[-1]
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def _collect_updates(s: MsgpackScheduler, heartbeats: int) -> list[mesos.TaskStatus]:
    """Updates seen before ``heartbeats`` further heartbeats (events are ordered on the stream)."""
    out: list[mesos.TaskStatus] = []
    seen = 0
    while seen < heartbeats:
        ev = await s.next(ET.UPDATE, ET.HEARTBEAT)
        if ev.type is ET.HEARTBEAT:
            seen += 1
        elif ev.update is not None:
            out.append(ev.update.status)
    return out


@pytest.mark.slow
async def test_kill9_restart_keeps_tasks_and_reconciles(tmp_path: Path) -> None:
    work = tmp_path / "master"
    agent: FakeAgent | None = None
    async with aiohttp.ClientSession() as session:
        async with master_process(work) as (proc, url):
            agent = FakeAgent(url, "cpus:2;mem:1024")
            aid = await agent.connect()
            s = MsgpackScheduler(url, session)
            info = mesos.FrameworkInfo(
                user="nobody", name="restart", roles=("*",), failover_timeout=120.0,
                capabilities=(mesos.Capability(mesos.CapabilityType.MULTI_ROLE),
                              mesos.Capability(mesos.CapabilityType.PARTITION_AWARE)),
            )
            fid = await s.subscribe(info)
            F = mesos.FrameworkID(fid)
            (offer,) = (await s.next(ET.OFFERS)).offers.offers  # type: ignore[union-attr]
            tasks = tuple(
                mesos.TaskInfo(name=t, task_id=mesos.TaskID(t), resources=Resources.of(cpus=0.5, mem=128).to_mesos(),
                               command=mesos.CommandInfo(value="sleep 1000"))
                for t in ("r1", "r2")
            )
            op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=tasks))
            assert await s.call(mesos.Call.make_accept(F, (offer.id,), (op,))) == 202
            running: set[str] = set()
            while len(running) < 2:
                st = (await s.next(ET.UPDATE)).update.status  # type: ignore[union-attr]
                await s.call(mesos.Call.make_acknowledge(F, st))
                if st.state is TaskState.TASK_RUNNING:
                    running.add(st.task_id.value)
            await agent.wait_for(lambda: all(not t.pending for t in agent.tasks.values()))
            proc.kill()  # kill -9
            await proc.wait()
            await s.close()
            await agent.disconnect()

        async with master_process(work) as (proc, url):
            # the framework comes back first: same id, window open, agent not yet back
            s2 = MsgpackScheduler(url, session)
            assert await s2.subscribe(attrs_evolve_id(info, fid)) == fid
            F = mesos.FrameworkID(fid)
            assert await s2.call(mesos.Call.make_reconcile(F, (mesos.ReconcileTask(mesos.TaskID("r1")),))) == 202
            assert await _collect_updates(s2, 2) == []  # no answer during the window (R11)
            # the agent re-registers with the same id and its tasks
            agent.master_url = url
            assert await agent.connect() == aid
            assert await s2.call(mesos.Call.make_reconcile(F)) == 202
            states: dict[str, TaskState] = {}
            while len(states) < 2:
                ev = await s2.next(ET.UPDATE)
                assert ev.update is not None
                st = ev.update.status
                states[st.task_id.value] = st.state
            assert states == {"r1": TaskState.TASK_RUNNING, "r2": TaskState.TASK_RUNNING}
            # nothing was killed; the allocator's totals are rebuilt; new offers work
            assert not any(m.type.value == "KILL_TASK" or m.type.value == "SHUTDOWN_FRAMEWORK" for m in agent.received)
            assert {agent.state_of(fid, t) for t in ("r1", "r2")} == {TaskState.TASK_RUNNING}
            async with session.get(url + "/metrics/snapshot") as r:
                snap = await r.json()
            assert snap["master/cpus_used"] == 1.0 and snap["master/tasks_running"] == 2
            ev = await s2.next(ET.OFFERS)
            assert ev.offers is not None
            offered = Resources.sum(Resources.from_mesos(o.resources) for o in ev.offers.offers)
            assert offered.scalar("cpus") == 1.0
            async with session.get(url + "/state") as r:
                state = await r.json()
            assert state["slaves"][0]["id"] == aid and state["frameworks"][0]["id"] == fid
            # every re-registered task has a status (tools read the state from the last one)
            async with session.get(url + "/tasks") as r:
                now_tasks = (await r.json())["tasks"]
            assert {t["id"]: t["statuses"][-1]["state"] for t in now_tasks} == {"r1": "TASK_RUNNING", "r2": "TASK_RUNNING"}
            await s2.close()
    if agent is not None:
        await agent.close()


def attrs_evolve_id(info: mesos.FrameworkInfo, fid: str) -> mesos.FrameworkInfo:
    import attrs

    return attrs.evolve(info, id=mesos.FrameworkID(fid))


def test_codec_roundtrip_of_framework_info() -> None:
    info = mesos.FrameworkInfo(user="u", name="n", failover_timeout=5.0)
    assert codec.decode_msgpack(mesos.FrameworkInfo, codec.encode_msgpack(info)) == info


async def test_failed_registry_write_stops_the_master_before_it_acts(tmp_path: Path) -> None:
    import sqlite3 as _sqlite3

    from master.service import MasterService

    from ..cluster import master_config

    svc = MasterService(master_config(tmp_path / "m"))
    await svc.start()
    try:
        assert svc.registry is not None

        def broken(batch: object) -> None:
            raise _sqlite3.OperationalError("disk I/O error")

        svc.registry._write = broken  # type: ignore[method-assign]
        agent = FakeAgent(svc.url)
        connecting = asyncio.ensure_future(agent.connect())
        try:
            await asyncio.wait_for(svc.wait_stopped(), 5)  # AgentAdmitted cannot be written: stop
            with pytest.raises(Exception):  # noqa: B017 - the agent only sees its socket close
                await asyncio.wait_for(connecting, 5)
        finally:
            connecting.cancel()
            await agent.close()
        assert svc.failed is not None and "registry write failed" in str(svc.failed)
        assert agent.agent_id is None  # the master never acted on the unrecorded admission
    finally:
        await svc.stop()


async def test_agora_master_config_file_and_flags(tmp_path: Path) -> None:
    """``--config FILE.toml`` is read and flags override it; the bound address is printed."""
    cfg = tmp_path / "master.toml"
    cfg.write_text(f'[master]\nport = 1\nheartbeat-interval = 0.7\nwork-dir = "{tmp_path / "from-toml"}"\n')
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "master.main", "--config", str(cfg), "--port", "0", "--log-level", "WARNING",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
        assert line.startswith("agora-master listening on http://127.0.0.1:")
        url = line.split()[-1]
        assert not url.endswith(":1")
        async with aiohttp.ClientSession() as s, s.get(url + "/state") as r:
            flags = (await r.json())["flags"]
        assert flags["heartbeat_interval"] == "0.7" and flags["work_dir"] == str(tmp_path / "from-toml")
        assert (tmp_path / "from-toml" / "registry.sqlite3").exists()
    finally:
        proc.terminate()  # SIGTERM: a clean stop
        assert await asyncio.wait_for(proc.wait(), 10) == 0
