"""The elastic framework's pure decisions (no driver, no coordinator)."""

from __future__ import annotations

from typing import Any

import pytest

from frameworks.elastic.effects import (
    DeclareDemand,
    Decline,
    Kill,
    Launch,
    OfferSlot,
    Revive,
    StartCoordinator,
    StopCoordinator,
    WorkerGone,
)
from frameworks.elastic.jobs import (
    Ending,
    JobConflict,
    NoSuchJob,
    ServiceError,
    classify,
    job_detail,
    job_from_dict,
    job_to_dict,
)
from frameworks.elastic.service_core import ElasticCore
from frameworks.elastic.slots import count_slots, reference_shape
from frameworks.elastic.spec import from_mapping
from frameworks.elastic.state import JobState
from protocol.resources import Resources
from protocol.task_states import TaskState


def spec(lo: int, hi: int, name: str = "j", **scaling: Any) -> Any:
    return from_mapping(
        {
            "name": name,
            "worker": {"command": "run", "cpus": 1, "mem": 100},
            "scaling": {"min_workers": lo, "max_workers": hi, **scaling},
        }
    )


def offer(oid: str, res: str, agent: str | None = None) -> OfferSlot:
    return OfferSlot(oid, agent or f"a-{oid}", f"h-{oid}", Resources.parse(res))


def launches(effects: list[Any]) -> list[str]:
    return [w.task_id for e in effects if isinstance(e, Launch) for w in e.tasks]


def run_all(core: ElasticCore, effects: list[Any], now: float) -> None:
    for tid in launches(effects):
        core.on_update(tid, TaskState.TASK_RUNNING, now)


def test_slots_are_whole_workers_per_offer_regular_and_revocable() -> None:
    shape = Resources.of(cpus=1, mem=100)
    offers = [offer("1", "cpus:1.5;mem:1000"), offer("2", "cpus:2;mem:150")]
    cap = count_slots(offers, shape)
    assert (cap.regular, cap.revocable) == (2, 0)
    rev = OfferSlot(
        "3", "a", "h", Resources.parse("cpus:1;mem:100") + Resources.parse("cpus:2;mem:200").as_revocable()
    )
    cap = count_slots([rev], shape)
    assert (cap.regular, cap.revocable) == (1, 2)
    assert reference_shape([Resources.of(cpus=1, mem=300), Resources.of(cpus=2, mem=100)]) == Resources.of(
        cpus=2, mem=300
    )


def test_classify_endings() -> None:
    assert classify(TaskState.TASK_KILLED, "REASON_CONTAINER_PREEMPTED", False) is Ending.REVOKED
    assert classify(TaskState.TASK_KILLED, None, True) is Ending.KILLED
    # a kill we did not ask for is the worker's failure, unless its agent or framework went away
    assert classify(TaskState.TASK_KILLED, None, False) is Ending.FAILED
    assert classify(TaskState.TASK_KILLED, "REASON_AGENT_REMOVED_BY_OPERATOR", False) is Ending.LOST
    assert classify(TaskState.TASK_FAILED, "REASON_CONTAINER_LIMITATION_MEMORY", False) is Ending.FAILED
    assert classify(TaskState.TASK_FAILED, "REASON_CONTAINER_LIMITATION_MEMORY", True) is Ending.KILLED
    assert classify(TaskState.TASK_FAILED, None, False) is Ending.FAILED
    assert classify(TaskState.TASK_LOST, "REASON_AGENT_REMOVED", False) is Ending.LOST
    assert classify(TaskState.TASK_ERROR, "REASON_INVALID_OFFERS", False) is Ending.LOST
    assert classify(TaskState.TASK_FINISHED, None, False) is Ending.FINISHED


def test_the_minimum_starts_whole_or_not_at_all_and_is_declared_as_a_gang() -> None:
    core = ElasticCore()
    jid, _ = core.submit(spec(3, 5), 0.0)
    out = core.schedule([offer("1", "cpus:2;mem:1000")], 1.0)
    assert not launches(out)
    (demand,) = next(e for e in out if isinstance(e, DeclareDemand)).demands
    assert demand[1].gang_min == 3 and demand[1].count == 3
    assert "does not fit" in core.jobs[jid].reason and core.jobs[jid].state is JobState.PENDING
    out = core.schedule([offer("1", "cpus:2;mem:1000"), offer("2", "cpus:1;mem:100")], 2.0)
    assert isinstance(out[0], StartCoordinator) and len(launches(out)) == 3
    assert core.jobs[jid].state is JobState.STARTING
    run_all(core, out, 3.0)
    assert core.jobs[jid].state is JobState.RUNNING and core.jobs[jid].started_at == 3.0
    (demand,) = core.demands()
    assert demand[1].count == 2 and demand[1].gang_id is None and demand[1].revocable_ok


def test_nothing_wanted_declines_offers_and_wanting_again_revives_before_taking_from_others() -> None:
    core = ElasticCore(revive_grace=1.0)
    a, _ = core.submit(spec(1, 2, "a"), 0.0)
    out = core.schedule([offer("1", "cpus:2;mem:1000")], 0.0)
    run_all(core, out, 0.0)
    out = core.schedule([offer("1", "cpus:1;mem:800")], 1.0)
    assert any(isinstance(e, Decline) for e in out) and core.declined
    b, _ = core.submit(spec(1, 1, "b"), 2.0)
    out = core.schedule([], 2.0)
    assert any(isinstance(e, Revive) for e in out)
    assert not any(isinstance(e, Kill) for e in out)  # held for the revive grace
    # the offers are back (too small for b): decided with them in view, b's minimum comes from a
    out = core.schedule([offer("2", "cpus:0.5;mem:800")], 2.5)
    assert core.hold_shrinks_until == 0.0
    (kill,) = [e for e in out if isinstance(e, Kill)]
    assert kill.task_id.startswith(f"elastic-{a}-")
    out = core.schedule([offer("1", "cpus:1;mem:800")], 4.0)
    assert launches(out) == [f"elastic-{b}-w0"]


def test_failures_back_off_then_fail_the_job() -> None:
    core = ElasticCore(max_worker_failures=3, backoff_initial=1.0)
    jid, _ = core.submit(spec(1, 1), 0.0)
    now = 0.0
    for i in range(3):
        out = core.schedule([offer("1", "cpus:1;mem:100")], now)
        (tid,) = launches(out)
        out = core.on_update(tid, TaskState.TASK_FAILED, now, message="exit 1")
        assert WorkerGone(jid, tid, "TASK_FAILED: exit 1") in out  # the coordinator counts a death
        job = core.jobs[jid]
        if i < 2:
            assert job.backoff_until == now + 2**i
            assert not launches(core.schedule([offer("1", "cpus:1;mem:100")], now + 0.1))
            now = job.backoff_until
    assert core.jobs[jid].state is JobState.FAILED and "3 worker failures" in core.jobs[jid].reason
    assert not core.demands()


def test_progress_resets_the_failure_count_and_finishing_succeeds() -> None:
    core = ElasticCore()
    jid, _ = core.submit(spec(1, 1), 0.0)
    (tid,) = launches(core.schedule([offer("1", "cpus:1;mem:100")], 0.0))
    core.on_update(tid, TaskState.TASK_RUNNING, 0.0)
    core.set_coordinator(jid, 1234, "http://127.0.0.1:1234")
    core.jobs[jid].failures = 2
    status = {
        "generation": 3,
        "world_size": 1,
        "finished": False,
        "shards": {"completed_total": 4},
        "progress": {},
    }
    core.on_progress(jid, status, 1.0)
    assert core.jobs[jid].failures == 0 and core.jobs[jid].progress["generation"] == 3
    core.on_progress(jid, {**status, "finished": True}, 2.0)
    assert core.jobs[jid].finished and not core.demands()
    out = core.on_update(tid, TaskState.TASK_FINISHED, 3.0)
    assert core.jobs[jid].state is JobState.SUCCEEDED and StopCoordinator(jid) in out
    assert core.jobs[jid].failures == 0


def test_unknown_running_task_is_killed_and_requests_are_checked() -> None:
    core = ElasticCore()
    assert core.on_update("stray", TaskState.TASK_RUNNING, 0.0) == [
        Kill("stray", None, "unknown worker task")
    ]
    assert core.on_update("stray", TaskState.TASK_FINISHED, 0.0) == []
    jid, _ = core.submit(spec(2, 3), 0.0)
    with pytest.raises(ServiceError, match="at least min_workers"):
        core.scale(jid, 0.0, max_workers=1)
    with pytest.raises(NoSuchJob, match="no elastic job 99"):
        core.job(99)
    core.cancel(jid, 0.0)
    with pytest.raises(JobConflict, match="already cancelled"):
        core.cancel(jid, 0.0)


def test_job_records_round_trip() -> None:
    core = ElasticCore()
    jid, _ = core.submit(spec(1, 2), 0.0)
    run_all(core, core.schedule([offer("1", "cpus:2;mem:1000")], 0.0), 1.0)
    job = core.jobs[jid]
    back = job_from_dict(job_to_dict(job))
    assert back.spec == job.spec and back.state is job.state and back.life.story == job.life.story
    assert back.workers.keys() == job.workers.keys() and back.next_index == job.next_index
    fresh = ElasticCore()
    fresh.restore(job_to_dict(job))
    assert sorted(fresh.known_tasks()) == sorted((w.task_id, w.agent_id) for w in job.workers.values())
    assert fresh.next_job_id == jid + 1
    with pytest.raises(ServiceError, match="bad job record"):
        job_from_dict({"job_id": 1})


def test_an_unreachable_worker_is_counted_out_and_killed_if_it_comes_back() -> None:
    core = ElasticCore()
    jid, _ = core.submit(spec(1, 2), 0.0)
    out = core.schedule([offer("1", "cpus:2;mem:1000")], 0.0)
    run_all(core, out, 0.0)
    out = core.schedule([offer("1", "cpus:1;mem:900")], 0.5)
    run_all(core, out, 0.5)
    (t1,) = launches(out)
    core.on_update(t1, TaskState.TASK_UNREACHABLE, 1.0)
    assert core.jobs[jid].counted() == 1
    out = core.schedule([offer("2", "cpus:1;mem:100")], 2.0)
    assert len(launches(out)) == 1  # replaced on the capacity that is there
    out = core.on_update(t1, TaskState.TASK_RUNNING, 3.0)  # the partition heals
    assert Kill(t1, "a-1", "came back after being counted out") in out
    core.on_update(t1, TaskState.TASK_KILLED, 4.0)
    assert core.jobs[jid].counts == {"launched": 3, "unreachable": 1, "killed": 1}


def test_kills_are_sent_again_until_the_worker_is_gone() -> None:
    core = ElasticCore()
    jid, _ = core.submit(spec(1, 1), 0.0)
    (tid,) = launches(core.schedule([offer("1", "cpus:1;mem:100")], 0.0))
    core.on_update(tid, TaskState.TASK_RUNNING, 0.0)
    assert [k.task_id for k in core.cancel(jid, 1.0) if isinstance(k, Kill)] == [tid]
    assert core.resend_kills(5.0, after=10.0) == []
    assert [k.task_id for k in core.resend_kills(11.0, after=10.0)] == [tid]
    core.forget_kills()  # resubscribed: send at once
    assert [k.task_id for k in core.resend_kills(11.5, after=10.0)] == [tid]
    core.on_update(tid, TaskState.TASK_KILLED, 12.0)
    assert core.resend_kills(30.0) == [] and core.jobs[jid].counts["killed"] == 1


def test_workers_that_never_start_are_reported_for_reconciliation() -> None:
    core = ElasticCore()
    core.submit(spec(2, 2), 0.0)
    t0, t1 = launches(core.schedule([offer("1", "cpus:2;mem:1000")], 0.0))
    core.on_update(t0, TaskState.TASK_RUNNING, 1.0)
    assert core.stale_workers(10.0, after=30.0) == []
    assert core.stale_workers(31.0, after=30.0) == [(t1, "a-1")]


def test_a_killed_workers_slot_counts_as_free_until_an_offer_brings_it_back() -> None:
    """Between a kill's terminal update and the offer that returns its resources, the slot is in
    transit: a round in that window must not see the cluster as smaller and take another worker
    from the donor (a 1..6 and b 2..4 on 8 slots would then settle at 4+4 instead of 5+3)."""
    core = ElasticCore(return_grace=5.0)
    a, _ = core.submit(spec(1, 6, "a"), 0.0)
    run_all(core, core.schedule([offer("o1", "cpus:8;mem:800", "ag")], 0.0), 0.0)
    run_all(core, core.schedule([offer("o1", "cpus:7;mem:700", "ag")], 0.1), 0.1)
    assert core.jobs[a].running() == 6
    assert core.declined  # a is at its maximum: the rest was declined
    b, _ = core.submit(spec(2, 4, "b"), 1.0)
    assert Revive() in core.schedule([], 1.0)
    out = core.schedule([offer("o1", "cpus:2;mem:200", "ag")], 1.1)
    (kill,) = [e for e in out if isinstance(e, Kill)]  # b's third worker comes from a
    assert len(launches(out)) == 2 and kill.task_id.startswith(f"elastic-{a}-")
    core.on_offers([("o1", "ag", Resources.parse("cpus:2;mem:200"))], 1.1)
    core.on_update(kill.task_id, TaskState.TASK_KILLED, 2.0)
    # the lease's remainder after b's launch comes after the kill's update: it brings nothing back
    core.on_offers([("o1", "ag", Resources.parse("disk:10"))], 2.05)
    assert [r.task_id for r in core.returning] == [kill.task_id]
    run_all(core, out, 2.1)  # b's workers report running before the offer with a's slot arrives
    out = core.schedule([], 2.1)
    assert not [e for e in out if isinstance(e, Kill)]  # the returning slot is b's third worker
    assert core.last_plan is not None and core.last_plan.target(str(b)).total == 3
    core.on_offers([("o1", "ag", Resources.parse("cpus:1;mem:100;disk:10"))], 2.3)  # a's slot is back
    out = core.schedule([offer("o1", "cpus:1;mem:100", "ag")], 2.3)
    run_all(core, out, 2.4)
    assert (core.jobs[a].running(), core.jobs[b].running()) == (5, 3) and core.jobs[a].counts["killed"] == 1
    assert not [e for e in core.schedule([], 2.5) if isinstance(e, Kill | Launch)]  # a fixed point
    assert not core.returning


def test_a_returning_slot_that_never_comes_back_stops_counting_after_the_grace() -> None:
    core = ElasticCore(return_grace=5.0)
    jid, _ = core.submit(spec(1, 2), 0.0)
    out = core.schedule([offer("1", "cpus:2;mem:200")], 0.0)
    run_all(core, out, 0.0)
    run_all(core, core.schedule([offer("1", "cpus:1;mem:100")], 0.1), 0.1)
    core.scale(jid, 0.2, max_workers=1)
    (kill,) = [e for e in core.schedule([], 0.2) if isinstance(e, Kill)]
    core.on_update(kill.task_id, TaskState.TASK_KILLED, 1.0)
    assert [r.task_id for r in core.returning] == [kill.task_id]
    core.schedule([], 5.9)
    assert core.returning
    core.schedule([], 6.0)  # the resources went elsewhere (another framework, a filter)
    assert not core.returning


def test_an_agents_kill_is_a_failure_backed_off_and_never_killed_again() -> None:
    """The agent kills a worker over its memory limit: TASK_KILLING, then TASK_FAILED with
    REASON_CONTAINER_LIMITATION_MEMORY. Not ours: no KILL re-sent, a failure with a backoff, and
    repeats of the same cause back off further even while training progresses in between."""
    core = ElasticCore(backoff_initial=1.0, backoff_max=30.0)
    jid, _ = core.submit(spec(1, 1), 0.0)
    job = core.jobs[jid]
    now = 0.0
    delays = []
    for i in range(3):
        (tid,) = launches(core.schedule([offer("1", "cpus:1;mem:100")], now))
        core.on_update(tid, TaskState.TASK_RUNNING, now)
        core.on_progress(jid, {"shards": {"completed_total": i + 1}, "progress": {}}, now + 0.5)
        assert job.failures == 0  # training progressed
        out = core.on_update(tid, TaskState.TASK_KILLING, now + 1.0, message="memory limit exceeded")
        assert not [e for e in out if isinstance(e, Kill)]
        assert job.workers[tid].phase.value == "RUNNING" and job.counted() == 1  # still holds its slot
        assert core.resend_kills(now + 100.0) == []  # we never decided to kill it
        core.on_update(
            tid,
            TaskState.TASK_FAILED,
            now + 2.0,
            reason="REASON_CONTAINER_LIMITATION_MEMORY",
            message="Memory limit exceeded: 140 MB > 100 MB",
        )
        (ended,) = [w for w in job.ended if w.task_id == tid]
        assert ended.ending is Ending.FAILED
        delays.append(job.backoff_until - (now + 2.0))
        out = core.schedule([offer("1", "cpus:1;mem:100")], now + 2.1)
        assert not launches(out)  # not relaunched at once
        assert "memory limit" in job.reason and f"{i + 1}x" in job.reason
        now = job.backoff_until
    assert delays == [1.0, 2.0, 4.0]
    assert job.counts == {"launched": 3, "failed": 3} and job.same_failures == 3
    detail = job_detail(job)
    assert detail["last_failure"]["in_a_row"] == 3 and "memory limit" in detail["last_failure"]["cause"]
    assert job_from_dict(job_to_dict(job)).same_failures == 3
    assert job.state is not JobState.FAILED  # progress between the failures: the job goes on


def test_our_kill_racing_an_agents_kill_is_still_ours() -> None:
    core = ElasticCore()
    jid, _ = core.submit(spec(1, 2), 0.0)
    run_all(core, core.schedule([offer("1", "cpus:2;mem:200")], 0.0), 0.0)
    run_all(core, core.schedule([offer("1", "cpus:1;mem:100")], 0.1), 0.1)
    core.scale(jid, 0.2, max_workers=1)
    (kill,) = [e for e in core.schedule([], 0.2) if isinstance(e, Kill)]
    core.on_update(kill.task_id, TaskState.TASK_KILLING, 0.3)
    assert [k.task_id for k in core.resend_kills(11.0)] == [kill.task_id]  # ours: sent again
    core.on_update(kill.task_id, TaskState.TASK_FAILED, 12.0, reason="REASON_CONTAINER_LIMITATION_MEMORY")
    job = core.jobs[jid]
    assert job.counts.get("killed") == 1 and "failed" not in job.counts and job.backoff_until == 0.0
