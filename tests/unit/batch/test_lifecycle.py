"""BatchCore's job lifecycle: hold and release, update (Slurm's rules; a refused update changes
nothing), requeue of finished and running jobs, after-notok, singleton, the change history, and
the job events."""

from __future__ import annotations

import pytest

from frameworks.batch.core import BatchCore, BatchError, JobEvent, Kill, Launch
from frameworks.batch.model import Dependency, DependencyKind, JobSpec, JobState, SpecError, TaskPhase
from frameworks.batch.planner import OfferView
from frameworks.batch.store import job_from_dict, job_to_dict
from protocol.resources import Resources
from protocol.task_states import TaskState

S = TaskState


def spec(**kw: object) -> JobSpec:
    base: dict[str, object] = {"name": "j", "argv": ("true",), "cpus": 1.0, "mem": 64.0}
    base.update(kw)
    return JobSpec(**base)  # type: ignore[arg-type]


def offer(oid: str = "o1", cpus: float = 4, mem: float = 1024) -> OfferView:
    return OfferView(oid, f"agent-{oid}", f"host-{oid}", "*", Resources.of(cpus=cpus, mem=mem, ports=((31000, 31099),)))


def launches(effects: list[object]) -> list[str]:
    return [t.task_id for e in effects if isinstance(e, Launch) for t in e.tasks]


def kinds(effects: list[object]) -> list[str]:
    return [e.kind for e in effects if isinstance(e, JobEvent)]


def test_a_held_job_is_not_placed_until_released_and_both_are_recorded() -> None:
    core = BatchCore()
    jid, _ = core.submit(spec(), 0, user="alice")
    assert kinds(core.hold(jid, 1, "bob")) == ["held"]
    assert launches(core.schedule([offer()], 2)) == []
    assert core.job(jid).reason == "held by bob"
    with pytest.raises(BatchError, match="already held"):
        core.hold(jid, 3, "bob")
    core.release(jid, 4, "carol")
    assert launches(core.schedule([offer()], 5)) == ["j1-0-0"]
    assert [(c["who"], c["what"]) for c in core.job(jid).changes] == [("bob", "hold"), ("carol", "release")]
    with pytest.raises(BatchError, match="not held"):
        core.release(jid, 6, "carol")


def test_update_priority_reorders_pending_jobs() -> None:
    core = BatchCore()
    a, _ = core.submit(spec(cpus=4), 0)
    b, _ = core.submit(spec(cpus=4), 1)
    core.update(b, {"priority": 5}, 2, "op")
    assert launches(core.schedule([offer(cpus=4)], 3)) == [f"j{b}-0-0"]
    assert core.job(a).reason == "waiting for 4 cpus; largest free offer has 0"
    assert core.job(b).changes[-1]["what"] == "update priority 0 -> 5"


def test_update_count_grows_and_shrinks_only_pending_tasks() -> None:
    core = BatchCore()
    jid, _ = core.submit(spec(count=2), 0)
    core.update(jid, {"count": 4}, 1, "op")
    assert [t.phase for t in core.job(jid).tasks] == [TaskPhase.PENDING] * 4
    assert launches(core.schedule([offer(cpus=1)], 2)) == ["j1-0-0"]
    core.update(jid, {"count": 2}, 3, "op")
    assert len(core.job(jid).tasks) == 2 and core.job(jid).pending == {1}
    assert launches(core.schedule([offer(cpus=1)], 4)) == ["j1-1-0"]
    with pytest.raises(BatchError, match="count: task 1 of job 1 is launching"):
        core.update(jid, {"count": 1}, 5, "op")


def test_refused_updates_change_nothing() -> None:
    core = BatchCore()
    jid, _ = core.submit(spec(count=4, gang=4), 0)
    launched = core.schedule([offer(cpus=4)], 1)
    assert len(launches(launched)) == 4
    before = job_to_dict(core.job(jid))
    with pytest.raises(BatchError, match="cpus: job 1 has tasks launching or running"):
        core.update(jid, {"cpus": 2, "priority": 9}, 2, "op")
    with pytest.raises(BatchError, match="count: job 1's gang has started"):
        core.update(jid, {"count": 6}, 2, "op")
    with pytest.raises(SpecError, match="priority: expected an integer"):
        core.update(jid, {"priority": "high"}, 2, "op")
    with pytest.raises(SpecError, match="colour: cannot be updated"):
        core.update(jid, {"colour": "red"}, 2, "op")
    assert job_to_dict(core.job(jid)) == before
    core.update(jid, {"priority": 9, "time_limit": 30}, 3, "op")  # allowed while running
    assert core.job(jid).spec.priority == 9 and core.job(jid).spec.time_limit == 30


def test_requeue_a_finished_job_runs_it_again_with_fresh_retries() -> None:
    core = BatchCore()
    jid, _ = core.submit(spec(max_retries=0), 0)
    core.schedule([offer()], 0)
    core.on_update("j1-0-0", S.TASK_RUNNING, 1)
    eff = core.on_update("j1-0-0", S.TASK_FAILED, 2)
    assert core.job(jid).state is JobState.FAILED and "finished" in kinds(eff)
    assert kinds(core.requeue(jid, 3, "op")) == ["requeued"]
    job = core.job(jid)
    assert job.state is JobState.PENDING and job.ended_at is None and jid in core.live
    assert job.tasks[0].failures == 0
    assert launches(core.schedule([offer()], 4)) == ["j1-0-1"]
    core.on_update("j1-0-1", S.TASK_RUNNING, 5)
    core.on_update("j1-0-1", S.TASK_FINISHED, 6)
    assert job.state is JobState.SUCCEEDED
    assert [a.state for a in job.tasks[0].history] == ["TASK_FAILED", "TASK_FINISHED"]


def test_requeue_a_running_job_kills_and_reruns_without_a_failure() -> None:
    core = BatchCore()
    jid, _ = core.submit(spec(count=2), 0)
    core.schedule([offer()], 0)
    for t in ("j1-0-0", "j1-1-0"):
        core.on_update(t, S.TASK_RUNNING, 1)
    core.on_update("j1-1-0", S.TASK_FINISHED, 2)
    eff = core.requeue(jid, 3, "op")
    assert [(e.task_id, e.reason) for e in eff if isinstance(e, Kill)] == [("j1-0-0", "job requeued")]
    core.on_update("j1-0-0", S.TASK_KILLED, 4)
    job = core.job(jid)
    assert [t.phase for t in job.tasks] == [TaskPhase.PENDING, TaskPhase.PENDING]
    assert [t.failures for t in job.tasks] == [0, 0]
    assert sorted(launches(core.schedule([offer()], 5))) == ["j1-0-1", "j1-1-1"]


def test_requeue_of_a_job_that_never_ran_is_refused() -> None:
    core = BatchCore()
    jid, _ = core.submit(spec(), 0)
    with pytest.raises(BatchError, match="never run"):
        core.requeue(jid, 1, "op")


def test_after_notok_runs_after_a_failure_and_is_cancelled_after_a_success() -> None:
    core = BatchCore()
    a, _ = core.submit(spec(), 0)
    b, _ = core.submit(spec(), 0)
    ca, _ = core.submit(spec(after=(Dependency(a, DependencyKind.FAILURE),)), 0)
    cb, _ = core.submit(spec(after=(Dependency(b, DependencyKind.FAILURE),)), 0)
    core.schedule([offer(cpus=2)], 1)
    assert core.job(ca).reason == "after job 1"
    core.on_update("j1-0-0", S.TASK_RUNNING, 2)
    core.on_update("j1-0-0", S.TASK_FAILED, 3)
    core.on_update("j2-0-0", S.TASK_RUNNING, 2)
    core.on_update("j2-0-0", S.TASK_FINISHED, 3)
    assert core.job(cb).state is JobState.CANCELLED
    assert core.job(cb).reason == "dependency job 2 succeeded (after-notok)"
    assert launches(core.schedule([offer(cpus=2)], 4)) == ["j3-0-0"]


def test_singleton_waits_for_the_earlier_job_of_the_same_name_and_user() -> None:
    core = BatchCore()
    core.submit(spec(name="nightly"), 0, user="alice")
    b, _ = core.submit(spec(name="nightly", singleton=True), 1, user="alice")
    core.submit(spec(name="nightly", singleton=True), 1, user="bob")  # another user: runs
    assert launches(core.schedule([offer()], 2)) == ["j1-0-0", "j3-0-0"]
    assert core.job(b).reason == "singleton: job 1 of the same name and user has not ended"
    core.on_update("j1-0-0", S.TASK_RUNNING, 3)
    core.on_update("j1-0-0", S.TASK_FINISHED, 4)
    assert launches(core.schedule([offer()], 5)) == ["j2-0-0"]


def test_submit_many_resolves_names_and_refuses_unknown_ids_whole() -> None:
    core = BatchCore()
    with pytest.raises(BatchError, match="after: no job 99"):
        core.submit_many([spec(), spec(after=(Dependency(99),))], 0)
    assert core.jobs == {}
    ids, _ = core.submit_many([spec(name="a"), spec(name="b", after=(Dependency(-1),))], 0)
    assert ids == [1, 2] and core.job(2).spec.after == (Dependency(1),)


def test_lifecycle_fields_survive_the_store_round_trip() -> None:
    core = BatchCore()
    jid, _ = core.submit(spec(count=2), 0, user="alice")
    core.hold(jid, 1, "bob")
    core.schedule([offer()], 2)
    back = job_from_dict(job_to_dict(core.job(jid)))
    assert (back.user, back.held, back.changes) == ("alice", "bob", core.job(jid).changes)


def test_a_kill_decided_before_a_restart_is_sent_again_after_it() -> None:
    core = BatchCore()
    jid, _ = core.submit(spec(), 0)
    core.schedule([offer()], 0)
    core.on_update("j1-0-0", S.TASK_RUNNING, 1)
    core.requeue(jid, 2, "op")
    restored = BatchCore()
    restored.restore(job_from_dict(job_to_dict(core.job(jid))))
    assert [(e.task_id, e.reason) for e in restored.resume_kills() if isinstance(e, Kill)] == [
        ("j1-0-0", "requeue (resent)")
    ]
    restored.on_update("j1-0-0", S.TASK_KILLED, 3)
    assert restored.job(jid).tasks[0].failures == 0
    assert restored.job(jid).tasks[0].phase is TaskPhase.PENDING
