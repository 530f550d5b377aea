"""The master with a real ``agora-agent`` process: pymesos 0.3.15 launches real commands,
kills one, reconciles and tears down (the same scenario as with the in-test agent)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import aiohttp
import pytest

from master.service import MasterService

from ..agent_process import agent_process
from .test_pymesos import MesosSchedulerDriver, N, Sched, _wait  # fails clearly if pymesos is missing


@pytest.mark.slow
async def test_pymesos_with_a_real_agent(master: MasterService, tmp_path: Path) -> None:
    async with agent_process(f"127.0.0.1:{master.port}", tmp_path / "agent"):
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
        async with aiohttp.ClientSession() as s, s.get(master.url + "/state") as r:
            state = await r.json()
        done = {t["id"]: t for f in state["frameworks"] + state["completed_frameworks"] for t in f["completed_tasks"]}
        used = done["task-0"]["usage"]  # the agent's final figures, from the terminal status's labels
        assert used["cpu_seconds"] >= 0 and used["mem_peak_bytes"] > 0 and used["mem_rss_bytes"] == 0


@pytest.mark.slow
async def test_master_kill9_with_a_real_agent_keeps_task_processes(tmp_path: Path) -> None:
    """R10 with real processes: the agent reconnects to the restarted master (same address) and
    re-registers its live tasks; the framework re-subscribes; the task processes never die."""
    import socket

    import psutil

    from protocol import mesos
    from protocol.resources import Resources
    from protocol.task_states import TaskState

    from .test_native_msgpack import MsgpackScheduler
    from .test_restart import attrs_evolve_id, master_process

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ET = mesos.EventType
    work = tmp_path / "master"
    async with (
        aiohttp.ClientSession() as session,
        master_process(work, port) as (mproc, url),
        agent_process(f"127.0.0.1:{port}", tmp_path / "agent"),
    ):
        s = MsgpackScheduler(url, session)
        info = mesos.FrameworkInfo(user=os.environ.get("USER", "nobody"), name="r10", failover_timeout=300.0)
        fid = await s.subscribe(info)
        F = mesos.FrameworkID(fid)
        ev = await s.next(ET.OFFERS, within=20)
        assert ev.offers is not None
        offer = ev.offers.offers[0]
        t = mesos.TaskInfo(name="sleeper", task_id=mesos.TaskID("sleeper"),
                           resources=Resources.of(cpus=0.1, mem=32).to_mesos(),
                           command=mesos.CommandInfo(value="sleep 300"))
        op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=(t,)))
        assert await s.call(mesos.Call.make_accept(F, (offer.id,), (op,))) == 202
        while True:
            st = (await s.next(ET.UPDATE, within=20)).update.status  # type: ignore[union-attr]
            await s.call(mesos.Call.make_acknowledge(F, st))
            if st.state is TaskState.TASK_RUNNING:
                break
        sleepers = []  # this test's task processes (their cwd is the task sandbox under tmp_path)
        for p in psutil.process_iter(["cmdline", "cwd"]):
            cmd, cwd = p.info["cmdline"] or [], p.info["cwd"] or ""
            if cwd.startswith(str(tmp_path)) and "sleep 300" in " ".join(cmd):
                sleepers.append(p)
        assert sleepers
        mproc.kill()
        await mproc.wait()
        await s.close()
        async with master_process(work, port) as (_, url2):
            s2 = MsgpackScheduler(url2, session)
            assert await s2.subscribe(attrs_evolve_id(info, fid)) == fid
            got: dict[str, TaskState] = {}
            async with asyncio.timeout(30):
                while "sleeper" not in got:
                    await s2.call(mesos.Call.make_reconcile(F))
                    ev = await s2.next(ET.UPDATE, ET.HEARTBEAT, within=10)
                    if ev.update is not None:
                        got[ev.update.status.task_id.value] = ev.update.status.state
            assert got["sleeper"] is TaskState.TASK_RUNNING
            assert all(p.is_running() for p in sleepers)
            await s2.call(mesos.Call.make_teardown(F))  # the agent kills the task
            await s2.close()
            try:
                _, alive = await asyncio.to_thread(psutil.wait_procs, sleepers, 20)
                assert alive == [], "teardown did not kill the task"
            finally:
                for p in sleepers:
                    with contextlib.suppress(psutil.Error):
                        p.kill()
