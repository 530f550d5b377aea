"""The real agent against the real master (in-process) with an unchanged pymesos scheduler:
tasks run as processes and finish, a kill ends the sleeper, nothing is left unacknowledged."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import psutil
import pymesos  # installed by scripts/install (scripts/install-compat-clients)
import pytest

from agent.config import AgentConfig
from agent.service import AgentService
from master.service import MasterService

from ..cluster import master_config

pytestmark = pytest.mark.slow
N = 3


class Sched(pymesos.Scheduler):  # type: ignore[misc,name-defined]
    def __init__(self) -> None:
        self.launched = 0
        self.states: dict[str, list[str]] = {}
        self.finished: set[str] = set()
        self.all_done = threading.Event()
        self.sleeper_running = threading.Event()
        self.sleeper_killed = threading.Event()
        self.lock = threading.Lock()

    def resourceOffers(self, driver: Any, offers: list[Any]) -> None:
        for offer in offers:
            with self.lock:
                if self.launched > N:
                    driver.declineOffer(offer["id"], filters={"refuse_seconds": 60})
                    continue
                tasks = []
                while self.launched <= N:
                    i = self.launched
                    self.launched += 1
                    tasks.append({
                        "task_id": {"value": f"task-{i}"}, "agent_id": offer["agent_id"], "name": f"task {i}",
                        "command": {"value": "sleep 1000" if i == N else "echo hello $MESOS_TASK_ID"},
                        "resources": [
                            {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                            {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}},
                        ],
                    })
            driver.launchTasks(offer["id"], tasks, filters={"refuse_seconds": 5})

    def statusUpdate(self, driver: Any, update: Any) -> None:
        tid, state = update["task_id"]["value"], update["state"]
        self.states.setdefault(tid, []).append(state)
        if tid == f"task-{N}":
            if state == "TASK_RUNNING":
                self.sleeper_running.set()
            if state == "TASK_KILLED":
                self.sleeper_killed.set()
        elif state == "TASK_FINISHED":
            self.finished.add(tid)
            if len(self.finished) == N:
                self.all_done.set()


async def _wait(ev: threading.Event, what: str, within: float = 30.0) -> None:
    assert await asyncio.to_thread(ev.wait, within), f"timed out waiting for {what}"


async def _until(cond: Any, within: float = 10.0) -> None:
    """Poll a condition with a deadline (the agent offers no event for "all forgotten")."""
    deadline = asyncio.get_running_loop().time() + within
    while asyncio.get_running_loop().time() < deadline:
        if cond():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition never held")


async def test_pymesos_tasks_on_real_master_and_agent(tmp_path: Path) -> None:
    master = MasterService(master_config(tmp_path / "master"))
    await master.start()
    agent = AgentService(AgentConfig(master=f"127.0.0.1:{master.port}", work_dir=tmp_path / "agent",
                                     resources="cpus:2;mem:1024;disk:100", default_grace=0.5))
    await agent.start()
    sched = Sched()
    framework = {"user": "nobody", "name": "agent-test", "hostname": "localhost", "roles": ["*"],
                 "capabilities": [{"type": "MULTI_ROLE"}]}
    driver = await asyncio.to_thread(
        pymesos.MesosSchedulerDriver, sched, framework, f"127.0.0.1:{master.port}", use_addict=False
    )
    await asyncio.to_thread(driver.start)
    try:
        await _wait(sched.all_done, "N tasks finished")
        await _wait(sched.sleeper_running, "sleeper running")
        for i in range(N):
            assert sched.states[f"task-{i}"] == ["TASK_RUNNING", "TASK_FINISHED"]
            out = agent.checkpoint.sandbox(agent.tracker.active()[0].spec.framework_id, f"task-{i}") / "stdout"
            assert out.read_text() == f"hello task-{i}\n"
        (sleeper,) = agent.tracker.active()
        pid = sleeper.pid
        assert pid is not None
        await asyncio.to_thread(driver.killTask, {"value": f"task-{N}"})
        await _wait(sched.sleeper_killed, "sleeper killed")
        await _until(lambda: not agent.tracker.tasks)  # every terminal update acked -> forgotten
        assert not psutil.pid_exists(pid)  # the sleeper's wrapper (and its group) is gone
    finally:
        await asyncio.to_thread(driver.stop)
        await asyncio.to_thread(driver.join)
        await agent.stop()
        await master.stop()
