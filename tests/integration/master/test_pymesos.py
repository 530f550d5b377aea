"""pymesos 0.3.15, unchanged, against a real in-process master and the in-test agent: launch N
tasks, implicit acknowledgements, kill one, reconcile, tear down."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import aiohttp
import pytest

from master.service import MasterService
from master.testing_agent import FakeAgent
from protocol.task_states import TaskState

try:
    from pymesos import MesosSchedulerDriver, Scheduler, encode_data
except ImportError as e:  # pragma: no cover - a missing client is a failure, never a skip
    raise ImportError(
        "pymesos 0.3.15 is required for the compatibility tests: run scripts/install-compat-clients"
    ) from e

N = 3


class Sched(Scheduler):
    def __init__(self) -> None:
        self.launched = 0
        self.finished: set[str] = set()
        self.states: dict[str, list[str]] = {}
        self.all_done = threading.Event()
        self.sleeper_running = threading.Event()
        self.sleeper_killed = threading.Event()
        self.reconciled: dict[str, str] = {}
        self.reconcile_done = threading.Event()
        self.registered_id: str | None = None
        self.errors: list[str] = []
        self.lock = threading.Lock()

    def registered(self, driver: Any, framework_id: Any, master_info: Any) -> None:
        self.registered_id = framework_id["value"]

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
                        "task_id": {"value": f"task-{i}"},
                        "agent_id": offer["agent_id"],
                        "name": f"task {i}",
                        "command": {"value": "sleep 1000" if i == N else "echo hello"},
                        "data": encode_data(b"payload"),
                        "resources": [
                            {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                            {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}},
                        ],
                    })
            driver.launchTasks(offer["id"], tasks, filters={"refuse_seconds": 5})

    def statusUpdate(self, driver: Any, update: Any) -> None:
        tid = update["task_id"]["value"]
        state = update["state"]
        if update.get("reason") == "REASON_RECONCILIATION":
            self.reconciled[tid] = state
            if len(self.reconciled) >= 2:
                self.reconcile_done.set()
            return
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

    def error(self, driver: Any, message: str) -> None:
        self.errors.append(message)


async def _wait(ev: threading.Event, what: str, within: float = 30.0) -> None:
    ok = await asyncio.to_thread(ev.wait, within)
    assert ok, f"timed out waiting for {what}"


@pytest.mark.slow
async def test_pymesos_scheduler_unchanged(master: MasterService) -> None:
    agent = FakeAgent(master.url)
    await agent.connect()
    sched = Sched()
    framework = {
        "user": "nobody", "name": "compat-test", "hostname": "localhost",
        "roles": ["*"], "capabilities": [{"type": "MULTI_ROLE"}],
    }
    driver = MesosSchedulerDriver(sched, framework, f"127.0.0.1:{master.port}", use_addict=False)
    await asyncio.to_thread(driver.start)  # blocking HTTP: never on the loop thread
    try:
        await _wait(sched.all_done, "N tasks finished")
        await _wait(sched.sleeper_running, "sleeper running")
        fid = sched.registered_id
        assert fid is not None
        for i in range(N):
            assert sched.states[f"task-{i}"] == ["TASK_STARTING", "TASK_RUNNING", "TASK_FINISHED"]
        await asyncio.to_thread(driver.killTask, {"value": f"task-{N}"})
        await _wait(sched.sleeper_killed, "sleeper killed")
        await asyncio.to_thread(
            driver.reconcileTasks, [{"task_id": {"value": "task-0"}}, {"task_id": {"value": "ghost"}}]
        )
        await _wait(sched.reconcile_done, "reconciliation answers")
        assert sched.reconciled == {"task-0": "TASK_FINISHED", "ghost": "TASK_LOST"}
        # every update was acknowledged: the agent holds nothing unacknowledged
        assert all(not t.pending for t in agent.tasks.values())
        assert agent.launches == N + 1
    finally:
        await asyncio.to_thread(driver.stop)  # TEARDOWN
        await asyncio.to_thread(driver.join)
        await agent.close()
    assert sched.errors == []
    async with aiohttp.ClientSession() as s:
        async with s.get(master.url + "/state") as r:
            state = await r.json()
        async with s.get(master.url + "/metrics/snapshot") as r:
            snap = await r.json()
    assert state["frameworks"] == []
    (done,) = state["completed_frameworks"]
    assert done["id"] == fid
    finished = [t for t in done["completed_tasks"] if t["state"] == "TASK_FINISHED"]
    assert len(finished) == N
    assert snap["master/tasks_finished"] == N
    assert master.state.calls.get("SUBSCRIBE") == 1 and master.state.calls.get("TEARDOWN") == 1
    assert master.state.calls.get("ACKNOWLEDGE", 0) >= 3 * N


class ReSched(Sched):
    def __init__(self) -> None:
        super().__init__()
        self.reregistered_event = threading.Event()

    def reregistered(self, driver: Any, master_info: Any) -> None:
        self.reregistered_event.set()


@pytest.mark.slow
async def test_pymesos_reregisters_when_the_master_closes_its_stream(master: MasterService) -> None:
    """The master ends the stream mid-run; pymesos re-subscribes with its
    framework id at once and its running task is untouched."""
    agent = FakeAgent(master.url)
    await agent.connect()
    sched = ReSched()
    framework = {"user": "nobody", "name": "resub", "failover_timeout": 60}
    driver = MesosSchedulerDriver(sched, framework, f"127.0.0.1:{master.port}", use_addict=False)
    await asyncio.to_thread(driver.start)
    try:
        await _wait(sched.sleeper_running, "sleeper running")
        fid = sched.registered_id
        assert fid is not None
        old_stream = master.state.frameworks[fid].stream_id
        assert old_stream is not None
        master.scheduler_api.close(old_stream, "test: stream closed by the master")
        await _wait(sched.reregistered_event, "re-registration")
        fw = master.state.frameworks[fid]
        assert fw.connected and fw.stream_id != old_stream
        assert agent.state_of(fid, f"task-{N}") is TaskState.TASK_RUNNING
        assert not any(m.type.value == "KILL_TASK" for m in agent.received)
    finally:
        await asyncio.to_thread(driver.stop)
        await asyncio.to_thread(driver.join)
        await agent.close()
    assert sched.errors == []
