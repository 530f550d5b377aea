"""mesoshttp 0.4.2, unchanged, against a real in-process master and the in-test agent: launch
(TaskInfo with ``slave_id`` and no ``agent_id``), auto-acknowledge, kill, reconcile, tear down."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import aiohttp
import pytest

from master.service import MasterService
from master.testing_agent import FakeAgent

try:
    from mesoshttp.client import MesosClient
except ImportError as e:  # pragma: no cover - a missing client is a failure, never a skip
    raise ImportError(
        "mesoshttp 0.4.2 is required for the compatibility tests: run scripts/install-compat-clients"
    ) from e

N = 3
# mesoshttp calls the deprecated Logger.warn (a client quirk, not ours)
pytestmark = pytest.mark.filterwarnings("ignore:The 'warn' method is deprecated:DeprecationWarning")


class Sched:
    def __init__(self, client: Any) -> None:
        self.client = client
        self.launched = 0
        self.lock = threading.Lock()
        self.states: dict[str, list[str]] = {}
        self.finished = threading.Event()
        self.running = threading.Event()
        self.killed = threading.Event()
        self.reconciled: dict[str, str] = {}
        self.reconcile_done = threading.Event()
        self.errors: list[str] = []

    def offers(self, offers: list[Any]) -> None:
        for offer in offers:
            with self.lock:
                if self.launched > N:
                    offer.decline()
                    continue
                tasks = []
                while self.launched <= N:
                    i = self.launched
                    self.launched += 1
                    tasks.append({
                        "name": f"task {i}",
                        "task_id": {"value": f"task-{i}"},
                        "command": {"value": "sleep 1000" if i == N else "echo hello"},
                        "resources": [
                            {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                            {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}},
                        ],
                    })
            offer.accept(tasks)

    def update(self, update: Any) -> None:
        status = update["status"]
        tid, state = status["task_id"]["value"], status["state"]
        if status.get("reason") == "REASON_RECONCILIATION":
            self.reconciled[tid] = state
            if len(self.reconciled) >= 2:
                self.reconcile_done.set()
            return
        self.states.setdefault(tid, []).append(state)
        if tid == f"task-{N}" and state == "TASK_RUNNING":
            self.running.set()
        if tid == f"task-{N}" and state == "TASK_KILLED":
            self.killed.set()
        if sum(1 for s in self.states.values() if "TASK_FINISHED" in s) == N:
            self.finished.set()

    def error(self, message: str) -> None:
        self.errors.append(message)


async def _wait(ev: threading.Event, what: str, within: float = 30.0) -> None:
    assert await asyncio.to_thread(ev.wait, within), f"timed out waiting for {what}"


@pytest.mark.slow
async def test_mesoshttp_scheduler_unchanged(master: MasterService) -> None:
    agent = FakeAgent(master.url)
    await agent.connect()
    client = MesosClient(mesos_urls=[master.url], frameworkName="mesoshttp-compat", frameworkUser="nobody",
                         max_reconnect=1)
    sched = Sched(client)
    client.on(MesosClient.OFFERS, sched.offers)
    client.on(MesosClient.UPDATE, sched.update)
    client.on(MesosClient.ERROR, sched.error)
    loop_thread = threading.Thread(target=client.register, name="mesoshttp", daemon=True)
    loop_thread.start()
    try:
        await _wait(sched.finished, "N tasks finished")
        await _wait(sched.running, "sleeper running")
        driver = client.get_driver()
        aid = agent.agent_id
        await asyncio.to_thread(driver.kill, aid, f"task-{N}")
        await _wait(sched.killed, "sleeper killed")
        await asyncio.to_thread(
            driver.reconcile, [{"task_id": {"value": "task-0"}}, {"task_id": {"value": "ghost"}, "agent_id": {"value": aid}}]
        )
        await _wait(sched.reconcile_done, "reconciliation")
        assert sched.reconciled == {"task-0": "TASK_FINISHED", "ghost": "TASK_LOST"}
        for i in range(N):
            assert sched.states[f"task-{i}"] == ["TASK_STARTING", "TASK_RUNNING", "TASK_FINISHED"]
        assert all(not t.pending for t in agent.tasks.values())  # every update acknowledged
    finally:
        client.tearDown()  # TEARDOWN goes out when the next heartbeat arrives
        await asyncio.to_thread(loop_thread.join, 20)
        await agent.close()
    assert not loop_thread.is_alive()
    assert sched.errors == []
    async with aiohttp.ClientSession() as s, s.get(master.url + "/state") as r:
        state = await r.json()
    assert state["frameworks"] == [] and len(state["completed_frameworks"]) == 1
    assert master.state.calls.get("TEARDOWN") == 1
