"""A real agent in-process against the fake master: run, fail, kill, ack, reconnect, limits."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pytest

from protocol.mesos import Environment, Variable
from protocol.task_states import TaskState as S

pytestmark = pytest.mark.slow


async def test_task_runs_and_finishes(master: Any, make_agent: Any) -> None:
    agent = await make_agent()
    reg = await master.wait_connected()
    assert reg.agent_id is None and reg.isolation == agent.isolator.name
    await master.run("t1", "echo hello $MESOS_TASK_ID")
    st = await master.wait_terminal("t1")
    assert st.state is S.TASK_FINISHED
    assert master.states("t1") == [S.TASK_RUNNING, S.TASK_FINISHED]
    assert st.agent_id is not None and st.agent_id.value == "agent-1" and st.uuid
    sandbox = agent.checkpoint.sandbox("fw1", "t1")
    assert (sandbox / "stdout").read_text() == "hello t1\n"
    # acked terminal: stream done, checkpoint dropped
    await master.wait_for(lambda: agent.tracker.get("fw1", "t1") is None)
    await master.wait_for(lambda: not (agent.checkpoint.meta / "frameworks" / "fw1").exists())


async def test_failure_exit_code_and_argv(master: Any, make_agent: Any, tmp_path: Path) -> None:
    await make_agent()
    await master.wait_connected()
    await master.run("bad", "exit 7")
    marker = tmp_path / "pwned"
    await master.run("argv", "/bin/echo", shell=False, args=("echo", f"x; touch {marker}"))
    env = Environment((Variable("LD_PRELOAD", "/x.so"),))
    await master.run("envbad", "true", env=env)
    st = await master.wait_terminal("bad")
    assert st.state is S.TASK_FAILED and "status 7" in (st.message or "")
    assert st.reason is not None and st.reason.name == "REASON_COMMAND_EXECUTOR_FAILED"
    assert (await master.wait_terminal("argv")).state is S.TASK_FINISHED
    assert not marker.exists()
    st = await master.wait_terminal("envbad")
    assert st.state is S.TASK_ERROR and "LD_PRELOAD" in (st.message or "")


async def test_kill_with_grace_escalates(master: Any, make_agent: Any) -> None:
    agent = await make_agent()
    await master.wait_connected()
    await master.run("k", "trap '' TERM; sleep 60 & wait", grace=0.3)
    st = await master.wait_state("k", S.TASK_RUNNING)
    wrapper = int((st.message or "pid 0").split()[1])
    group = [p for p in psutil.process_iter() if _pgid(p.pid) == wrapper]
    await master.kill("k")
    st = await master.wait_terminal("k")
    assert st.state is S.TASK_KILLED
    for p in group:
        assert not p.is_running() or p.status() == psutil.STATUS_ZOMBIE
    assert agent.tracker.get("fw1", "k") is None or agent.tracker.get("fw1", "k").terminal


async def test_memory_limit_fails_task(master: Any, make_agent: Any) -> None:
    await make_agent()
    await master.wait_connected()
    code = "import time; b = bytearray(150 * 1024 * 1024); time.sleep(60)"
    await master.run("hog", f"{sys.executable} -c '{code}'", mem=40)
    st = await master.wait_terminal("hog")
    assert st.state is S.TASK_FAILED
    assert st.reason is not None and st.reason.name == "REASON_CONTAINER_LIMITATION_MEMORY"


async def test_revocation_reports_preempted(master: Any, make_agent: Any) -> None:
    await make_agent()
    await master.wait_connected()
    await master.run("rev", "sleep 60", revocable=True)
    await master.wait_state("rev", S.TASK_RUNNING)
    await master.revoke(["rev"], grace=0.2)
    st = await master.wait_terminal("rev")
    assert st.state is S.TASK_KILLED and st.reason is not None and st.reason.name == "REASON_CONTAINER_PREEMPTED"


async def test_framework_shutdown_kills_its_tasks(master: Any, make_agent: Any) -> None:
    await make_agent()
    await master.wait_connected()
    await master.run("s1", "sleep 60")
    await master.run("s2", "sleep 60")
    await master.wait_state("s1", S.TASK_RUNNING)
    await master.wait_state("s2", S.TASK_RUNNING)
    await master.shutdown_framework()
    for t in ("s1", "s2"):
        st = await master.wait_terminal(t)
        assert st.state is S.TASK_KILLED and st.reason is not None and st.reason.name == "REASON_FRAMEWORK_REMOVED"


async def test_unacked_update_is_resent_until_acked(master: Any, make_agent: Any) -> None:
    master.auto_ack = False
    agent = await make_agent()
    await master.wait_connected()
    await master.run("r", "true")
    await master.wait_for(lambda: len(master.statuses("r")) >= 3)
    # FINISHED is held until RUNNING is acked; resends carry latest_state
    assert {s.state for s in master.statuses("r")} == {S.TASK_RUNNING}
    assert master.updates[-1].latest_state is S.TASK_FINISHED
    await master.ack(master.statuses("r")[0])
    st = await master.wait_terminal("r")
    await master.ack(st)
    # after the terminal ack the stream is gone: nothing is pending, no resend is scheduled
    await master.wait_for(lambda: agent.tracker.get("fw1", "r") is None)
    assert agent.updates.pending("fw1", "r") == () and agent.updates.next_deadline() is None


async def test_reconnect_and_reregister_with_same_id(master: Any, make_agent: Any) -> None:
    agent = await make_agent()
    await master.wait_connected()
    await master.run("long", "sleep 60")
    await master.wait_state("long", S.TASK_RUNNING)
    await master.ws.close()
    reg = await master.wait_connected(2)
    assert reg.agent_id is not None and reg.agent_id.value == "agent-1"
    assert [(t.task_id.value, t.state) for t in reg.tasks] == [("long", S.TASK_RUNNING)]
    await master.kill("long", 0.1)
    assert (await master.wait_terminal("long")).state is S.TASK_KILLED
    assert agent.channel.connects == 2


async def test_stale_epoch_frames_are_dropped(master: Any, make_agent: Any) -> None:
    master.epoch = 5
    agent = await make_agent()
    await master.wait_connected()
    await master.run("old", "true")  # epoch 5: accepted
    await master.wait_terminal("old")
    master.epoch = 4
    await master.run("stale", "true")
    await master.wait_for(lambda: agent.channel.stale_frames >= 1)
    assert agent.tracker.get("fw1", "stale") is None



async def test_redirect_to_leader(master: Any, make_agent: Any) -> None:
    follower = await type(master)().start()
    try:
        follower.redirect_to = master.address
        agent = await make_agent(master=follower.address)
        await master.wait_connected()
        assert agent.channel.master == master.address
    finally:
        await follower.stop()


async def test_http_state_health_metrics_and_files(master: Any, make_agent: Any) -> None:
    agent = await make_agent()
    await master.wait_connected()
    await master.run("f", "echo data > out.txt; echo logged")
    await master.wait_terminal("f")
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{agent.url}/health") as r:
            assert r.status == 200
        async with s.get(f"{agent.url}/state") as r:
            state = await r.json()
            assert state["id"] == "agent-1" and state["isolation"] in ("psutil", "cgroups-v1", "cgroups-v2")
            assert state["isolator"]["name"] == state["isolation"]
            assert state["resources"]["cpus"] == 4.0
        async with s.get(f"{agent.url}/metrics") as r:
            text = await r.text()
            assert "agora_agent_tasks_launched_total 1.0" in text
        async with s.get(f"{agent.url}/files/read", params={"path": "fw1/f/stdout", "offset": "0"}) as r:
            assert r.status == 200
        async with s.get(f"{agent.url}/files/read", params={"path": "../meta/agent.json", "offset": "0"}) as r:
            assert r.status in (400, 403, 404)


def _pgid(pid: int) -> int | None:
    import os

    try:
        return os.getpgid(pid)
    except OSError:
        return None


async def test_task_user_rules(master: Any, make_agent: Any) -> None:
    import os

    from protocol.mesos import CommandInfo, TaskInfo
    from protocol.mesos_common import TaskID

    if os.geteuid() != 0:
        pytest.skip("switching users needs the agent to run as root")
    agent = await make_agent()
    await master.wait_connected()

    def task(tid: str, user: str) -> TaskInfo:
        return TaskInfo(name=tid, task_id=TaskID(tid), command=CommandInfo(value="id -u; touch mine", user=user))

    await master.run_many([task("as-nobody", "nobody"), task("as-root", "root"), task("as-ghost", "no-such-user")])
    assert (await master.wait_terminal("as-nobody")).state is S.TASK_FINISHED
    sandbox = agent.checkpoint.sandbox("fw1", "as-nobody")
    assert (sandbox / "stdout").read_text() == "65534\n"
    assert (sandbox / "mine").stat().st_uid == 65534
    st = await master.wait_terminal("as-root")
    assert st.state is S.TASK_ERROR and st.reason is not None and st.reason.name == "REASON_TASK_UNAUTHORIZED"
    st = await master.wait_terminal("as-ghost")
    assert st.state is S.TASK_ERROR and "unknown user" in (st.message or "")


async def test_framework_user_is_the_default_task_user(master: Any, make_agent: Any) -> None:
    """A task without CommandInfo.user runs as its FrameworkInfo.user (Mesos --switch_user), when
    the agent can switch to it (it runs as root); CommandInfo.user still wins; a framework user
    this host lacks means the agent's user."""
    import os
    import pwd

    import attrs

    from protocol.mesos import CommandInfo, TaskInfo
    from protocol.mesos_common import TaskID

    nobody = pwd.getpwnam("nobody").pw_uid
    me = os.geteuid()
    expected = nobody if me == 0 else me  # a non-root agent cannot switch: the agent's user

    def task(tid: str, user: str | None = None) -> TaskInfo:
        return TaskInfo(name=tid, task_id=TaskID(tid), command=CommandInfo(value="id -u", user=user))

    agent = await make_agent()
    await master.wait_connected()
    master.framework = attrs.evolve(master.framework, user="nobody")
    await master.run_many([task("fw-user"), task("cmd-user", "daemon")])
    master.framework = attrs.evolve(master.framework, user="no-such-user-here")
    await master.run_many([task("ghost-fw-user")])
    daemon = pwd.getpwnam("daemon").pw_uid
    st = await master.wait_terminal("cmd-user")
    if me != 0:  # an explicit CommandInfo.user the agent cannot switch to is refused
        assert st.state is S.TASK_ERROR and st.reason is not None and st.reason.name == "REASON_TASK_UNAUTHORIZED"
    for tid, uid in (("fw-user", expected), ("cmd-user", daemon), ("ghost-fw-user", me))[:: 1 if me == 0 else 2]:
        assert (await master.wait_terminal(tid)).state is S.TASK_FINISHED, tid
        assert (agent.checkpoint.sandbox("fw1", tid) / "stdout").read_text() == f"{uid}\n", tid


async def test_finished_sandbox_is_collected_after_the_delay(master: Any, make_agent: Any) -> None:
    agent = await make_agent(gc_delay=0.3)
    await master.wait_connected()
    await master.run("gc", "echo bye")
    await master.wait_terminal("gc")
    sandbox = agent.checkpoint.sandbox("fw1", "gc")
    assert (sandbox / "stdout").read_text() == "bye\n"  # readable right after the end
    await master.wait_for(lambda: not sandbox.exists())


async def test_resends_follow_the_agents_clock(master: Any, tmp_path: Path) -> None:
    """The timer loop sleeps on the agent's clock until the earliest resend deadline, re-arms
    when that deadline moves, and resends the unacknowledged head each time it is due."""
    from agent.service import AgentService
    from protocol.clock import FakeClock
    from tests.integration.agent.conftest import agent_config, kill_leftovers

    master.drop_acks = True
    clock = FakeClock()
    cfg = agent_config(master, tmp_path / "agent", resend_initial=5.0, resend_max=5.0, monitor_interval=3600.0)
    svc = AgentService(cfg, clock=clock)
    await svc.start()
    try:
        await master.wait_connected()
        await master.run("t", "sleep 60")
        first = await master.wait_state("t", S.TASK_RUNNING)
        for sends in (2, 3):
            deadline = svc.updates.next_deadline()
            assert deadline is not None and deadline > clock.now()
            await master.wait_for(lambda d=deadline: clock.next_deadline() == d)  # the timer sleeps until it
            clock.set(deadline)
            await master.wait_for(lambda n=sends: len(master.statuses("t")) == n)
        assert {s.uuid for s in master.statuses("t")} == {first.uuid}  # the same update, resent
    finally:
        await svc.stop()
        await kill_leftovers(tmp_path)


async def test_a_retiring_agent_drops_launches_and_tells_the_master(master: Any, make_agent: Any) -> None:
    """SIGUSR1 (``kill_all_tasks``): the master is told at once (UNREGISTER, so it offers the
    agent no more), a task launched while the kill-all runs is dropped, not run, and the running
    task is killed."""
    from protocol.agent_channel import Unregister

    agent = await make_agent()
    await master.wait_connected()
    await master.run("old", "trap '' TERM; sleep 60 & wait", grace=1.0)  # outlives its SIGTERM
    await master.wait_state("old", S.TASK_RUNNING)
    retiring = asyncio.ensure_future(agent.kill_all_tasks(within=20.0))
    await master.wait_for(lambda: any(isinstance(b, Unregister) for b in master.other))
    await master.run("late", "sleep 60")
    st = await master.wait_terminal("late")
    assert st.state is S.TASK_DROPPED
    assert st.reason is not None and st.reason.name == "REASON_AGENT_REMOVED_BY_OPERATOR"
    assert "retiring" in (st.message or "")
    assert await asyncio.wait_for(retiring, 20.0)
    old = master.terminal("old")
    assert old is not None and old.state is S.TASK_KILLED
    assert agent.tracker.get("fw1", "late") is None
    assert master.states("late") == [S.TASK_DROPPED]
