"""A real agent in-process playing Mesos' DEFAULT executor for task groups (LAUNCH_GROUP whose
executor has no command): every task runs, reported under the executor's id; one task failing
kills the rest of its group; a KILL of one kills the group; the executor is reported gone when
its last task ends."""

from __future__ import annotations

from typing import Any

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
    assert (agent.checkpoint.sandbox("fw1", "a") / "stdout").read_text() == "a-pod\n"
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
