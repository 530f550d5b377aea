"""A kill the master sends because it drains the agent (``KillTask.reason`` REASON_AGENT_DRAINING):
SIGTERM, SIGKILL after the drain's grace, and TASK_KILLED with REASON_AGENT_DRAINING."""

from __future__ import annotations

from agent.tasks import (
    MASTER_KILL_REASONS,
    EmitStatus,
    Exited,
    KillReason,
    KillTask,
    LaunchTask,
    RecoveredTask,
    SignalTask,
    Spawned,
    TaskTracker,
    Tick,
    master_kill,
)
from agent.taskspec import CommandSpec, TaskSpec
from protocol import mesos
from protocol.task_states import TaskState as S


def spec(tid: str = "t1", grace: float | None = None) -> TaskSpec:
    return TaskSpec("f1", tid, tid, CommandSpec(argv=("/bin/sleep", "100")), grace=grace)


def running(tr: TaskTracker, s: TaskSpec) -> TaskTracker:
    tr.handle(LaunchTask(s), 0.0)
    tr.handle(Spawned(s.framework_id, s.task_id, 100), 0.0)
    return tr


def statuses(eff: list) -> list[tuple]:
    return [(e.state, e.reason) for e in eff if isinstance(e, EmitStatus)]


def test_the_masters_drain_reason_maps_to_the_draining_kill() -> None:
    assert MASTER_KILL_REASONS[mesos.Reason.REASON_AGENT_DRAINING.value] is KillReason.DRAINING
    assert MASTER_KILL_REASONS.get("") is None  # a framework's kill carries no reason
    drain = master_kill("f1", "t1", 2.0, mesos.Reason.REASON_AGENT_DRAINING.value)
    assert drain == KillTask("f1", "t1", 2.0, KillReason.DRAINING, "Agent draining (DRAIN_AGENT)")
    assert master_kill("f1", "t1", None, None) == KillTask("f1", "t1", None, KillReason.FRAMEWORK, None)


def test_drain_kill_terms_then_kills_after_the_grace_and_reports_agent_draining() -> None:
    tr = running(TaskTracker(), spec(grace=30.0))
    eff = tr.handle(KillTask("f1", "t1", 2.0, KillReason.DRAINING, "Agent draining (DRAIN_AGENT)"), 10.0)
    assert SignalTask("f1", "t1", "TERM") in eff
    assert tr.handle(Tick(), 11.9) == []  # still within the drain's grace
    assert SignalTask("f1", "t1", "KILL") in tr.handle(Tick(), 12.0)
    eff = tr.handle(Exited("f1", "t1", 137), 12.1)
    assert statuses(eff) == [(S.TASK_KILLED, "REASON_AGENT_DRAINING")]
    (st,) = [e for e in eff if isinstance(e, EmitStatus)]
    assert st.message == "Agent draining (DRAIN_AGENT)"


def test_a_drain_kill_with_zero_grace_kills_at_once() -> None:
    tr = running(TaskTracker(), spec())
    assert SignalTask("f1", "t1", "KILL") in tr.handle(KillTask("f1", "t1", 0.0, KillReason.DRAINING), 0.0)
    assert statuses(tr.handle(Exited("f1", "t1", 137), 0.1)) == [(S.TASK_KILLED, "REASON_AGENT_DRAINING")]


def test_a_drain_kill_under_way_when_the_agent_restarted_still_reports_draining() -> None:
    tr = TaskTracker()
    eff = tr.handle(
        RecoveredTask(spec(), S.TASK_RUNNING, True, False, exit_code=143, kill_reason=KillReason("DRAINING")), 0.0
    )
    assert statuses(eff) == [(S.TASK_KILLED, "REASON_AGENT_DRAINING")]
