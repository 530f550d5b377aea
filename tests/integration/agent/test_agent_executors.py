"""Custom executors (pymesos ``MesosExecutorDriver``) launched by the agent, and the
oversubscription hooks (fixed estimator -> SLACK_ESTIMATE)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from protocol.agent_channel import (
    ExecutorExited,
    ExecutorMessageMsg,
    FrameworkMessageMsg,
    RunTasks,
    ShutdownExecutor,
    SlackEstimate,
)
from protocol.mesos import URI, CommandInfo, ExecutorInfo, ExecutorType, TaskInfo
from protocol.mesos_common import ExecutorID, FrameworkID, TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState as S

pytestmark = pytest.mark.slow

EXECUTOR = '''
import threading, time
from addict import Dict
from pymesos import Executor, MesosExecutorDriver


class Echo(Executor):
    def launchTask(self, driver, task):
        def run():
            for state in ("TASK_RUNNING", "TASK_FINISHED"):
                update = Dict()
                update.task_id.value = task.task_id.value
                update.state = state
                update.timestamp = time.time()
                driver.sendStatusUpdate(update)
        threading.Thread(target=run, daemon=True).start()

    def frameworkMessage(self, driver, message):
        driver.sendFrameworkMessage(message)  # pymesos hands it over still base64-encoded

    def launchTaskGroup(self, driver, tasks):
        for task in tasks:
            self.launchTask(driver, task)


MesosExecutorDriver(Echo(), use_addict=True).run()
'''


async def test_pymesos_custom_executor_runs_a_task(master: Any, make_agent: Any, tmp_path: Path) -> None:
    script = tmp_path / "echo_executor.py"
    script.write_text(EXECUTOR)
    agent = await make_agent(executor_shutdown_grace=1.0)
    await master.wait_connected()
    ex = ExecutorInfo(
        executor_id=ExecutorID("echo"),
        type=ExecutorType.CUSTOM,
        command=CommandInfo(value=f"{sys.executable} {script}"),
    )
    task = TaskInfo(name="x", task_id=TaskID("x1"), executor=ex, resources=Resources.of(cpus=0.1, mem=32).to_mesos())
    await master.send(RunTasks(FrameworkID("fw1"), master.framework, (task,)))
    st = await master.wait_terminal("x1", within=60)
    assert st.state is S.TASK_FINISHED
    assert master.states("x1") == [S.TASK_RUNNING, S.TASK_FINISHED]
    assert st.agent_id is not None and st.agent_id.value == "agent-1"
    assert st.source is not None and st.source.name == "SOURCE_EXECUTOR"
    await master.send(FrameworkMessageMsg(FrameworkID("fw1"), ExecutorID("echo"), b"ping \x00\xff"))
    echoed = await master.wait_for(lambda: [o for o in master.other if isinstance(o, ExecutorMessageMsg)])
    assert echoed[0].data == b"ping \x00\xff" and echoed[0].executor_id.value == "echo"
    await master.send(ShutdownExecutor(FrameworkID("fw1"), ExecutorID("echo")))
    exited = await master.wait_for(lambda: [o for o in master.other if isinstance(o, ExecutorExited)], within=30)
    assert exited[0].executor_id.value == "echo"
    await master.wait_for(lambda: not agent.launcher.pids())


async def test_launch_group_runs_all_tasks_under_one_executor(master: Any, make_agent: Any, tmp_path: Path) -> None:
    script = tmp_path / "echo_executor.py"
    script.write_text(EXECUTOR)
    agent = await make_agent(executor_shutdown_grace=1.0)
    await master.wait_connected()
    ex = ExecutorInfo(
        executor_id=ExecutorID("grp"), type=ExecutorType.CUSTOM, command=CommandInfo(value=f"{sys.executable} {script}")
    )
    tasks = tuple(TaskInfo(name=t, task_id=TaskID(t), resources=Resources.of(cpus=0.1, mem=16).to_mesos()) for t in ("g1", "g2"))
    await master.send(RunTasks(FrameworkID("fw1"), master.framework, tasks, executor=ex, group=True))
    for t in ("g1", "g2"):
        assert (await master.wait_terminal(t, within=60)).state is S.TASK_FINISHED
    assert len([k for k in agent.launcher.pids() if k.startswith("e/")]) <= 1  # one executor process
    await master.send(ShutdownExecutor(FrameworkID("fw1"), ExecutorID("grp")))
    await master.wait_for(lambda: [o for o in master.other if isinstance(o, ExecutorExited)], within=30)


async def test_invalid_group_fails_every_task(master: Any, make_agent: Any) -> None:
    await make_agent()
    await master.wait_connected()
    ex = ExecutorInfo(executor_id=ExecutorID("grp"), type=ExecutorType.CUSTOM, command=CommandInfo(value="true"))
    tasks = (TaskInfo(name="ok", task_id=TaskID("ok")), TaskInfo(name="bad", task_id=TaskID("../bad")))
    await master.send(RunTasks(FrameworkID("fw1"), master.framework, tasks, executor=ex, group=True))
    assert (await master.wait_terminal("ok")).state is S.TASK_ERROR
    assert (await master.wait_terminal("../bad")).state is S.TASK_ERROR


async def test_executor_that_dies_fails_its_task(master: Any, make_agent: Any) -> None:
    await make_agent()
    await master.wait_connected()
    ex = ExecutorInfo(executor_id=ExecutorID("dies"), type=ExecutorType.CUSTOM, command=CommandInfo(value="exit 3"))
    task = TaskInfo(name="y", task_id=TaskID("y1"), executor=ex)
    await master.send(RunTasks(FrameworkID("fw1"), master.framework, (task,)))
    st = await master.wait_terminal("y1")
    assert st.state is S.TASK_FAILED and st.reason is not None and st.reason.name == "REASON_EXECUTOR_TERMINATED"


async def test_fixed_estimator_reports_slack_once(master: Any, make_agent: Any) -> None:
    await make_agent(resource_estimator="fixed", oversubscribed="cpus:2", estimate_interval=0.1)
    await master.wait_connected()
    est = await master.wait_for(lambda: [o for o in master.other if isinstance(o, SlackEstimate)])
    r = Resources.from_mesos(est[0].resources)
    assert r == Resources.of(cpus=2).as_revocable()
    await master.run("t", "true")  # some traffic and several estimate periods
    await master.wait_terminal("t")
    assert len([o for o in master.other if isinstance(o, SlackEstimate)]) == 1  # only on change


async def test_qos_load_controller_evicts_revocable_tasks_only(master: Any, make_agent: Any) -> None:
    # threshold 0: any load at all counts as overload, so the controller evicts at once
    await make_agent(qos_controller="load", qos_threshold=0.0, qos_window=0.0, estimate_interval=0.1)
    await master.wait_connected()
    await master.run("regular", "sleep 60")
    await master.run("rev", "sleep 60", revocable=True)
    st = await master.wait_terminal("rev")
    assert st.state is S.TASK_KILLED and st.reason is not None and st.reason.name == "REASON_CONTAINER_PREEMPTED"
    assert "QoS" in (st.message or "")
    assert master.terminal("regular") is None
    await master.kill("regular", 0.1)
    await master.wait_terminal("regular")


CHECKPOINTING_EXECUTOR = '''
import threading, time
from addict import Dict
from pymesos import Executor, MesosExecutorDriver


def send(driver, task_id, state):
    update = Dict()
    update.task_id.value = task_id
    update.state = state
    update.timestamp = time.time()
    driver.sendStatusUpdate(update)


class Worker(Executor):
    """"long*" tasks run until killed; others finish at once."""

    def launchTask(self, driver, task):
        tid = task.task_id.value
        def run():
            send(driver, tid, "TASK_RUNNING")
            if not task.name.startswith("long"):
                send(driver, tid, "TASK_FINISHED")
        threading.Thread(target=run, daemon=True).start()

    def killTask(self, driver, task_id):
        send(driver, task_id.value, "TASK_KILLED")


MesosExecutorDriver(Worker(), use_addict=True).run()
'''


def _checkpointing_worker(master: Any, tmp_path: Path) -> Callable[[str], TaskInfo]:
    """The master's framework checkpoints; returns a factory of tasks for the CHECKPOINTING_EXECUTOR
    (executor "worker", written under tmp_path)."""
    import attrs

    script = tmp_path / "worker_executor.py"
    script.write_text(CHECKPOINTING_EXECUTOR)
    master.framework = attrs.evolve(master.framework, checkpoint=True)
    ex = ExecutorInfo(
        executor_id=ExecutorID("worker"), type=ExecutorType.CUSTOM, command=CommandInfo(value=f"{sys.executable} {script}")
    )

    def task(tid: str) -> TaskInfo:
        return TaskInfo(name=tid, task_id=TaskID(tid), executor=ex, resources=Resources.of(cpus=0.1, mem=32).to_mesos())

    return task


async def _runs_new_and_kills_old(master: Any, task: Callable[[str], TaskInfo]) -> None:
    """The re-attached "worker" executor runs a new task ("short-2") to its end, still owns
    (and kills) its old one ("long-1", never LOST), and exits when shut down."""
    await master.send(RunTasks(FrameworkID("fw1"), master.framework, (task("short-2"),)))
    assert (await master.wait_terminal("short-2", within=60)).state is S.TASK_FINISHED
    await master.kill("long-1")
    assert (await master.wait_terminal("long-1", within=30)).state is S.TASK_KILLED
    assert master.states("long-1") == [S.TASK_RUNNING, S.TASK_KILLED]  # never LOST
    await master.send(ShutdownExecutor(FrameworkID("fw1"), ExecutorID("worker")))
    await master.wait_for(lambda: [o for o in master.other if isinstance(o, ExecutorExited)], within=30)


async def test_a_checkpointing_executor_resubscribes_after_an_agent_restart(
    master: Any, make_agent: Any, tmp_path: Path
) -> None:
    """Mesos agent recovery for custom executors: the executor outlives the agent, SUBSCRIBEs
    again (pymesos retries when MESOS_CHECKPOINT is set) and keeps its task; nothing is LOST."""
    import psutil

    task = _checkpointing_worker(master, tmp_path)
    agent = await make_agent(executor_shutdown_grace=1.0, executor_reregister_timeout=60.0)
    await master.wait_connected()
    await master.send(RunTasks(FrameworkID("fw1"), master.framework, (task("long-1"),)))
    await master.wait_state("long-1", S.TASK_RUNNING, within=60)
    (executor_pid,) = [pid for k, pid in agent.launcher.pids().items() if k.startswith("e/")]
    port = agent.port

    await agent.stop()  # the executor and its task live on
    agent = await make_agent(port=port, executor_shutdown_grace=1.0, executor_reregister_timeout=60.0)
    await master.wait_connected(2)
    await master.wait_for(lambda: agent.executor_api.subscribed("fw1", "worker"), within=60)
    assert psutil.pid_exists(executor_pid) and agent.tracker.get("fw1", "long-1").state is S.TASK_RUNNING
    assert any("executor fw1/worker: re-attached" in r for r in agent.recovery_report)

    # the re-attached executor takes new tasks, and its old task is still its own
    await _runs_new_and_kills_old(master, task)
    await master.wait_for(lambda: not psutil.pid_exists(executor_pid) or psutil.Process(executor_pid).status() == "zombie")


async def test_an_executor_that_does_not_resubscribe_is_killed_and_its_tasks_lost(
    master: Any, make_agent: Any, tmp_path: Path
) -> None:
    """A live executor process that never SUBSCRIBEs again within the timeout: its task is
    reported LOST (REASON_EXECUTOR_REREGISTRATION_TIMEOUT) and its process is killed."""
    import attrs
    import psutil

    master.framework = attrs.evolve(master.framework, checkpoint=True)
    agent = await make_agent(executor_reregister_timeout=0.5)
    await master.wait_connected()
    mute = ExecutorInfo(executor_id=ExecutorID("mute"), type=ExecutorType.CUSTOM, command=CommandInfo(value="sleep 60"))
    await master.send(RunTasks(FrameworkID("fw1"), master.framework, (TaskInfo(name="m", task_id=TaskID("m1"), executor=mute),)))
    pids = await master.wait_for(lambda: [pid for k, pid in agent.launcher.pids().items() if k.startswith("e/")])
    await agent.stop()
    agent = await make_agent(executor_reregister_timeout=0.5)
    await master.wait_connected(2)
    assert any("executor fw1/mute: re-attached" in r for r in agent.recovery_report)
    st = await master.wait_terminal("m1", within=30)
    assert st.state is S.TASK_LOST and st.reason is not None
    assert st.reason.name == "REASON_EXECUTOR_REREGISTRATION_TIMEOUT"
    await master.wait_for(lambda: [o for o in master.other if isinstance(o, ExecutorExited)], within=30)
    await master.wait_for(lambda: not psutil.pid_exists(pids[0]) or psutil.Process(pids[0]).status() == "zombie")


async def test_a_checkpointing_executor_survives_a_kill9_of_its_agent(
    master: Any, agent_procs: Any, tmp_path: Path
) -> None:
    """The same after a SIGKILL of the agent process: the restarted agent (same port) re-attaches
    the executor, which takes a new task and still owns (and kills) its old one."""
    import socket

    task = _checkpointing_worker(master, tmp_path)
    with socket.socket() as s:  # a port the restarted agent can bind again (executors dial it)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    agent = await agent_procs(None, "--port", str(port), "--executor-reregister-timeout", "60", fork=True).start()
    await master.wait_connected()
    await master.send(RunTasks(FrameworkID("fw1"), master.framework, (task("long-1"),)))
    await master.wait_state("long-1", S.TASK_RUNNING, within=60)
    await agent.kill9()
    await agent.start()
    await _runs_new_and_kills_old(master, task)


async def test_custom_executor_fetched_from_its_uris(master: Any, make_agent: Any, tmp_path: Path) -> None:
    """ExecutorInfo.command.uris are fetched into the executor's sandbox before it starts (the
    executor program itself here); a failed fetch fails its task with the fetcher's words."""
    from .fileserver import FileServer

    server = await FileServer().start()
    try:
        server.files["echo_executor.py"] = EXECUTOR.encode()
        await make_agent(executor_shutdown_grace=1.0)
        await master.wait_connected()
        ex = ExecutorInfo(executor_id=ExecutorID("fetched"), type=ExecutorType.CUSTOM, command=CommandInfo(
            value=f"{sys.executable} echo_executor.py", uris=(URI(server.url("/f/echo_executor.py")),)))
        await master.send(RunTasks(FrameworkID("fw1"), master.framework, (
            TaskInfo(name="x", task_id=TaskID("x1"), executor=ex, resources=Resources.of(cpus=0.1, mem=16).to_mesos()),)))
        assert (await master.wait_terminal("x1", within=60)).state is S.TASK_FINISHED
        missing = ExecutorInfo(executor_id=ExecutorID("nofile"), type=ExecutorType.CUSTOM, command=CommandInfo(
            value="./run", uris=(URI(server.url("/f/run")),)))
        await master.send(RunTasks(FrameworkID("fw1"), master.framework, (
            TaskInfo(name="y", task_id=TaskID("y1"), executor=missing, resources=Resources.of(cpus=0.1, mem=16).to_mesos()),)))
        st = await master.wait_terminal("y1")
        assert st.state is S.TASK_FAILED and st.message == (
            f"Failed to fetch all URIs for container 'nofile': Failed to fetch '{server.url('/f/run')}': "
            "Error downloading resource, received HTTP return code 404")
    finally:
        await server.stop()
