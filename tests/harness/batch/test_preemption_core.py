"""Priority preemption through BatchCore: the exact tasks killed, reasons on both sides, the
victims requeued without a failure and run again after the preemptor, gangs evicted whole, the
per-queue setting, and a service restart in the middle of a preemption."""

from __future__ import annotations

from frameworks.batch.core import BatchCore, JobEvent, Kill, Launch
from frameworks.batch.model import JobSpec, JobState, TaskPhase
from frameworks.batch.planner import OfferView
from frameworks.batch.store import job_from_dict, job_to_dict
from protocol.resources import Resources
from protocol.task_states import TaskState

S = TaskState
PORTS = ((31000, 31099),)


def spec(**kw: object) -> JobSpec:
    base: dict[str, object] = {"name": "j", "argv": ("true",), "cpus": 1.0, "mem": 64.0}
    base.update(kw)
    return JobSpec(**base)  # type: ignore[arg-type]


def offer(agent: str, cpus: float) -> OfferView:
    res = Resources.of(cpus=cpus, mem=1024, ports=PORTS) if cpus else Resources.empty()
    return OfferView(f"o-{agent}", agent, f"host-{agent}", "*", res)


def launches(effects: list[object]) -> list[str]:
    return [t.task_id for e in effects if isinstance(e, Launch) for t in e.tasks]


def kills(effects: list[object]) -> list[tuple[str, str]]:
    return [(e.task_id, e.reason) for e in effects if isinstance(e, Kill)]


def start(core: BatchCore, effects: list[object], now: float) -> None:
    for tid in launches(effects):
        core.on_update(tid, S.TASK_RUNNING, now)


def test_a_high_priority_job_evicts_the_fewest_low_priority_tasks_which_run_again_after_it() -> None:
    core = BatchCore()
    low, _ = core.submit(spec(count=4, cpus=1, preemptible=True, priority=1), 0)
    start(core, core.schedule([offer("a", 4)], 1), 2)  # j1-0..3 fill agent a
    high, _ = core.submit(spec(cpus=2, priority=10, preempt=True), 3)
    eff = core.schedule([offer("a", 0)], 4)
    # two 1-cpu tasks make room for one 2-cpu task; the youngest go first (all started at 2: ties
    # to the lower index)
    assert kills(eff) == [("j1-0-0", "preempted by job 2"), ("j1-1-0", "preempted by job 2")]
    assert [e.detail for e in eff if isinstance(e, JobEvent) and e.kind == "preempted"] == [
        "task(s) 0, 1 preempted by job 2"
    ]
    assert core.job(high).reason == "preempting 2 task(s) of job(s) 1"
    # nothing more is chosen while the kills are under way
    assert kills(core.schedule([offer("a", 0)], 5)) == []
    core.on_update("j1-0-0", S.TASK_KILLED, 6)
    core.on_update("j1-1-0", S.TASK_KILLED, 6)
    job = core.job(low)
    assert [t.phase for t in job.tasks[:2]] == [TaskPhase.PENDING, TaskPhase.PENDING]
    assert [t.failures for t in job.tasks[:2]] == [0, 0]
    eff = core.schedule([offer("a", 2)], 7)  # the freed cpus came back into the offer
    assert launches(eff) == ["j2-0-0"]
    assert job.reason is not None and job.reason.startswith("preempted by job 2; ")
    start(core, eff, 8)
    core.on_update("j2-0-0", S.TASK_FINISHED, 9)
    assert core.job(high).state is JobState.SUCCEEDED
    assert launches(core.schedule([offer("a", 2)], 10)) == ["j1-0-1", "j1-1-1"]
    assert [c["what"] for c in job.changes] == ["task(s) 0, 1 preempted by job 2"]


def test_only_preemptible_lower_priority_tasks_of_the_same_queue_are_victims() -> None:
    core = BatchCore()
    core.submit(spec(cpus=2, priority=1), 0)  # not preemptible
    core.submit(spec(cpus=2, priority=20, preemptible=True), 0)  # higher than the preemptor
    start(core, core.schedule([offer("a", 4)], 1), 2)
    core.submit(spec(cpus=2, priority=10, preempt=True), 3)
    assert kills(core.schedule([offer("a", 0)], 4)) == []


def test_a_gang_is_evicted_whole_never_half() -> None:
    core = BatchCore()
    gang, _ = core.submit(spec(count=2, gang=2, cpus=2, preemptible=True), 0)
    start(core, core.schedule([offer("a", 2), offer("b", 2)], 1), 2)
    assert core.job(gang).tasks[0].phase is TaskPhase.RUNNING
    core.submit(spec(cpus=2, priority=5, preempt=True), 3)
    eff = core.schedule([offer("a", 0), offer("b", 0)], 4)
    assert sorted(kills(eff)) == [("j1-0-0", "preempted by job 2"), ("j1-1-0", "preempted by job 2")]
    core.on_update("j1-0-0", S.TASK_KILLED, 5)
    core.on_update("j1-1-0", S.TASK_KILLED, 5)
    job = core.job(gang)
    assert job.state is not JobState.FAILED
    assert [t.phase for t in job.tasks] == [TaskPhase.PENDING, TaskPhase.PENDING]
    assert [t.failures for t in job.tasks] == [0, 0]


def test_a_preempting_queue_makes_its_jobs_preempt() -> None:
    core = BatchCore(preempt_queues=("*",))
    core.submit(spec(cpus=4, preemptible=True), 0)
    start(core, core.schedule([offer("a", 4)], 1), 2)
    core.submit(spec(cpus=4, priority=3), 3)  # no --preempt: its queue preempts
    assert kills(core.schedule([offer("a", 0)], 4)) == [("j1-0-0", "preempted by job 2")]


def test_a_restart_in_the_middle_of_a_preemption_loses_nothing_and_evicts_no_more() -> None:
    core = BatchCore()
    core.submit(spec(count=2, cpus=2, preemptible=True), 0)
    start(core, core.schedule([offer("a", 4)], 1), 2)
    core.submit(spec(cpus=2, priority=9, preempt=True), 3)
    assert kills(core.schedule([offer("a", 0)], 4)) == [("j1-0-0", "preempted by job 2")]
    # the service stops before the kill is answered; a new one loads the store
    again = BatchCore()
    for jid in (1, 2):
        again.restore(job_from_dict(job_to_dict(core.job(jid))))
    assert kills(again.resume_kills()) == [("j1-0-0", "preempt (resent)")]
    assert kills(again.schedule([offer("a", 0)], 5)) == []  # still under way: no second victim
    again.on_update("j1-0-0", S.TASK_KILLED, 6)
    assert again.job(1).tasks[0].failures == 0 and again.job(1).tasks[0].phase is TaskPhase.PENDING
    assert launches(again.schedule([offer("a", 2)], 7)) == ["j2-0-0"]
    assert sorted(again.jobs) == [1, 2]


def test_a_jobs_own_preempt_evicts_only_its_owners_tasks_a_preempting_queue_anyones() -> None:
    """alice's --preempt job may not evict bob's preemptible tasks (his, however low their
    priority), only her own; in a queue the operator made preempting it evicts bob's."""
    core = BatchCore()
    core.submit(spec(cpus=2, preemptible=True), 0, user="bob")
    core.submit(spec(cpus=2, preemptible=True), 0, user="alice")
    start(core, core.schedule([offer("a", 4)], 1), 2)
    core.submit(spec(cpus=4, priority=10, preempt=True), 3, user="alice")
    assert kills(core.schedule([offer("a", 0)], 4)) == []  # 2 cpus of hers would not be enough
    core.submit(spec(cpus=2, priority=10, preempt=True), 5, user="alice")
    assert kills(core.schedule([offer("a", 0)], 6)) == [("j2-0-0", "preempted by job 4")]

    ops = BatchCore(preempt_queues=("*",))
    ops.submit(spec(cpus=2, preemptible=True), 0, user="bob")
    start(ops, ops.schedule([offer("a", 2)], 1), 2)
    ops.submit(spec(cpus=2, priority=10), 3, user="alice")
    assert kills(ops.schedule([offer("a", 0)], 4)) == [("j1-0-0", "preempted by job 2")]


def test_victims_on_an_agent_without_an_offer_are_evicted_all_the_same() -> None:
    """The agent is full: its leftover offer (no cpus) was declined and the master offers nothing
    without cpus. The preemptor still gets its victim there; the freed cpus come back offered."""
    core = BatchCore()
    core.submit(spec(count=2, cpus=1, preemptible=True, priority=1), 0)
    start(core, core.schedule([offer("a", 2)], 1), 2)
    high, _ = core.submit(spec(cpus=1, priority=10, preempt=True), 3)
    eff = core.schedule([], 4)
    assert kills(eff) == [("j1-0-0", "preempted by job 2")]  # started together: the lower index
    assert core.job(high).reason == "preempting 1 task(s) of job(s) 1"
    core.on_update("j1-0-0", S.TASK_KILLED, 5)
    assert launches(core.schedule([offer("a", 1)], 6)) == ["j2-0-0"]
