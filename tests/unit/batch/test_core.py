"""BatchCore: submissions become launches; updates drive task and job states; retries, time
limits, cancel, dependencies, preemption, suppress/revive, demands."""

from __future__ import annotations

import pytest

from frameworks.batch.core import (
    BatchCore,
    BatchError,
    DeclareDemand,
    Decline,
    JobRecord,
    Kill,
    Launch,
    Revive,
    Suppress,
    worth_declaring,
)
from frameworks.batch.model import JOB_TERMINAL, Dependency, DependencyKind, JobSpec, JobState, TaskPhase
from frameworks.batch.planner import OfferView
from frameworks.client.demand import Demand
from protocol.resources import Resources
from protocol.task_states import TaskState

from .walk import CoreWalk

S = TaskState


def spec(**kw: object) -> JobSpec:
    base: dict[str, object] = {"name": "j", "argv": ("true",), "cpus": 1.0, "mem": 64.0}
    base.update(kw)
    return JobSpec(**base)  # type: ignore[arg-type]


def offer(oid: str = "o1", cpus: float = 4, mem: float = 1024, role: str = "*") -> OfferView:
    return OfferView(
        oid, f"agent-{oid}", f"host-{oid}", role, Resources.of(cpus=cpus, mem=mem, ports=((31000, 31099),))
    )


def launches(effects: list[object]) -> list[str]:
    return [t.task_id for e in effects if isinstance(e, Launch) for t in e.tasks]


def run(core: BatchCore, task_id: str, now: float, state: TaskState = S.TASK_FINISHED, **kw: object) -> list[object]:
    core.on_update(task_id, S.TASK_RUNNING, now)
    return core.on_update(task_id, state, now + 1, **kw)  # type: ignore[arg-type]


def test_array_job_runs_to_success() -> None:
    core = BatchCore()
    jid, eff = core.submit(spec(count=3), now=0)
    eff = core.schedule([offer(cpus=2)], now=0)
    assert launches(eff) == ["j1-0-0", "j1-1-0"]
    assert core.job(jid).reason == "2 of 3 pending tasks placed; waiting for 1 cpus; largest free offer has 0"
    core.on_update("j1-0-0", S.TASK_RUNNING, 1)
    assert core.job(jid).state is JobState.RUNNING
    core.on_update("j1-0-0", S.TASK_FINISHED, 2)
    run(core, "j1-1-0", 2)
    assert launches(core.schedule([offer(cpus=2)], now=3)) == ["j1-2-0"]
    run(core, "j1-2-0", 4)
    job = core.job(jid)
    assert job.state is JobState.SUCCEEDED and job.ended_at == 5
    assert [t.phase for t in job.tasks] == [TaskPhase.SUCCEEDED] * 3


def test_failures_retry_with_backoff_then_fail_the_job() -> None:
    core = BatchCore()
    jid, _ = core.submit(spec(max_retries=1), now=0)
    core.schedule([offer()], now=0)
    run(core, "j1-0-0", 0, S.TASK_FAILED, exit_code=3, message="exit 3")
    task = core.job(jid).tasks[0]
    assert task.phase is TaskPhase.PENDING and task.attempt == 1 and task.not_before == 2.0
    assert core.job(jid).state is JobState.PENDING
    assert launches(core.schedule([offer()], now=1.5)) == []
    assert core.job(jid).reason == "retry in 0.5s"
    assert core.next_wakeup(1.5) == 2.0
    assert launches(core.schedule([offer()], now=2)) == ["j1-0-1"]
    run(core, "j1-0-1", 2, S.TASK_FAILED, exit_code=1)
    job = core.job(jid)
    assert job.state is JobState.FAILED and job.reason == "1 of 1 tasks failed"
    assert [(a.task_id, a.exit_code) for a in job.tasks[0].history] == [("j1-0-0", 3), ("j1-0-1", 1)]


def test_a_retry_seen_a_moment_early_is_still_due_after_the_round() -> None:
    # The round ran just before the retry was due ("retry in 0.0s", the offers kept); by the
    # time the loop asks when to wake, it is due: it must wake now, not wait for some other
    # event (it waited for the master's 30 s idle-offer timeout on a loaded CI machine).
    core = BatchCore()
    jid, _ = core.submit(spec(max_retries=1), now=0)
    core.schedule([offer()], now=0)
    run(core, "j1-0-0", 0, S.TASK_FAILED, exit_code=3)
    assert launches(core.schedule([offer()], now=1.9999)) == []
    assert core.job(jid).reason == "retry in 0.0s"
    assert core.next_wakeup(2.0001) == 2.0
    assert launches(core.schedule([offer()], now=2.0001)) == ["j1-0-1"]
    assert core.next_wakeup(2.0002) is None


def test_a_time_limit_being_enforced_does_not_wake_the_loop_again() -> None:
    core = BatchCore()
    core.submit(spec(time_limit=10), now=0)
    core.schedule([offer()], now=0)
    core.on_update("j1-0-0", S.TASK_RUNNING, 1, agent_id="a1")
    assert core.next_wakeup(5) == 11
    assert core.tick(11) == [Kill("j1-0-0", "a1", "time limit of 10s exceeded")]
    assert core.next_wakeup(12) is None  # the kill is under way: no busy loop until it ends


def test_stale_updates_from_an_old_attempt_are_ignored() -> None:
    core = BatchCore()
    core.submit(spec(max_retries=2), now=0)
    core.schedule([offer()], now=0)
    run(core, "j1-0-0", 0, S.TASK_LOST)
    assert core.on_update("j1-0-0", S.TASK_FINISHED, 5) == []
    assert core.on_update("garbage", S.TASK_FINISHED, 5) == []


def test_time_limit_kills_and_counts_as_failure() -> None:
    core = BatchCore()
    jid, _ = core.submit(spec(time_limit=10), now=0)
    core.schedule([offer()], now=0)
    core.on_update("j1-0-0", S.TASK_RUNNING, 1, agent_id="a1")
    assert core.tick(5) == []
    assert core.next_wakeup(5) == 11
    assert core.tick(11) == [Kill("j1-0-0", "a1", "time limit of 10s exceeded")]
    assert core.tick(12) == []  # not twice
    core.on_update("j1-0-0", S.TASK_KILLED, 12)
    job = core.job(jid)
    assert job.state is JobState.FAILED
    assert job.tasks[0].history[0].message == "time limit of 10s exceeded"


def test_cancel_kills_running_and_drops_pending() -> None:
    core = BatchCore()
    jid, _ = core.submit(spec(count=2), now=0)
    core.schedule([offer(cpus=1)], now=0)
    core.on_update("j1-0-0", S.TASK_RUNNING, 1, agent_id="a1")
    eff = core.cancel(jid, now=2)
    assert Kill("j1-0-0", "a1", "job cancelled") in eff
    assert core.job(jid).state is JobState.CANCELLED
    core.on_update("j1-0-0", S.TASK_KILLED, 3)
    assert [t.phase for t in core.job(jid).tasks] == [TaskPhase.CANCELLED, TaskPhase.CANCELLED]


def test_dependencies_wait_then_run_or_cancel() -> None:
    core = BatchCore()
    a, _ = core.submit(spec(), now=0)
    b, _ = core.submit(spec(after=(Dependency(a),)), now=0)
    c, _ = core.submit(spec(after=(Dependency(b, DependencyKind.ANY),)), now=0)
    assert core.job(c).state is JobState.PENDING
    assert launches(core.schedule([offer()], now=0)) == ["j1-0-0"]
    assert core.job(b).reason == "after job 1"
    run(core, "j1-0-0", 0, S.TASK_FAILED)
    # b needed a's success: it can never run, and c (after any end of b) then runs.
    assert core.job(b).state is JobState.CANCELLED
    assert core.job(b).reason == "dependency job 1 failed"
    assert launches(core.schedule([offer()], now=2)) == ["j3-0-0"]


def test_a_dependency_on_a_job_that_does_not_exist_is_refused_and_spends_no_id() -> None:
    core = BatchCore()
    a, _ = core.submit(spec(), now=0)
    with pytest.raises(BatchError, match=r"^after: no job 99$"):
        core.submit(spec(after=(Dependency(99), Dependency(a), Dependency(7, DependencyKind.ANY))), now=0)
    assert sorted(core.jobs) == [a]
    b, _ = core.submit(spec(after=(Dependency(a),)), now=0)
    assert b == a + 1


def test_a_job_after_one_that_already_failed_is_cancelled_with_all_its_tasks() -> None:
    core = BatchCore()
    a, _ = core.submit(spec(), now=0)
    core.schedule([offer()], now=0)
    run(core, "j1-0-0", 0, S.TASK_FAILED)
    b, _ = core.submit(spec(count=2, after=(Dependency(a),)), now=2)
    job = core.job(b)
    assert job.state is JobState.CANCELLED and job.reason == "dependency job 1 failed"
    assert job.counts() == {"CANCELLED": 2} and not job.pending  # not "CA ... pending:2"


def test_preempted_task_is_rescheduled_without_counting_a_failure() -> None:
    core = BatchCore()
    jid, _ = core.submit(spec(preemptible=True), now=0)
    core.schedule([offer()], now=0)
    run(core, "j1-0-0", 0, S.TASK_KILLED, reason="REASON_CONTAINER_PREEMPTED")
    task = core.job(jid).tasks[0]
    assert task.phase is TaskPhase.PENDING and task.failures == 0 and task.not_before == 1
    assert launches(core.schedule([offer()], now=1)) == ["j1-0-1"]


def test_suppress_when_idle_and_revive_on_submit_and_decline_unused() -> None:
    core = BatchCore()
    eff = core.schedule([offer()], now=0)
    assert Suppress() in eff and Decline(("o1",), 5.0) in eff
    _, eff = core.submit(spec(), now=1)
    assert Revive() in eff


def test_a_retry_revives_offers_after_suppress() -> None:
    core = BatchCore()
    core.submit(spec(max_retries=1), now=0)
    eff = core.schedule([offer()], now=0)
    assert launches(eff) == ["j1-0-0"] and Suppress() in eff
    run(core, "j1-0-0", 0, S.TASK_FAILED, exit_code=1)
    eff = core.schedule([], now=1.5)
    assert Revive() in eff
    assert launches(core.schedule([offer()], now=2)) == ["j1-0-1"]


def test_gang_demand_and_hold_timeout_cooldown() -> None:
    core = BatchCore(gang_timeout=30)
    jid, _ = core.submit(spec(cpus=2, count=4, gang=4), now=0)
    eff = core.schedule([offer(cpus=4)], now=0)
    demand = next(e for e in eff if isinstance(e, DeclareDemand))
    key, d = demand.demands[0]
    assert key == "job-1" and d.gang_id == "job-1" and d.gang_min == 4 and d.count == 4 and d.role == "*"
    assert not any(isinstance(e, Decline) for e in eff)  # the offer is held for the gang
    assert core.job(jid).hold_since == 0
    assert core.next_wakeup(1) == 30  # the hold's end wakes the loop
    assert core.tick(31) == []  # a round without a schedule (the driver is disconnected) ...
    assert core.next_wakeup(31.5) is None  # ... leaves the release to the next schedule: no busy loop
    eff = core.schedule([offer(cpus=4)], now=31)
    assert Decline(("o1",), 5.0) in eff
    assert core.job(jid).hold_since is None
    core.schedule([offer(cpus=4)], now=32)
    assert core.job(jid).reason == "gang hold released; waiting before holding again"
    assert core.next_wakeup(32) == 61  # the end of the cooldown wakes the scheduling loop
    core.schedule([offer(cpus=4)], now=60.9999)  # a moment early: still cooling down
    assert core.next_wakeup(61.0001) == 61  # so it is still due after that round
    eff = core.schedule([offer(cpus=8)], now=62)
    assert launches(eff) == ["j1-0-0", "j1-1-0", "j1-2-0", "j1-3-0"]


def test_a_dropped_launch_is_relaunched_without_spending_a_retry() -> None:
    core = BatchCore()
    jid, _ = core.submit(spec(), now=0)
    core.schedule([offer()], now=0)
    core.on_update("j1-0-0", S.TASK_DROPPED, 1, reason="REASON_INVALID_OFFERS")
    task = core.job(jid).tasks[0]
    assert task.phase is TaskPhase.PENDING and task.failures == 0 and task.relaunches == 1
    assert launches(core.schedule([offer()], now=1)) == ["j1-0-1"]
    # Once it has run, a loss is a failure like any other.
    core.on_update("j1-0-1", S.TASK_RUNNING, 2)
    core.on_update("j1-0-1", S.TASK_LOST, 3)
    assert core.job(jid).state is JobState.FAILED


def test_a_launch_that_was_not_sent_goes_back_to_pending() -> None:
    core = BatchCore()
    jid, _ = core.submit(spec(count=2), now=0)
    assert launches(core.schedule([offer(cpus=1)], now=0)) == ["j1-0-0"]
    core.launch_not_sent(["j1-0-0", "unknown"], now=1)
    task = core.job(jid).tasks[0]
    assert task.phase is TaskPhase.PENDING and task.history == [] and task.failures == 0
    assert launches(core.schedule([offer(cpus=2)], now=1)) == ["j1-0-0", "j1-1-0"]


def test_phase_counts_stay_equal_to_a_full_recount() -> None:
    core = BatchCore()
    jid, _ = core.submit(spec(count=4, max_retries=1), now=0)
    core.schedule([offer(cpus=3)], now=0)
    run(core, "j1-0-0", 0, S.TASK_FAILED)
    run(core, "j1-1-0", 0)
    core.on_update("j1-2-0", S.TASK_DROPPED, 1)
    job = core.job(jid)
    incremental = job.counts()
    job.recount()
    assert incremental == job.counts() == {"PENDING": 3, "SUCCEEDED": 1}


def test_a_task_finished_without_a_running_update_still_succeeds_the_job() -> None:
    core = BatchCore()
    jid, _ = core.submit(spec(), now=0)
    core.schedule([offer()], now=0)
    core.on_update("j1-0-0", S.TASK_FINISHED, 1)
    job = core.job(jid)
    assert job.state is JobState.SUCCEEDED and job.started_at == 1 and job.ended_at == 1


@pytest.mark.parametrize("seed", range(4))
def test_the_job_indexes_always_equal_a_full_recount(seed: int) -> None:
    walk = CoreWalk(seed)
    seen: set[str] = set()
    for _ in range(300):
        walk.step()
        for job in walk.core.jobs.values():
            seen.update(job.counts())
            seen.add(job.state.value)
            seen.update("backoff" for _ in job.backoff)
            kept = (job.counts(), job.pending, job.backoff - _due(job, walk.now), job.pending_failed, job.active)
            job.recount()
            assert kept == (job.counts(), job.pending, job.backoff - _due(job, walk.now), job.pending_failed, job.active)
        live = {j.job_id for j in walk.core.jobs.values() if j.state not in JOB_TERMINAL}
        assert set(walk.core.live) == live
    assert seen >= {"PENDING", "LAUNCHING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "backoff"}


def _due(job: JobRecord, now: float) -> set[int]:
    """Backoff entries whose time has come (the core drops them lazily)."""
    return {i for i in job.backoff if job.tasks[i].not_before <= now}


def test_an_arrays_shrinking_demand_is_declared_when_it_halves() -> None:
    core = BatchCore()
    core.submit(spec(count=16), now=0)
    declared: list[tuple[int, ...]] = []
    for i in range(17):
        eff = core.schedule([offer(f"o{i}", cpus=1)], now=i)
        declared += [tuple(d.count for _, d in e.demands) for e in eff if isinstance(e, DeclareDemand)]
    assert declared == [(16,), (8,), (4,), (2,), (1,), ()]


def test_worth_declaring() -> None:
    def d(count: int, **kw: object) -> tuple[tuple[str, Demand], ...]:
        return (("job-1", Demand(shape=Resources.of(cpus=1), count=count, **kw)),)  # type: ignore[arg-type]

    assert not worth_declaring(d(10), d(10))
    assert not worth_declaring(d(10), d(6))  # shrinking, not yet halved
    assert worth_declaring(d(10), d(5))
    assert worth_declaring(d(10), d(11))  # growth at once
    assert worth_declaring(d(10), d(9, priority=3))  # any other change at once
    assert worth_declaring(d(4, gang_id="g", gang_min=4), d(3, gang_id="g", gang_min=3))
    assert worth_declaring(d(10), ())
    assert worth_declaring((), d(1))
    assert worth_declaring(d(10), (("job-2", d(10)[0][1]),))


def test_an_offer_with_every_resource_in_use_is_kept_not_declined() -> None:
    core = BatchCore()
    jid, _ = core.submit(spec(count=2), now=0)
    busy = OfferView("o1", "agent-o1", "host-o1", "*", Resources.empty())
    eff = core.schedule([busy, offer("o2", cpus=0.5)], now=0)
    assert Decline(("o2",), 5.0) in eff
    assert not any(isinstance(e, Decline) and "o1" in e.offer_ids for e in eff)
    # o2 is declined in this round: the reason does not quote it ("largest free offer has 0.5")
    assert core.job(jid).reason == "all held resources in use"
    core.schedule([busy], now=1)
    assert core.job(jid).reason == "all held resources in use"


def test_a_waiting_gang_keeps_offers_on_agents_where_our_tasks_run() -> None:
    core = BatchCore()
    core.submit(spec(count=5, gang=5), now=0)
    core.submit(spec(count=5, gang=5), now=0)
    # The first gang takes all of o1 and one cpu of o2; the second holds the rest of o2.
    eff = core.schedule([offer("o1", cpus=4), offer("o2", cpus=4)], now=0)
    assert len(launches(eff)) == 5
    for i in range(5):
        core.on_update(f"j1-{i}-0", S.TASK_RUNNING, 1)
    left = [offer("o1", cpus=0.5), offer("o2", cpus=3)]
    eff = core.schedule(left, now=1)
    assert core.job(2).reason == "gang 3/5 placed; waiting for 1 cpus; largest free offer has 0.5"
    # o1 (0.5 cpus left; the first gang runs there) is kept: it grows back as those tasks end.
    assert not any(isinstance(e, Decline) for e in eff)
    for i in range(5):
        core.on_update(f"j1-{i}-0", S.TASK_FINISHED, 2)
    assert launches(core.schedule([offer("o1", cpus=4), offer("o2", cpus=4)], now=2)) == [
        f"j2-{i}-0" for i in range(5)
    ]
    # Without a gang holding, an idle offer is declined as before.
    core.submit(spec(count=1, cpus=8), now=3)
    eff = core.schedule([offer("o3", cpus=1)], now=3)
    assert Decline(("o3",), 5.0) in eff


def test_a_whole_gang_never_runs_part_of_itself_after_a_failure() -> None:
    """Random runs with gangs (abort, restart, continue): while a gang restarts or aborts, every
    rank still running is being killed; an aborting gang has nothing pending and fails only once
    no rank runs."""
    seen: set[str] = set()
    for seed in range(8):
        _gang_walk(seed, seen)
    assert {"regrouping", "aborting", "aborted"} <= seen, seen


def _gang_walk(seed: int, seen: set[str]) -> None:
    walk = CoreWalk(seed)
    for _ in range(400):
        walk.step()
        for job in walk.core.jobs.values():
            if not job.spec.whole_gang:
                continue
            active = [job.tasks[i] for i in job.active]
            if job.regrouping is not None or job.aborting is not None:
                seen.add("regrouping" if job.regrouping else "aborting")
                assert all(t.killing is not None for t in active), (job.regrouping, job.aborting, active)
            if job.aborting is not None:
                assert not job.pending
            if job.state is JobState.FAILED and job.aborting is not None:
                seen.add("aborted")
                assert not active
            if not job.gang_started and job.regrouping is None:
                assert all(t.killing is not None for t in active) or not active
