"""Kernel-enforced limits through the whole agent (a fake master launching real tasks) on the real
kernel of this machine: a memory balloon ends TASK_FAILED with REASON_CONTAINER_LIMITATION_MEMORY,
a kill reaches every process of the task (also one that left its process group), a fork bomb
stops at ``--pids-max`` while the agent keeps serving, a busy loop at 0.5 CPU is throttled, the
agent's ``/state`` names the isolator, and every task's usage reaches ``/state``, the master
(``USAGE_REPORT``) and the labels of its terminal status.

cgroup v1 runs in-process (``--isolation cgroups-v1``); cgroup v2 in an agent process
(``--isolation cgroups-v2``: it moves itself into its cgroup's ``agent`` leaf). Each skips, saying
why, only where the kernel has no usable hierarchy of that kind."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pytest

from agent.service import AgentService
from protocol.agent_channel import UsageReport
from protocol.task_states import TaskState
from protocol.usage import from_labels

pytestmark = pytest.mark.slow

BALLOON = "import time\nb = []\nwhile True:\n    b.append(bytearray(8 * 1024 * 1024))\n    time.sleep(0.005)\n"
BOMB = ("import os, time\nwhile True:\n    try:\n        if os.fork() == 0:\n            time.sleep(300)\n"
        "            os._exit(0)\n    except OSError:\n        time.sleep(0.01)\n")


async def v1_agent(make_agent: Any, **kw: Any) -> AgentService:
    agent: AgentService = await make_agent(isolation="cgroups-v1", **kw)
    if agent.isolator.name != "cgroups-v1":
        pytest.skip(f"no writable cgroup v1 hierarchies here: {agent.isolator.describe().get('why')}")
    return agent


async def get_json(url: str) -> Any:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        assert r.status == 200
        return await r.json()


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_memory_balloon_fails_as_a_memory_limitation(master: Any, make_agent: Any) -> None:
    agent = await v1_agent(make_agent)
    await master.wait_connected()
    await master.run("balloon", f"exec {sys.executable} -c '{BALLOON}'", mem=48, cpus=1)
    st = await master.wait_terminal("balloon")
    assert st.state is TaskState.TASK_FAILED
    assert st.reason is not None and st.reason.value == "REASON_CONTAINER_LIMITATION_MEMORY"
    assert st.message is not None and "of the 48.0 MB limit (OOM kill)" in st.message
    used = from_labels(st.labels.labels if st.labels else ())
    assert used is not None and used.mem_peak_bytes > 30 * 1024 * 1024 and used.cpu_seconds > 0
    health = await get_json(f"{agent.url}/health")  # the agent is unharmed and still launches
    assert health["status"] == "ok"
    await master.run("after", "echo fine")
    assert (await master.wait_terminal("after")).state is TaskState.TASK_FINISHED


async def test_kill_reaches_every_process_of_the_task(master: Any, make_agent: Any) -> None:
    agent = await v1_agent(make_agent)
    await master.wait_connected()
    await master.run("escape", "setsid sleep 300 & echo $! > escaped; sleep 300")
    await master.wait_state("escape", TaskState.TASK_RUNNING)
    f = agent.checkpoint.sandbox("fw1", "escape") / "escaped"
    await master.wait_for(lambda: f.exists() and f.read_text().strip())
    escaped = int(f.read_text())
    await master.wait_for(lambda: os.getpgid(escaped) == escaped)  # setsid: out of reach of the group kill
    await master.kill("escape")
    assert (await master.wait_terminal("escape")).state is TaskState.TASK_KILLED
    await master.wait_for(lambda: gone(escaped))


async def test_fork_bomb_stops_at_pids_max_and_the_agent_keeps_serving(master: Any, make_agent: Any) -> None:
    agent = await v1_agent(make_agent, pids_max=64)
    await master.wait_connected()
    await master.run("bomb", f"exec {sys.executable} -c '{BOMB}'", cpus=0.5)
    await master.wait_state("bomb", TaskState.TASK_RUNNING)
    pids = Path(agent.isolator.describe()["cgroups"]["pids"]) / "fw1.bomb"

    def capped() -> bool:
        return int(dict(ln.split() for ln in (pids / "pids.events").read_text().splitlines())["max"]) > 0

    await master.wait_for(capped)
    assert int((pids / "pids.current").read_text()) <= 64
    assert (await get_json(f"{agent.url}/health"))["status"] == "ok"
    await master.run("meanwhile", "echo still launching")
    assert (await master.wait_terminal("meanwhile")).state is TaskState.TASK_FINISHED
    await master.kill("bomb")
    assert (await master.wait_terminal("bomb")).state is TaskState.TASK_KILLED
    await master.wait_for(lambda: not pids.exists())  # every process gone, the cgroup removed


async def test_state_names_the_isolator_and_usage_flows(master: Any, make_agent: Any) -> None:
    agent = await v1_agent(make_agent, usage_report_interval=0.2)
    await master.wait_connected()
    state = await get_json(f"{agent.url}/state")
    assert state["isolation"] == "cgroups-v1"
    assert state["isolator"]["kernel_limits"] is True and state["isolator"]["cpu_quota"] is True
    assert set(state["isolator"]["cgroups"]) >= {"memory", "cpu", "cpuacct"}
    await master.run("spin", f"exec {sys.executable} -c 'while True: pass'", cpus=0.5, mem=64)
    await master.wait_state("spin", TaskState.TASK_RUNNING)

    async def task_usage() -> dict[str, Any] | None:
        st = await get_json(f"{agent.url}/state")
        return next((t.get("usage") for t in st["tasks"] if t["id"] == "spin"), None)

    deadline = time.monotonic() + 20
    first: tuple[float, float] | None = None
    rate = None
    while time.monotonic() < deadline:
        u = await task_usage()
        if u is not None and u["cpu_seconds"] > 0.1:
            if first is None:
                first = (u["cpu_seconds"], u["timestamp"])
            elif u["cpu_seconds"] >= first[0] + 0.6:
                rate = (u["cpu_seconds"] - first[0]) / (u["timestamp"] - first[1])
                break
        await asyncio.sleep(0.1)  # /state is polled: the monitor samples every 0.1 s
    assert rate is not None and rate <= 0.6, rate
    reports = await master.wait_for(lambda: [m for m in master.other if isinstance(m, UsageReport)])
    entry = reports[-1].tasks[0]
    assert entry.task_id.value == "spin" and entry.cpu_seconds > 0 and entry.mem_rss_bytes > 0
    await master.kill("spin")
    st = await master.wait_terminal("spin")
    used = from_labels(st.labels.labels if st.labels else ())
    assert first is not None and used is not None and used.cpu_seconds >= first[0] + 0.6


async def test_cgroup_v2_agent(master: Any, agent_procs: Any) -> None:
    agent = await agent_procs(None, "--isolation", "cgroups-v2", "--pids-max", "64").start()
    await master.wait_connected()
    state = await get_json(f"{agent.url}/state")
    if state["isolation"] != "cgroups-v2":
        pytest.skip(f"cgroup v2 isolation is not available here: {state['isolator'].get('why')}")
    await master.run("balloon", f"exec {sys.executable} -c '{BALLOON}'", mem=48, cpus=1)
    st = await master.wait_terminal("balloon")
    assert st.reason is not None and st.reason.value == "REASON_CONTAINER_LIMITATION_MEMORY"
    await master.run("escape", "setsid sleep 300 & echo $! > escaped; sleep 300")
    await master.wait_state("escape", TaskState.TASK_RUNNING)
    f = agent.work_dir / "sandboxes" / "fw1" / "escape" / "escaped"
    await master.wait_for(lambda: f.exists() and f.read_text().strip())
    await master.kill("escape")
    assert (await master.wait_terminal("escape")).state is TaskState.TASK_KILLED
    await master.wait_for(lambda: gone(int(f.read_text())))
