"""The task tracker: every transition and what it commands."""

from __future__ import annotations

import attrs
import pytest

from agent.tasks import (
    CheckpointTask,
    DropTask,
    EmitStatus,
    ExecutorGone,
    ExecutorReregistered,
    ExecutorReregisterTimeout,
    ExecutorStarted,
    ExecutorStatus,
    ExecutorTerminated,
    Exited,
    Forget,
    HandToExecutor,
    KillReason,
    KillTask,
    KillViaExecutor,
    LaunchRejected,
    LaunchTask,
    LimitExceeded,
    RecoveredTask,
    ReleaseTask,
    ShutdownExecutorProcess,
    ShutdownFramework,
    SignalTask,
    Spawned,
    SpawnFailed,
    SpawnTask,
    StartExecutor,
    TaskTracker,
    Tick,
)
from agent.taskspec import CommandSpec, SpecError, TaskSpec, task_spec
from protocol.mesos import (
    CommandInfo,
    Environment,
    ExecutorInfo,
    ExecutorType,
    KillPolicy,
    TaskInfo,
    Variable,
)
from protocol.mesos_common import DurationInfo, ExecutorID, TaskID
from protocol.resources import Resources
from protocol.task_states import IllegalTransition
from protocol.task_states import TaskState as S


def spec(tid: str = "t1", grace: float | None = None, killing: bool = False, executor: str | None = None) -> TaskSpec:
    cmd = None if executor else CommandSpec(argv=("/bin/true",))
    return TaskSpec("f1", tid, tid, cmd, executor_id=executor, grace=grace, killing_state=killing)


def statuses(eff: list) -> list[tuple]:
    return [(e.state, e.reason) for e in eff if isinstance(e, EmitStatus)]


def running(tr: TaskTracker, s: TaskSpec | None = None) -> TaskTracker:
    s = s or spec()
    tr.handle(LaunchTask(s), 0.0)
    tr.handle(Spawned(s.framework_id, s.task_id, 100), 0.0)
    return tr


def test_launch_checkpoints_before_spawning_then_reports_running() -> None:
    tr = TaskTracker()
    eff = tr.handle(LaunchTask(spec()), 0.0)
    assert eff == [CheckpointTask(spec()), SpawnTask(spec())]
    assert tr.get("f1", "t1").state is S.TASK_STAGING  # type: ignore[union-attr]
    eff = tr.handle(Spawned("f1", "t1", 42), 0.0)
    assert statuses(eff) == [(S.TASK_RUNNING, None)]
    assert tr.handle(LaunchTask(spec()), 0.0) == []  # duplicate order ignored


@pytest.mark.parametrize(
    ("code", "state", "reason"),
    [
        (0, S.TASK_FINISHED, None),
        (3, S.TASK_FAILED, "REASON_COMMAND_EXECUTOR_FAILED"),
        (137, S.TASK_FAILED, "REASON_COMMAND_EXECUTOR_FAILED"),
        (None, S.TASK_FAILED, "REASON_EXECUTOR_TERMINATED"),
    ],
)
def test_exit_maps_to_terminal_state(code: int | None, state: S, reason: str | None) -> None:
    tr = running(TaskTracker())
    eff = tr.handle(Exited("f1", "t1", code), 1.0)
    assert statuses(eff) == [(state, reason)]
    st = next(e for e in eff if isinstance(e, EmitStatus))
    assert st.exit_code == code
    if code is not None:
        assert str(code) in (st.message or "")
    assert ReleaseTask("f1", "t1") in eff
    assert tr.handle(Exited("f1", "t1", 0), 2.0) == []  # exactly one terminal


def test_kill_with_grace_escalates_to_sigkill_and_reports_killed() -> None:
    tr = running(TaskTracker(default_grace=5.0))
    assert tr.handle(KillTask("f1", "t1", grace=2.0), 10.0) == [SignalTask("f1", "t1", "TERM")]
    assert tr.next_deadline() == 12.0
    assert tr.handle(Tick(), 11.9) == []
    assert tr.handle(Tick(), 12.0) == [SignalTask("f1", "t1", "KILL")]
    eff = tr.handle(Exited("f1", "t1", 137), 12.1)
    assert statuses(eff) == [(S.TASK_KILLED, None)]


def test_kill_uses_kill_policy_then_default_grace() -> None:
    tr = running(TaskTracker(default_grace=5.0), spec(grace=1.0))
    tr.handle(KillTask("f1", "t1"), 0.0)
    assert tr.next_deadline() == 1.0
    tr2 = running(TaskTracker(default_grace=5.0))
    tr2.handle(KillTask("f1", "t1"), 0.0)
    assert tr2.next_deadline() == 5.0


def test_zero_grace_kills_at_once() -> None:
    tr = running(TaskTracker())
    assert tr.handle(KillTask("f1", "t1", grace=0.0), 0.0) == [SignalTask("f1", "t1", "KILL")]


def test_killing_state_only_for_frameworks_that_ask() -> None:
    tr = running(TaskTracker(), spec(killing=True))
    eff = tr.handle(KillTask("f1", "t1", grace=1.0), 0.0)
    assert statuses(eff) == [(S.TASK_KILLING, None)]
    eff = tr.handle(Exited("f1", "t1", 143), 0.5)
    assert statuses(eff) == [(S.TASK_KILLED, None)]


def test_kill_during_launch_signals_once_spawned() -> None:
    tr = TaskTracker()
    tr.handle(LaunchTask(spec()), 0.0)
    assert tr.handle(KillTask("f1", "t1", grace=0.0), 0.0) == []
    eff = tr.handle(Spawned("f1", "t1", 7), 0.1)
    assert SignalTask("f1", "t1", "KILL") in eff
    assert statuses(tr.handle(Exited("f1", "t1", 137), 0.2)) == [(S.TASK_KILLED, None)]


def test_memory_limit_fails_with_container_limitation() -> None:
    tr = running(TaskTracker())
    eff = tr.handle(LimitExceeded("f1", "t1", "Memory limit exceeded: 300 MB > 100 MB"), 0.0)
    assert eff == [SignalTask("f1", "t1", "KILL")]
    eff = tr.handle(Exited("f1", "t1", 137), 0.1)
    assert statuses(eff) == [(S.TASK_FAILED, "REASON_CONTAINER_LIMITATION_MEMORY")]
    assert "Memory limit" in next(e for e in eff if isinstance(e, EmitStatus)).message  # type: ignore[operator]


def test_revocation_reports_preempted() -> None:
    tr = running(TaskTracker())
    tr.handle(KillTask("f1", "t1", grace=1.0, reason=KillReason.PREEMPTED), 0.0)
    eff = tr.handle(Exited("f1", "t1", 143), 0.5)
    assert statuses(eff) == [(S.TASK_KILLED, "REASON_CONTAINER_PREEMPTED")]


def test_framework_shutdown_kills_its_tasks_only() -> None:
    tr = running(TaskTracker())
    other = TaskSpec("f2", "x", "x", CommandSpec(argv=("/bin/true",)))
    running(tr, other)
    eff = tr.handle(ShutdownFramework("f1", grace=1.0), 0.0)
    assert eff == [SignalTask("f1", "t1", "TERM")]
    eff = tr.handle(Exited("f1", "t1", 143), 0.1)
    assert statuses(eff) == [(S.TASK_KILLED, "REASON_FRAMEWORK_REMOVED")]
    assert tr.get("f2", "x").state is S.TASK_RUNNING  # type: ignore[union-attr]


def test_spawn_failure_and_rejection() -> None:
    tr = TaskTracker()
    tr.handle(LaunchTask(spec()), 0.0)
    eff = tr.handle(SpawnFailed("f1", "t1", "No such file"), 0.0)
    assert statuses(eff) == [(S.TASK_FAILED, "REASON_CONTAINER_LAUNCH_FAILED")]
    eff = tr.handle(LaunchRejected("f1", "bad", "invalid task id"), 0.0)
    assert statuses(eff) == [(S.TASK_ERROR, "REASON_TASK_INVALID")]


def test_a_launch_refused_by_a_retiring_agent_is_dropped_unless_the_task_is_known() -> None:
    tr = running(TaskTracker())
    drop = "REASON_AGENT_REMOVED_BY_OPERATOR"
    eff = tr.handle(LaunchRejected("f1", "late", "retiring", None, drop, S.TASK_DROPPED), 0.0)
    assert statuses(eff) == [(S.TASK_DROPPED, drop)]
    assert tr.handle(LaunchRejected("f1", "t1", "retiring", None, drop, S.TASK_DROPPED), 0.0) == []
    assert tr.get("f1", "t1") is not None and tr.get("f1", "t1").state is S.TASK_RUNNING


def test_forget_drops_only_terminal_tasks() -> None:
    tr = running(TaskTracker())
    assert tr.handle(Forget("f1", "t1"), 0.0) == []
    tr.handle(Exited("f1", "t1", 0), 0.0)
    assert tr.handle(Forget("f1", "t1"), 0.0) == [DropTask("f1", "t1")]
    assert tr.get("f1", "t1") is None


def test_custom_executor_flow() -> None:
    tr = TaskTracker()
    s1, s2 = spec("a", executor="e1"), spec("b", executor="e1")
    eff = tr.handle(LaunchTask(s1), 0.0)
    assert eff == [CheckpointTask(s1), StartExecutor("f1", "e1", s1)]
    assert tr.handle(LaunchTask(s2), 0.0) == [CheckpointTask(s2)]  # queued until started
    assert tr.handle(ExecutorStarted("f1", "e1", 55), 0.0) == [HandToExecutor("f1", "e1", ("a", "b"))]
    assert tr.handle(ExecutorStatus("f1", "e1", "a", S.TASK_RUNNING), 0.0) == []
    assert tr.handle(ExecutorStatus("f1", "e1", "a", S.TASK_FINISHED), 0.0) == [ReleaseTask("f1", "a")]
    with pytest.raises(IllegalTransition):
        tr.handle(ExecutorStatus("f1", "e1", "a", S.TASK_RUNNING), 0.0)
    assert tr.handle(KillTask("f1", "b", grace=2.0), 0.0) == [KillViaExecutor("f1", "e1", "b", 2.0)]
    eff = tr.handle(ExecutorTerminated("f1", "e1", 0), 1.0)
    assert statuses(eff) == [(S.TASK_KILLED, None)]
    assert ExecutorGone("f1", "e1", 0) in eff


def test_executor_crash_fails_its_tasks_and_shutdown_reaches_executor() -> None:
    tr = TaskTracker()
    tr.handle(LaunchTask(spec("a", executor="e1")), 0.0)
    tr.handle(ExecutorStarted("f1", "e1", 55), 0.0)
    eff = tr.handle(ShutdownFramework("f1", grace=1.0), 0.0)
    assert eff == [ShutdownExecutorProcess("f1", "e1", 1.0)]
    tr2 = TaskTracker()
    tr2.handle(LaunchTask(spec("a", executor="e1")), 0.0)
    tr2.handle(ExecutorStarted("f1", "e1", 55), 0.0)
    eff = tr2.handle(ExecutorTerminated("f1", "e1", 1), 0.0)
    assert statuses(eff) == [(S.TASK_FAILED, "REASON_EXECUTOR_TERMINATED")]


def test_recovery_cases() -> None:
    tr = TaskTracker()
    # alive: re-attached silently
    assert tr.handle(RecoveredTask(spec("a"), S.TASK_RUNNING, True, True, pid=5), 0.0) == []
    assert tr.get("f1", "a").state is S.TASK_RUNNING  # type: ignore[union-attr]
    # alive but RUNNING never emitted: emit it now
    assert statuses(tr.handle(RecoveredTask(spec("b"), None, True, True, pid=6), 0.0)) == [(S.TASK_RUNNING, None)]
    # ended with a recorded exit status
    assert statuses(tr.handle(RecoveredTask(spec("c"), S.TASK_RUNNING, True, False, exit_code=0), 0.0)) == [
        (S.TASK_FINISHED, None)
    ]
    assert statuses(tr.handle(RecoveredTask(spec("d"), S.TASK_RUNNING, True, False, exit_code=2), 0.0)) == [
        (S.TASK_FAILED, "REASON_COMMAND_EXECUTOR_FAILED")
    ]
    # ended, nothing recorded
    assert statuses(tr.handle(RecoveredTask(spec("e"), S.TASK_RUNNING, True, False), 0.0)) == [
        (S.TASK_LOST, "REASON_AGENT_RESTARTED")
    ]
    # checkpointed but never spawned (R4): never RUNNING
    assert statuses(tr.handle(RecoveredTask(spec("f"), None, False, False), 0.0)) == [(S.TASK_LOST, "REASON_AGENT_RESTARTED")]
    # already terminal in the log: nothing new
    assert tr.handle(RecoveredTask(spec("g"), S.TASK_FINISHED, True, False, exit_code=0), 0.0) == []
    # was being killed when the agent died
    assert statuses(
        tr.handle(RecoveredTask(spec("h"), S.TASK_RUNNING, True, False, exit_code=143, kill_reason=KillReason.PREEMPTED), 0.0)
    ) == [(S.TASK_KILLED, "REASON_CONTAINER_PREEMPTED")]
    # alive and being killed: the kill starts over (its timer died with the agent)
    eff = tr.handle(RecoveredTask(spec("k", grace=2.0), S.TASK_RUNNING, True, True, pid=9, kill_reason=KillReason.FRAMEWORK), 5.0)
    assert eff == [SignalTask("f1", "k", "TERM")] and tr.next_deadline() == 7.0
    assert statuses(tr.recovered_broken(spec("i"), "corrupt task.json")) == [(S.TASK_LOST, "REASON_AGENT_RESTARTED")]


def test_task_spec_validation() -> None:
    ok = TaskInfo(
        name="n",
        task_id=TaskID("t1"),
        command=CommandInfo(value="echo hi", environment=Environment((Variable("A", "1"),))),
        resources=Resources.parse("cpus:1;mem:64").to_mesos(),
        kill_policy=KillPolicy(DurationInfo(2_000_000_000)),
    )
    s = task_spec("f1", ok)
    assert s.command is not None and s.command.argv == ("/bin/sh", "-c", "echo hi")
    assert s.command.environment == (("A", "1"),)
    assert s.mem_limit == 64 * 1024 * 1024 and s.grace == 2.0
    argv = task_spec("f1", TaskInfo(name="n", task_id=TaskID("t"), command=CommandInfo(value="/bin/echo", shell=False, arguments=("echo", "a;b"))))
    assert argv.command is not None and argv.command.argv == ("/bin/echo", "a;b")
    bad = [
        TaskInfo(name="n", task_id=TaskID("../x"), command=CommandInfo(value="true")),
        TaskInfo(name="n", task_id=TaskID("t"), command=CommandInfo(value="true", environment=Environment((Variable("LD_PRELOAD", "x"),)))),
        TaskInfo(name="n", task_id=TaskID("t"), command=CommandInfo(value="true", environment=Environment((Variable("A=B", "x"),)))),
        TaskInfo(name="n", task_id=TaskID("t"), command=CommandInfo(value="true", environment=Environment((Variable("A", "x\x00"),)))),
        TaskInfo(name="n", task_id=TaskID("t")),
        TaskInfo(name="n", task_id=TaskID("t"), command=CommandInfo(value="")),
    ]
    for info in bad:
        with pytest.raises(SpecError):
            task_spec("f1", info)
    ex = ExecutorInfo(executor_id=ExecutorID("e1"), type=ExecutorType.CUSTOM, command=CommandInfo(value="./exec"))
    es = task_spec("f1", TaskInfo(name="n", task_id=TaskID("t"), executor=ex))
    assert es.command is None and es.executor_id == "e1"


def test_a_re_attached_executor_keeps_its_tasks_and_gets_undelivered_ones_again() -> None:
    """After an agent restart a live executor's tasks are not LOST: they wait for its SUBSCRIBE;
    a task still STAGING that the executor does not list never reached it and is handed again."""
    tr = TaskTracker()
    assert tr.handle(RecoveredTask(spec("run", executor="e1"), S.TASK_RUNNING, True, True, pid=7), 0.0) == []
    assert tr.handle(RecoveredTask(spec("new", executor="e1"), None, True, True, pid=7), 0.0) == []
    assert tr.handle(RecoveredTask(spec("got", executor="e1"), None, True, True, pid=7), 0.0) == []
    assert tr.executors[("f1", "e1")].reregistering
    eff = tr.handle(ExecutorReregistered("f1", "e1", frozenset({"got"})), 1.0)
    assert eff == [HandToExecutor("f1", "e1", ("new",))]
    assert tr.handle(ExecutorReregisterTimeout("f1", "e1"), 5.0) == []  # back in time: nothing
    assert tr.handle(ExecutorStatus("f1", "e1", "run", S.TASK_FINISHED), 6.0) == [ReleaseTask("f1", "run")]
    assert tr.handle(ExecutorReregistered("f1", "e1"), 7.0) == []  # a later reconnect: no re-hand


def test_a_task_for_a_re_attached_executor_not_back_yet_is_handed_once() -> None:
    """Launched between the agent's restart and the executor's SUBSCRIBE: handed when it
    re-registers, not also at once (the queued LAUNCH was delivered first, the re-registration
    then handed it again, and pymesos' executor died on the duplicate: TASK_FAILED)."""
    tr = TaskTracker()
    tr.handle(RecoveredTask(spec("run", executor="e1"), S.TASK_RUNNING, True, True, pid=7), 0.0)
    assert tr.handle(LaunchTask(spec("late", executor="e1")), 1.0) == [CheckpointTask(spec("late", executor="e1"))]
    assert tr.handle(ExecutorReregistered("f1", "e1", frozenset()), 2.0) == [HandToExecutor("f1", "e1", ("late",))]
    eff = tr.handle(LaunchTask(spec("next", executor="e1")), 3.0)  # back: handed at once again
    assert HandToExecutor("f1", "e1", ("next",)) in eff


def test_an_executor_that_does_not_come_back_loses_its_tasks_and_is_killed() -> None:
    tr = TaskTracker()
    tr.handle(RecoveredTask(spec("a", executor="e1"), S.TASK_RUNNING, True, True, pid=7), 0.0)
    tr.handle(RecoveredTask(spec("b", executor="e1"), S.TASK_FINISHED, True, True, pid=7), 0.0)  # ended: resent
    eff = tr.handle(ExecutorReregisterTimeout("f1", "e1", "not back"), 2.0)
    assert statuses(eff) == [(S.TASK_LOST, "REASON_EXECUTOR_REREGISTRATION_TIMEOUT")]
    assert ShutdownExecutorProcess("f1", "e1", 0.0) in eff and ExecutorGone("f1", "e1", -1) in eff
    assert tr.handle(ExecutorTerminated("f1", "e1", 137), 3.0) == []  # its death reports nothing more
    assert tr.handle(ExecutorReregistered("f1", "e1"), 4.0) == []  # too late
    # an executor that is gone (not alive at recovery) loses its tasks at once, as before
    eff = TaskTracker().handle(RecoveredTask(spec("c", executor="e2"), S.TASK_RUNNING, False, False), 0.0)
    assert statuses(eff) == [(S.TASK_LOST, "REASON_AGENT_RESTARTED")]


# --- per-task state the tracker keeps for the shell -------------------------------------------


def test_started_at_is_set_when_the_process_starts_and_cleared_when_the_task_ends() -> None:
    tr = TaskTracker()
    tr.handle(LaunchTask(spec()), 1.0)
    assert tr.get("f1", "t1").started_at is None
    tr.handle(Spawned("f1", "t1", 42), 2.5)
    assert tr.get("f1", "t1").started_at == 2.5
    tr.handle(Exited("f1", "t1", 0), 3.0)
    assert tr.get("f1", "t1").started_at is None


def test_a_refused_launch_is_ephemeral_until_forgotten_and_drops_no_checkpoint() -> None:
    tr = TaskTracker()
    eff = tr.handle(LaunchRejected("f1", "bad", "invalid", None), 1.0)
    assert statuses(eff) == [(S.TASK_ERROR, "REASON_TASK_INVALID")]
    assert tr.ephemeral == {("f1", "bad")}
    assert tr.handle(Forget("f1", "bad"), 2.0) == [] and tr.ephemeral == set()


def test_a_refused_duplicate_of_a_known_task_leaves_the_task_checkpointed() -> None:
    tr = TaskTracker()
    tr.handle(LaunchTask(spec()), 1.0)
    assert tr.handle(LaunchRejected("f1", "t1", "invalid", None), 1.0) == []
    assert tr.ephemeral == set()


def test_a_corrupt_task_is_reported_lost_and_forgotten_without_a_checkpoint_drop() -> None:
    tr = TaskTracker()
    eff = tr.recovered_broken(spec("c"), "Agent restarted; corrupt checkpoint")
    assert statuses(eff) == [(S.TASK_LOST, "REASON_AGENT_RESTARTED")]
    assert tr.ephemeral == {("f1", "c")}
    assert tr.handle(Forget("f1", "c"), 2.0) == [] and tr.get("f1", "c") is None and tr.ephemeral == set()


def test_a_finished_task_is_dropped_from_the_checkpoint_when_forgotten() -> None:
    tr = TaskTracker()
    tr.handle(LaunchTask(spec()), 1.0)
    tr.handle(Spawned("f1", "t1", 42), 1.0)
    tr.handle(Exited("f1", "t1", 0), 2.0)
    assert tr.handle(Forget("f1", "t1"), 3.0) == [DropTask("f1", "t1")]


def test_a_launched_group_is_remembered_for_handing_over_and_a_recovered_one_is_not() -> None:
    tr = TaskTracker()
    tr.handle(LaunchTask(spec("a", executor="ex"), ("a", "b")), 1.0)
    assert tr.get("f1", "a").launch_group == ("a", "b")
    tr.handle(RecoveredTask(spec("r", executor="ex2"), S.TASK_RUNNING, True, True, pid=7), 1.0)
    assert tr.get("f1", "r").launch_group == () and tr.get("f1", "r").started_at == 1.0


def test_the_tracker_keeps_each_tasks_checking_state_and_decides_on_each_outcome() -> None:
    from agent.health import Outcome, Policy, Probe
    from agent.tasks import CheckOutcome, StartChecks
    from protocol.mesos import CheckStatusInfo, CheckStatusTcp, CheckType

    health = Policy(Probe("TCP", port=1), delay=0, interval=1, timeout=1, grace=0, consecutive_failures=2)
    check = Policy(Probe("TCP", port=2), delay=0, interval=1, timeout=1, health=False)
    tr = TaskTracker()
    s = attrs.evolve(spec(), health=health, check=check)
    tr.handle(LaunchTask(s), 1.0)
    assert StartChecks(s) in tr.handle(Spawned("f1", "t1", 42), 2.0)
    up = tr.handle(CheckOutcome("f1", "t1", True, Outcome(True)), 3.0)
    assert [(e.state, e.reason, e.healthy) for e in up if isinstance(e, EmitStatus)] == [
        (S.TASK_RUNNING, "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED", True)]
    assert tr.handle(CheckOutcome("f1", "t1", True, Outcome(True)), 4.0) == []  # a repeated success: nothing
    tcp = CheckStatusInfo(type=CheckType.TCP, tcp=CheckStatusTcp(True))
    changed = tr.handle(CheckOutcome("f1", "t1", False, Outcome(True, 1)), 4.0)
    assert [e.check_status for e in changed if isinstance(e, EmitStatus)] == [tcp]
    assert tr.handle(CheckOutcome("f1", "t1", False, Outcome(True, 1)), 5.0) == []  # unchanged
    tr.handle(Exited("f1", "t1", 0), 6.0)
    assert tr.get("f1", "t1").health_state is None and tr.get("f1", "t1").check_state is None
    assert tr.handle(CheckOutcome("f1", "t1", True, Outcome(False, why="x")), 7.0) == []
