"""Fault tests with the agent as a real separate process (crashes, restarts, lost updates, partitions): a
forkserver child (pre-imported, fast restarts) or, where its stderr and exit code matter, a
`python -m agent.main` subprocess. `kill -9` is a real SIGKILL either way."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import signal
from pathlib import Path
from typing import Any

import psutil
import pytest

from protocol.mesos import CommandInfo, TaskInfo, TaskStatus
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState as S
from protocol.task_states import check_transition, is_terminal

pytestmark = pytest.mark.slow


async def task_pid(wrapper: int, within: float = 10.0) -> psutil.Process:
    """The task under ``wrapper``. TASK_RUNNING means the wrapper was spawned; the wrapper forks
    the task a moment later, so wait for the child."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        kids = psutil.Process(wrapper).children()
        if kids or asyncio.get_running_loop().time() >= deadline:
            break
        await asyncio.sleep(0.01)  # polling a condition with a deadline
    assert len(kids) == 1, kids
    return kids[0]


async def task_child(task: psutil.Process, name: str, within: float = 10.0) -> psutil.Process:
    """The child of ``task`` called ``name``, once the task has started it."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        kids = [k for k in task.children() if k.name() == name]
        if kids:
            return kids[0]
        assert asyncio.get_running_loop().time() < deadline, f"{task.pid} started no {name}"
        await asyncio.sleep(0.01)  # polling a condition with a deadline


def wrapper_of(st: TaskStatus) -> int:
    return int((st.message or "pid 0").split()[1])


def gate(tmp_path: Path, name: str) -> str:
    """A command that waits for ``<tmp>/<name>`` to exist, then exits with its content."""
    f = tmp_path / name
    return f'while [ ! -f {f} ]; do sleep 0.05; done; exit "$(cat {f})"'


async def gone(proc: psutil.Process, within: float = 10.0) -> None:
    """Wait until ``proc`` has exited (a zombie counts: orphans are reaped by init, sometimes late)."""
    deadline = asyncio.get_running_loop().time() + within
    while asyncio.get_running_loop().time() < deadline:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        await asyncio.sleep(0.02)  # polling a condition with a deadline
    raise AssertionError(f"process {proc.pid} still alive")


def assert_one_terminal(master: Any, tid: str) -> TaskStatus:
    """I1: a valid path with exactly one distinct terminal state (duplicates only by uuid)."""
    sts = master.statuses(tid)
    terminals = {(s.state, s.uuid) for s in sts if is_terminal(s.state)}
    assert len(terminals) == 1, (tid, [(s.state.name, s.uuid) for s in sts])
    path = master.states(tid)
    for a, b in itertools.pairwise(path):
        check_transition(a, b)
    return next(s for s in sts if is_terminal(s.state))


async def test_r1_agent_killed_mid_task_task_survives(master: Any, agent_procs: Any, tmp_path: Path) -> None:
    agent = await agent_procs(None, fork=True).start()
    first = await master.wait_connected()
    await master.run("t", gate(tmp_path, "go"))
    st = await master.wait_state("t", S.TASK_RUNNING)
    wrapper = wrapper_of(st)
    proc = await task_pid(wrapper)
    ident = (proc.pid, proc.create_time())
    agent_id = master.registrations[0]
    await agent.kill9()
    assert proc.is_running()
    await agent.start()
    reg = await master.wait_connected(2)
    assert first.agent_id is None and reg.agent_id is not None
    assert reg.agent_id.value == "agent-1" and agent_id is first
    assert [(t.task_id.value, t.state) for t in reg.tasks] == [("t", S.TASK_RUNNING)]
    assert (proc.pid, proc.create_time()) == ident and proc.is_running()
    (tmp_path / "go").write_text("0")
    await master.wait_terminal("t")
    st = assert_one_terminal(master, "t")
    assert st.state is S.TASK_FINISHED
    assert S.TASK_LOST not in master.states("t")


async def test_r2_unacked_running_is_resent_after_restart(master: Any, agent_procs: Any, tmp_path: Path) -> None:
    master.drop_acks = True
    agent = await agent_procs(None, fork=True).start()
    await master.wait_connected()
    await master.run("t", gate(tmp_path, "go"))
    running = await master.wait_state("t", S.TASK_RUNNING)
    await agent.kill9()
    n = len(master.statuses("t"))
    await agent.start()
    await master.wait_connected(2)
    await master.wait_for(lambda: len(master.statuses("t")) > n)
    resent = master.statuses("t")[-1]
    assert resent.state is S.TASK_RUNNING and resent.uuid == running.uuid  # the checkpointed update
    master.drop_acks = False
    await master.ack(resent)
    (tmp_path / "go").write_text("0")
    assert (await master.wait_terminal("t")).state is S.TASK_FINISHED
    assert_one_terminal(master, "t")


async def test_r3_task_ends_while_agent_is_down(master: Any, agent_procs: Any, tmp_path: Path) -> None:
    agent = await agent_procs(None, fork=True).start()
    await master.wait_connected()
    await master.run("rec", gate(tmp_path, "go"))
    await master.run("lost", "sleep 60")
    st = await master.wait_state("rec", S.TASK_RUNNING)
    lost = await master.wait_state("lost", S.TASK_RUNNING)
    rec_wrapper = psutil.Process(wrapper_of(st))
    await agent.kill9()
    (tmp_path / "go").write_text("3")
    await gone(rec_wrapper, 20)  # the wrapper records the exit status and ends
    os.killpg(wrapper_of(lost), signal.SIGKILL)  # nothing recorded for this one
    await gone(psutil.Process(wrapper_of(lost)), 20)
    await agent.start()
    st = await master.wait_terminal("rec")
    assert st.state is S.TASK_FAILED and "status 3" in (st.message or "")
    st = await master.wait_terminal("lost")
    assert st.state is S.TASK_LOST and st.reason is not None and st.reason.name == "REASON_AGENT_RESTARTED"
    assert_one_terminal(master, "rec")
    assert_one_terminal(master, "lost")


async def test_r4_checkpointed_but_never_spawned(master: Any, agent_procs: Any, tmp_path: Path) -> None:
    from agent.checkpoint import Checkpoint, TaskRecordFile

    agent = await agent_procs(None, fork=True).start()
    await master.wait_connected()
    await agent.kill9()
    # what the agent leaves behind when it dies between the launch checkpoint and the spawn
    cp = Checkpoint(tmp_path / "agent")
    cp.write_framework("fw1", master.framework)
    cp.write_task(TaskRecordFile("fw1", TaskInfo(name="t", task_id=TaskID("t"), command=CommandInfo(value="sleep 60"))))
    cp.commit()
    await agent.start()
    st = await master.wait_terminal("t")
    assert st.state is S.TASK_LOST
    assert S.TASK_RUNNING not in master.states("t")


async def test_r7_wrapper_crash_kills_task(master: Any, agent_procs: Any) -> None:
    await agent_procs(None, fork=True).start()
    await master.wait_connected()
    await master.run("t", "sleep 60")
    st = await master.wait_state("t", S.TASK_RUNNING)
    task = await task_pid(wrapper_of(st))
    os.kill(wrapper_of(st), signal.SIGKILL)
    st = await master.wait_terminal("t")
    assert st.state is S.TASK_FAILED and st.reason is not None and st.reason.name == "REASON_EXECUTOR_TERMINATED"
    await gone(task, 10)  # killed with its group (reaped by init)
    assert not task.is_running() or task.status() == psutil.STATUS_ZOMBIE


async def test_r9_corrupt_checkpoint_strict_and_not(master: Any, agent_procs: Any, tmp_path: Path) -> None:
    work = tmp_path / "agent"
    agent = await agent_procs(work).start()
    await master.wait_connected()
    await master.run("good", "sleep 60")
    await master.run("bad", "sleep 60")
    await master.wait_state("good", S.TASK_RUNNING)
    bad = await master.wait_state("bad", S.TASK_RUNNING)
    bad_wrapper = psutil.Process(wrapper_of(bad))
    await agent.kill9()
    broken = work / "meta/frameworks/fw1/tasks/bad.log"
    data = bytearray(broken.read_bytes())
    data[20] ^= 0xFF  # inside the task record
    broken.write_bytes(bytes(data))
    strict = agent_procs(work, "--strict")
    with pytest.raises(AssertionError) as refused:
        await strict.start()
    assert str(broken) in str(refused.value)  # refused, naming the file
    code, _ = await strict.exit_code()
    assert code == 2
    await agent.start()
    st = await master.wait_terminal("bad")
    assert st.state is S.TASK_LOST and str(broken) in (st.message or "")
    await gone(bad_wrapper, 10)  # a task reported LOST does not keep running
    reg = master.registrations[-1]
    assert ("good", S.TASK_RUNNING) in [(t.task_id.value, t.state) for t in reg.tasks]
    await master.kill("good", 0.1)
    assert (await master.wait_terminal("good")).state is S.TASK_KILLED


async def test_r8_twenty_kill_restart_cycles_during_launches(master: Any, agent_procs: Any, tmp_path: Path) -> None:
    rng = random.Random(8)
    agent = agent_procs(tmp_path / "agent", fork=True)
    sent: list[str] = []
    n = 0
    for cycle in range(20):
        await agent.start()
        await master.wait_connected(cycle + 1)
        tasks = []
        for _ in range(4):
            n += 1
            tid = f"t{n}"
            sent.append(tid)
            cmd = rng.choice(["true", "exit 2", "sleep 0.2", "sleep 5"])
            tasks.append(
                TaskInfo(name=tid, task_id=TaskID(tid), resources=Resources.of(cpus=0.1, mem=8).to_mesos(),
                         command=CommandInfo(value=cmd))
            )
        await master.run_many(tasks)
        if rng.random() < 0.3:
            await master.kill(rng.choice(sent), 0.2)
        seen = len(master.updates)
        want = seen + rng.randint(0, 5)
        await master.wait_for(lambda want=want: len(master.updates) >= want)  # type: ignore[misc]
        await agent.kill9()
    await agent.start()
    await master.wait_connected(21)
    for tid in sent:  # end every task still running, then everything must be consistent
        if master.statuses(tid) and not master.terminal(tid):
            await master.kill(tid, 0.1)
    for tid in sent:
        if master.statuses(tid):
            await master.wait_terminal(tid, within=30)
            assert_one_terminal(master, tid)
    state = await _state(agent.url)
    assert all(is_terminal(S[t["state"]]) for t in state["tasks"]), state["tasks"]
    assert {t["id"] for t in state["tasks"]} <= {t for t in sent if master.statuses(t)}
    # checkpoint never corrupt
    assert not [r for r in state["recovery"] if "corrupt" in r]
    # finished tasks' files go to the pool (truncated, renamed:
    # agent/checkpoint.py, "Recycled files") and come out of it for new tasks, kill -9 or not:
    # once every task has ended and been acknowledged, no task log is left, the pool holds only
    # empty files, and no task was reported twice (assert_one_terminal above)
    work = tmp_path / "agent"
    await master.wait_for(lambda: not list((work / "meta" / "frameworks").glob("*/tasks/*.log")))
    free = list((work / "meta" / "free").iterdir())
    assert free and all(f.stat().st_size == 0 for f in free)
    # no wrapper of this test is left behind
    marker = str(tmp_path / "agent")
    assert not [p for p in psutil.process_iter(["cmdline"]) if (p.info["cmdline"] or [""])[0] == "/bin/sh"
                and len(p.info["cmdline"]) > 3 and p.info["cmdline"][3].startswith(marker)]


async def _state(url: str) -> Any:
    import aiohttp

    async with aiohttp.ClientSession() as s, s.get(f"{url}/state") as r:
        return json.loads(await r.text())


async def test_executor_left_from_before_a_restart_is_killed(master: Any, agent_procs: Any, tmp_path: Path) -> None:
    from protocol.agent_channel import RunTasks
    from protocol.mesos import ExecutorInfo, ExecutorType
    from protocol.mesos_common import ExecutorID, FrameworkID

    agent = await agent_procs(None, fork=True).start()
    await master.wait_connected()
    ex = ExecutorInfo(executor_id=ExecutorID("e"), type=ExecutorType.CUSTOM, command=CommandInfo(value="sleep 60"))
    await master.send(RunTasks(FrameworkID("fw1"), master.framework, (TaskInfo(name="x", task_id=TaskID("x"), executor=ex),)))
    marker = str(tmp_path / "agent/meta/frameworks/fw1/executors/e.exit")

    def executors() -> list[psutil.Process]:
        return [p for p in psutil.process_iter(["cmdline"]) if len(p.info["cmdline"] or []) > 3 and p.info["cmdline"][3] == marker]

    await master.wait_for(executors)
    (proc,) = executors()
    await agent.kill9()
    await agent.start()
    st = await master.wait_terminal("x")
    assert st.state is S.TASK_LOST
    await gone(proc, 10)


async def test_kill_under_way_survives_an_agent_restart(master: Any, agent_procs: Any) -> None:
    import attrs

    from protocol.mesos import Capability, CapabilityType

    master.framework = attrs.evolve(master.framework, capabilities=(Capability(CapabilityType.TASK_KILLING_STATE),))
    agent = await agent_procs(None, fork=True).start()
    await master.wait_connected()
    await master.run("stubborn", "trap '' TERM; sleep 60 & wait", grace=1.5)
    st = await master.wait_state("stubborn", S.TASK_RUNNING)
    wrapper = psutil.Process(wrapper_of(st))
    # TASK_RUNNING means the wrapper was spawned: wait until the task has run its `trap` (its
    # `sleep` child exists), or a SIGTERM sent earlier would end it before it ignores TERM
    await task_child(await task_pid(wrapper.pid), "sleep")
    await master.kill("stubborn")
    await master.wait_state("stubborn", S.TASK_KILLING)  # SIGTERM sent, kill recorded
    await agent.kill9()
    assert wrapper.is_running()  # TERM is ignored; only the (restarted) agent's SIGKILL ends it
    await agent.start()
    st = await master.wait_terminal("stubborn")
    assert st.state is S.TASK_KILLED
    assert_one_terminal(master, "stubborn")
    await gone(wrapper, 10)


async def test_sigusr1_kills_every_task_then_exits(master: Any, agent_procs: Any) -> None:
    agent = await agent_procs().start()
    await master.wait_connected()
    await master.run("a", "sleep 60")
    await master.run("b", "trap '' TERM; sleep 60 & wait", grace=0.5)
    wrappers = [psutil.Process(wrapper_of(await master.wait_state(t, S.TASK_RUNNING))) for t in ("a", "b")]
    assert agent.proc is not None
    agent.proc.send_signal(signal.SIGUSR1)
    code, _ = await agent.exit_code()
    assert code == 0
    for t in ("a", "b"):
        st = assert_one_terminal(master, t)
        assert st.state is S.TASK_KILLED and st.reason is not None
        assert st.reason.name == "REASON_AGENT_REMOVED_BY_OPERATOR"
    for w in wrappers:
        await gone(w, 10)


async def test_wrapper_killed_while_agent_is_down_leaves_no_task_behind(master: Any, agent_procs: Any) -> None:
    agent = await agent_procs(None, fork=True).start()
    await master.wait_connected()
    await master.run("orphan", "sleep 60")
    st = await master.wait_state("orphan", S.TASK_RUNNING)
    wrapper = psutil.Process(wrapper_of(st))
    task = await task_pid(wrapper.pid)
    await agent.kill9()
    wrapper.kill()  # the wrapper dies while the agent is down; its task lives on, orphaned
    await gone(wrapper, 10)
    assert task.is_running()
    await agent.start()
    st = await master.wait_terminal("orphan")
    assert st.state is S.TASK_LOST
    await gone(task, 10)  # killed by the restarted agent


async def test_a_task_that_ends_while_the_restarted_agent_recovers_reports_its_exit_code(
    master: Any, make_agent: Any, tmp_path: Path
) -> None:
    """The wrapper records the exit status and ends between the restarted agent reading the
    task's checkpoint (no status yet) and checking whether the wrapper lives (found in the fault
    soak: 3 tasks of 1,027 were reported TASK_LOST "exit status unknown" over 20 agent kills):
    the recorded code is read after the wrapper is found gone, and the task ends FINISHED."""
    from select import select

    from agent.service import AgentService

    from .conftest import agent_config, kill_leftovers

    first = await make_agent(tmp_path / "agent")
    await master.wait_connected()
    await master.run("t", gate(tmp_path, "go"))
    wrapper = wrapper_of(await master.wait_state("t", S.TASK_RUNNING))
    await first.stop()  # the task keeps running, as after kill -9; its checkpoint has no exit status
    second = AgentService(agent_config(master, tmp_path / "agent"))
    real_adopt = second.launcher.adopt

    def adopt_once_the_task_has_ended(key: str, pid: int, create_time: float, exit_status: Path) -> bool:
        (tmp_path / "go").write_text("0")
        fd = os.pidfd_open(pid)
        try:
            assert select([fd], [], [], 20)[0], "the wrapper did not end"  # readable: it exited
        finally:
            os.close(fd)
        return real_adopt(key, pid, create_time, exit_status)

    second.launcher.adopt = adopt_once_the_task_has_ended  # type: ignore[method-assign]
    try:
        await second.start()
        st = await master.wait_terminal("t")
        assert st.state is S.TASK_FINISHED, (st.state, st.message)
        assert_one_terminal(master, "t")
    finally:
        await second.stop()
        await kill_leftovers(tmp_path)
        with contextlib.suppress(ChildProcessError):
            await asyncio.to_thread(os.waitpid, wrapper, os.WNOHANG)  # it was this process's child: reap it
