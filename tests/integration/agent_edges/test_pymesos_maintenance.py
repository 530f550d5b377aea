"""Mesos maintenance end to end through a real pymesos scheduler (pymesos_maintenance.py, a
separate process), a real master and a real agent (in-process, loopback): a schedule is posted to
``/maintenance/schedule``; pymesos, running a task on the agent, receives an inverse offer
(``INVERSE_OFFERS``) and accepts it, which ``/maintenance/status`` reports; its offers of the agent
carry the unavailability; ``/machine/down`` shuts the agent down (the task is killed and reported
TASK_LOST, the agent is no longer offered, and it is refused while the machine is DOWN);
``/machine/up`` lets it register again and pymesos is offered it again, without unavailability."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agent.config import AgentConfig
from agent.isolation import remove_agent_cgroups
from agent.service import AgentService
from master.config import MasterConfig
from master.service import MasterService

from ..agent.conftest import kill_leftovers

HERE = Path(__file__).resolve().parent
WAIT = 30.0
MACHINE = {"hostname": "127.0.0.1", "ip": "127.0.0.1"}  # how the test agent registers
pytestmark = pytest.mark.slow  # (~5-10 s: a pymesos process, a real agent and task)
UNAVAILABILITY = {"start": {"nanoseconds": 1_900_000_000_000_000_000}, "duration": {"nanoseconds": 3_600_000_000_000}}


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[MasterService, AgentService]]:
    master = MasterService(MasterConfig(ip="127.0.0.1", port=0, work_dir=str(tmp_path / "master"),
                                        heartbeat_interval=1.0, ping_interval=0.5))
    await master.start()
    agent = AgentService(AgentConfig(master=f"127.0.0.1:{master.port}", work_dir=tmp_path / "agent",
                                     resources="cpus:2;mem:1024;disk:1024", fsync=False, default_grace=0.5,
                                     reconnect_max=0.3))
    await agent.start()
    try:
        yield master, agent
    finally:
        await agent.stop()
        await master.stop()
        await kill_leftovers(tmp_path)
        await asyncio.to_thread(remove_agent_cgroups, agent.config.work_dir)


class Lines:
    """The scheduler's JSON lines, read as they come."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.seen: list[dict[str, Any]] = []

    async def wait(self, pred: Callable[[dict[str, Any]], bool], since: int = 0) -> dict[str, Any]:
        """The first line (from line ``since`` on) for which ``pred`` holds."""
        for line in self.seen[since:]:
            if pred(line):
                return line
        assert self.proc.stdout is not None
        async with asyncio.timeout(WAIT):
            while True:
                raw = await self.proc.stdout.readline()
                assert raw, f"the scheduler exited: {self.seen}"
                if not raw.startswith(b"{"):
                    continue
                line = json.loads(raw)
                self.seen.append(line)
                if pred(line):
                    return line


def state_is(state: str) -> Callable[[dict[str, Any]], bool]:
    return lambda line: "status" in line and line["status"]["state"] == state


async def test_inverse_offer_accepted_machine_down_and_up_through_pymesos(cluster: Any, tmp_path: Path) -> None:
    master, _agent = cluster
    await master.wait_until(lambda: len(master.state.agents) == 1, within=WAIT)
    (aid,) = master.state.agents
    with (tmp_path / "scheduler.stderr").open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(HERE / "pymesos_maintenance.py"), f"127.0.0.1:{master.port}",
            stdout=asyncio.subprocess.PIPE, stderr=err, start_new_session=True,
        )
    lines = Lines(proc)
    try:
        async with aiohttp.ClientSession() as s:
            async def post(path: str, body: Any) -> int:
                async with s.post(master.url + path, json=body) as r:
                    assert r.status == 200, (path, r.status, await r.text())
                    return r.status

            async def get(path: str) -> Any:
                async with s.get(master.url + path) as r:
                    assert r.status == 200
                    return await r.json()

            running = await lines.wait(state_is("TASK_RUNNING"))
            assert running["status"]["agent_id"]["value"] == aid
            n = len(lines.seen)

            await post("/maintenance/schedule", {"windows": [{"machine_ids": [MACHINE], "unavailability": UNAVAILABILITY}]})
            got = await lines.wait(lambda line: "inverse_offer" in line)
            io = got["inverse_offer"]
            assert io["agent_id"]["value"] == aid and io["unavailability"] == UNAVAILABILITY
            await lines.wait(lambda line: line.get("accepted") == io["id"]["value"])
            await master.wait_until(lambda: not master.state.inverse.outstanding, within=WAIT)
            status = await get("/maintenance/status")
            (machine,) = status["draining_machines"]
            assert machine["id"] == MACHINE
            assert [x["status"] for x in machine["statuses"]] == ["ACCEPT"]
            # its offers of the draining agent carry the unavailability
            offer = await lines.wait(lambda line: "offer" in line and "unavailability" in line["offer"], since=n)
            assert offer["offer"] == {"agent_id": aid, "unavailability": UNAVAILABILITY}

            # DOWN: the agent is shut down, its task killed and reported LOST, nothing offered from it
            await post("/machine/down", [MACHINE])
            lost = await lines.wait(state_is("TASK_LOST"))
            assert lost["status"]["reason"] == "REASON_AGENT_REMOVED"
            assert (await get("/maintenance/status")) == {"down_machines": [MACHINE]}
            assert aid not in master.state.agents
            assert [a["id"] for a in (await get("/state"))["slaves"]] == []
            assert all(o.agent_id != aid for o in master.state.alloc.outstanding_offers())
            refused = master.state.maintenance_refused
            # it tries again: refused while DOWN
            await master.wait_until(lambda: master.state.maintenance_refused > refused, within=WAIT)
            assert aid not in master.state.agents

            # UP: it registers again and is offered, without unavailability
            n = len(lines.seen)
            await post("/machine/up", [MACHINE])
            back = await lines.wait(lambda line: "offer" in line, since=n)
            assert back["offer"] == {"agent_id": aid}
            assert (await get("/maintenance/schedule")) == {}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
