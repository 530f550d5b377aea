"""A real agent in-process playing Mesos' DEFAULT executor for task groups (LAUNCH_GROUP whose
executor has no command): every task runs, reported under the executor's id; one task failing
kills the rest of its group; a KILL of one kills the group; the executor is reported gone when
its last task ends; the group's fate holds across an agent restart; each task's sandbox is nested
under the executor's, and the agent's /state keeps the finished group as a completed executor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from protocol.agent_channel import ExecutorExited, RunTasks
from protocol.mesos import CommandInfo, ExecutorInfo, ExecutorType, TaskInfo
from protocol.mesos_common import ExecutorID, FrameworkID, TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState as S

EXECUTOR = ExecutorInfo(executor_id=ExecutorID("pod"), type=ExecutorType.DEFAULT,
                        resources=Resources.of(cpus=0.1, mem=32).to_mesos())


def task(tid: str, cmd: str | None) -> TaskInfo:
    return TaskInfo(name=tid, task_id=TaskID(tid), resources=Resources.of(cpus=0.1, mem=32).to_mesos(),
                    command=CommandInfo(value=cmd) if cmd is not None else None)


async def group(master: Any, *tasks: TaskInfo, executor: ExecutorInfo = EXECUTOR) -> None:
    await master.send(RunTasks(FrameworkID("fw1"), master.framework, tasks, executor=executor, group=True))


def exited(master: Any) -> list[ExecutorExited]:
    return [o for o in master.other if isinstance(o, ExecutorExited)]


async def test_group_runs_under_the_default_executor(master: Any, make_agent: Any) -> None:
    agent = await make_agent()
    await master.wait_connected()
    await group(master, task("a", "echo a-$MESOS_EXECUTOR_ID"), task("b", "echo b"))
    for tid in ("a", "b"):
        st = await master.wait_terminal(tid)
        assert st.state is S.TASK_FINISHED, st
        assert master.states(tid) == [S.TASK_RUNNING, S.TASK_FINISHED]
        assert all(s.executor_id is not None and s.executor_id.value == "pod" for s in master.statuses(tid))
    assert (agent.checkpoint.task_sandbox("fw1", "a", "pod") / "stdout").read_text() == "a-pod\n"
    gone = await master.wait_for(lambda: exited(master))
    assert [(e.framework_id.value, e.executor_id.value) for e in gone] == [("fw1", "pod")]
    # both tasks' statuses name the executor's one container
    ids = {s.container_status.container_id.value for t in ("a", "b") for s in master.statuses(t)}
    assert len(ids) == 1


async def test_a_failed_task_kills_its_group(master: Any, make_agent: Any) -> None:
    await make_agent()
    await master.wait_connected()
    await group(master, task("long", "exec sleep 30"), task("bad", "sleep 0.2; exit 3"))
    bad = await master.wait_terminal("bad")
    assert bad.state is S.TASK_FAILED
    long = await master.wait_terminal("long")
    assert long.state is S.TASK_KILLED and long.message == "Killed: task 'bad' of its task group ended TASK_FAILED"
    await master.wait_for(lambda: exited(master))


async def test_a_kill_takes_the_group(master: Any, make_agent: Any) -> None:
    await make_agent()
    await master.wait_connected()
    await group(master, task("x", "exec sleep 30"), task("y", "exec sleep 30"))
    await master.wait_state("x", S.TASK_RUNNING)
    await master.wait_state("y", S.TASK_RUNNING)
    await master.kill("x")
    assert (await master.wait_terminal("x")).state is S.TASK_KILLED
    y = await master.wait_terminal("y")
    assert y.state is S.TASK_KILLED and y.message == "Killed with task 'x' of its task group"
    await master.wait_for(lambda: exited(master))


async def test_a_group_task_without_a_command_is_refused(master: Any, make_agent: Any) -> None:
    await make_agent()
    await master.wait_connected()
    await group(master, task("c", "true"), task("nocmd", None))
    for tid in ("c", "nocmd"):
        st = await master.wait_terminal(tid)
        assert st.state is S.TASK_ERROR and st.reason is not None and st.reason.name == "REASON_TASK_GROUP_INVALID"
        assert "task nocmd of a task group on the DEFAULT executor has no command" in (st.message or "")


async def test_the_group_fate_holds_across_an_agent_restart(master: Any, make_agent: Any, tmp_path: Path) -> None:
    """The tasks outlive the agent; the restarted agent re-attaches them and still knows them as
    one group: the one that fails afterwards takes the other down."""
    agent = await make_agent()
    await master.wait_connected()
    gate = tmp_path / "fail"
    await group(master, task("long", "exec sleep 30"), task("bad", f"while [ ! -f {gate} ]; do sleep 0.05; done; exit 3"))
    await master.wait_state("long", S.TASK_RUNNING)
    await master.wait_state("bad", S.TASK_RUNNING)
    await agent.stop()
    agent = await make_agent()
    await master.wait_connected(2)
    assert any(r.startswith("task fw1/long: re-attached") for r in agent.recovery_report)
    gate.write_text("")
    assert (await master.wait_terminal("bad")).state is S.TASK_FAILED
    long = await master.wait_terminal("long")
    assert long.state is S.TASK_KILLED and long.message == "Killed: task 'bad' of its task group ended TASK_FAILED"
    gone = await master.wait_for(lambda: exited(master))
    assert [(e.framework_id.value, e.executor_id.value) for e in gone] == [("fw1", "pod")]


async def test_sandboxes_nest_under_the_executor_and_the_finished_group_stays_in_state(
    master: Any, make_agent: Any
) -> None:
    agent = await make_agent()
    await master.wait_connected()
    await group(master, task("a", "echo a"), task("b", "echo b"))
    for tid in ("a", "b"):
        assert (await master.wait_terminal(tid)).state is S.TASK_FINISHED
    await master.wait_for(lambda: not agent.tracker.tasks)  # acknowledged and forgotten
    async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{agent.port}/state") as r:
        state = await r.json()
    assert state["frameworks"] == []
    (fw,) = state["completed_frameworks"]
    assert (fw["id"], fw["executors"]) == ("fw1", [])
    (ex,) = fw["completed_executors"]
    directory = str(agent.checkpoint.sandboxes / "fw1" / "pod")
    assert (ex["id"], ex["type"], ex["directory"], ex["tasks"]) == ("pod", "DEFAULT", directory, [])
    done = {t["id"]: t for t in ex["completed_tasks"]}
    assert {tid: t["state"] for tid, t in done.items()} == {"a": "TASK_FINISHED", "b": "TASK_FINISHED"}
    for tid in ("a", "b"):  # Mesos' layout: the task's sandbox under its executor's, at tasks/<id>
        assert done[tid]["sandbox"] == f"{directory}/tasks/{tid}"
        assert (Path(directory) / "tasks" / tid / "stdout").read_text() == f"{tid}\n"
