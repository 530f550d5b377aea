"""A task killed because the operator drains its agent (TASK_KILLED, REASON_AGENT_DRAINING) is
run again, on the next offer, without counting a failure."""

from __future__ import annotations

from frameworks.batch.core import BatchCore, Launch
from frameworks.batch.model import JobSpec, JobState, TaskPhase
from frameworks.batch.planner import OfferView
from protocol.resources import Resources
from protocol.task_states import TaskState as S


def offer(oid: str, agent: str) -> OfferView:
    return OfferView(oid, agent, f"host-{agent}", "*", Resources.of(cpus=4, mem=1024))


def launched(effects: list[object]) -> list[tuple[str, str]]:
    return [(t.task_id, e.agent_id) for e in effects if isinstance(e, Launch) for t in e.tasks]


def test_a_drained_task_reruns_elsewhere_without_counting_a_failure() -> None:
    core = BatchCore()
    jid, _ = core.submit(JobSpec(name="j", argv=("sleep", "9"), cpus=1.0, mem=64.0, max_retries=0), now=0)
    assert launched(core.schedule([offer("o1", "a1")], now=0)) == [("j1-0-0", "a1")]
    core.on_update("j1-0-0", S.TASK_RUNNING, 0.5)
    core.on_update("j1-0-0", S.TASK_KILLED, 1.0, reason="REASON_AGENT_DRAINING")
    task = core.job(jid).tasks[0]
    # max_retries=0: had this counted as a failure, the job would have failed here
    assert task.phase is TaskPhase.PENDING and task.failures == 0 and task.not_before == 1.0
    assert core.job(jid).state is not JobState.FAILED
    # the drained agent is offered no more; the next offer is another agent's
    assert launched(core.schedule([offer("o2", "a2")], now=1.0)) == [("j1-0-1", "a2")]
    core.on_update("j1-0-1", S.TASK_RUNNING, 1.5)
    core.on_update("j1-0-1", S.TASK_FINISHED, 2.0)
    assert core.job(jid).state is JobState.SUCCEEDED


def test_a_kill_without_the_drain_reason_still_counts() -> None:
    core = BatchCore()
    jid, _ = core.submit(JobSpec(name="j", argv=("sleep", "9"), cpus=1.0, mem=64.0, max_retries=0), now=0)
    core.schedule([offer("o1", "a1")], now=0)
    core.on_update("j1-0-0", S.TASK_RUNNING, 0.5)
    core.on_update("j1-0-0", S.TASK_KILLED, 1.0)
    assert core.job(jid).tasks[0].phase is TaskPhase.FAILED
