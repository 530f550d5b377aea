"""Gangs that find each other and fail together: the environment each rank is launched with, and
what the core decides when a rank fails (gang_policy abort, restart, continue), with exact outcomes."""

from __future__ import annotations

import pytest

from frameworks.batch.core import BatchCore, Decline, Effect, Kill, Launch, TaskLaunch
from frameworks.batch.model import JobSpec, JobState, SpecError, TaskPhase, spec_from_dict
from frameworks.batch.planner import OfferView
from protocol.resources import Resources
from protocol.task_states import TaskState

S = TaskState


def gang_spec(**kw: object) -> JobSpec:
    base: dict[str, object] = {"name": "ddp", "argv": ["python", "train.py"], "cpus": 1, "mem": 64, "count": 3, "gang": 3}
    base.update(kw)
    return spec_from_dict(base)


def offer(oid: str, cpus: float, ports: tuple[int, int], address: str) -> OfferView:
    return OfferView(
        oid, f"agent-{oid}", "node.example", "*", Resources.of(cpus=cpus, mem=1024, ports=(ports,)), {}, address
    )


A = offer("a", 2, (31000, 31009), "10.0.0.1")  # room for two ranks
B = offer("b", 1, (32000, 32009), "10.0.0.2")  # room for one


def launched(effects: list[Effect]) -> list[TaskLaunch]:
    return sorted((t for e in effects if isinstance(e, Launch) for t in e.tasks), key=lambda t: t.index)


def kills(effects: list[Effect]) -> list[tuple[str, str]]:
    return [(e.task_id, e.reason) for e in effects if isinstance(e, Kill)]


def start(core: BatchCore, spec: JobSpec, offers: list[OfferView], now: float = 0) -> list[TaskLaunch]:
    core.submit(spec, now)
    got = launched(core.schedule(offers, now))
    for t in got:
        core.on_update(t.task_id, S.TASK_RUNNING, now + 1)
    return got


def test_every_rank_gets_its_rank_world_size_rendezvous_ports_and_hosts() -> None:
    core = BatchCore()
    tasks = start(core, gang_spec(ports=2), [A, B])
    # best fit: the tighter offer b first, so rank 0 is on b
    assert [(t.task_id, str(t.resources)) for t in tasks] == [
        ("j1-0-0", "cpus:1; mem:64; ports:[32000-32002]"),  # rank 0: its 2 ports and the rendezvous port
        ("j1-1-0", "cpus:1; mem:64; ports:[31000-31001]"),
        ("j1-2-0", "cpus:1; mem:64; ports:[31002-31003]"),
    ]
    common = {
        "WORLD_SIZE": "3", "MASTER_ADDR": "10.0.0.2", "MASTER_PORT": "32002", "AGORA_GANG_NODES": "2",
        "AGORA_GANG_HOSTS": "10.0.0.2:1,10.0.0.1:2",
    }
    assert [dict(t.env) for t in tasks] == [
        {"PORT0": "32000", "PORT1": "32001", "RANK": "0", "NODE_RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", **common},
        {"PORT0": "31000", "PORT1": "31001", "RANK": "1", "NODE_RANK": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", **common},
        {"PORT0": "31002", "PORT1": "31003", "RANK": "2", "NODE_RANK": "1", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", **common},
    ]
    assert core.job(1).tasks[0].current.ports == (32000, 32001, 32002)  # type: ignore[union-attr]


def test_two_gangs_on_one_host_get_different_rendezvous_ports() -> None:
    core = BatchCore()
    core.submit(gang_spec(count=2, gang=2), 0)
    core.submit(gang_spec(count=2, gang=2), 0)
    big = offer("a", 8, (31000, 31099), "10.0.0.1")
    tasks = launched(core.schedule([big], 0))
    masters = {(t.job_id, dict(t.env)["MASTER_PORT"]) for t in tasks}
    assert masters == {(1, "31000"), (2, "31001")}
    assert {dict(t.env)["MASTER_ADDR"] for t in tasks} == {"10.0.0.1"}


def test_a_plain_array_with_ports_gets_them_and_no_rendezvous() -> None:
    core = BatchCore()
    core.submit(spec_from_dict({"argv": ["serve"], "cpus": 1, "mem": 64, "count": 2, "ports": 1}), 0)
    assert [dict(t.env) for t in launched(core.schedule([A], 0))] == [{"PORT0": "31000"}, {"PORT0": "31001"}]


def test_abort_kills_the_other_ranks_and_fails_the_job_with_the_failing_ranks_exit_code() -> None:
    core = BatchCore()
    start(core, gang_spec(), [A, B])
    eff = core.on_update("j1-1-0", S.TASK_FAILED, 5, exit_code=1, message="Command exited with status 1")
    why = "gang aborted: task 1 failed with exit code 1: Command exited with status 1"
    assert kills(eff) == [("j1-0-0", why), ("j1-2-0", why)]
    job = core.job(1)
    # the job fails once its last rank is gone, not while ranks may still run
    assert job.state is JobState.RUNNING and job.aborting == why
    core.on_update("j1-0-0", S.TASK_KILLED, 6)
    core.schedule([], 6)
    assert job.reason == why and job.state is JobState.RUNNING
    core.on_update("j1-2-0", S.TASK_KILLED, 7)
    assert job.state is JobState.FAILED and job.reason == why and job.exit_code == 1 and job.ended_at == 7
    assert [t.phase for t in job.tasks] == [TaskPhase.CANCELLED, TaskPhase.FAILED, TaskPhase.CANCELLED]


def test_a_lost_rank_aborts_the_gang_at_once_not_retried_alone_later() -> None:
    core = BatchCore()
    start(core, gang_spec(), [A, B])
    eff = core.on_update("j1-2-0", S.TASK_LOST, 5, message="agent removed")
    assert [k for k, _ in kills(eff)] == ["j1-0-0", "j1-1-0"]
    assert core.job(1).aborting == "gang aborted: task 2 failed (TASK_LOST): agent removed"
    assert core.job(1).tasks[2].phase is TaskPhase.FAILED


def test_restart_kills_the_gang_then_places_it_again_whole_as_one_retry() -> None:
    core = BatchCore()
    start(core, gang_spec(max_retries=1, ports=1), [A, B])  # restart: the default with retries
    assert core.job(1).spec.policy.value == "restart"
    eff = core.on_update("j1-2-0", S.TASK_FAILED, 5, exit_code=3)
    why = "gang restart 1 of 1: task 2 failed with exit code 3"
    assert kills(eff) == [("j1-0-0", why), ("j1-1-0", why)]
    job = core.job(1)
    core.schedule([], 5)
    assert job.reason == f"{why}; waiting for 2 task(s) to end"
    core.on_update("j1-0-0", S.TASK_KILLED, 5.5)
    core.on_update("j1-1-0", S.TASK_KILLED, 5.5)
    assert [t.phase for t in job.tasks] == [TaskPhase.PENDING] * 3 and job.state is JobState.PENDING
    assert [t.attempt for t in job.tasks] == [1, 1, 1] and job.gang_restarts == 1
    assert launched(core.schedule([A, B], 5.5)) == []  # after its backoff (1 s), as a whole
    assert job.reason == "retry in 0.5s"
    again = launched(core.schedule([A, B], 6))
    assert [t.task_id for t in again] == ["j1-0-1", "j1-1-1", "j1-2-1"]
    # ports anew from the offers: rank 0 on b again, its PORT0 and the rendezvous port after it
    assert dict(again[2].env)["MASTER_PORT"] == "32001" and dict(again[0].env)["PORT0"] == "32000"
    for t in again:
        core.on_update(t.task_id, S.TASK_RUNNING, 7)
    # a second failure: no retry left, so the gang aborts
    eff = core.on_update("j1-0-1", S.TASK_FAILED, 8, exit_code=9)
    assert [k for k, _ in kills(eff)] == ["j1-1-1", "j1-2-1"]
    core.on_update("j1-1-1", S.TASK_KILLED, 9)
    core.on_update("j1-2-1", S.TASK_KILLED, 9)
    assert job.state is JobState.FAILED and job.exit_code == 9
    assert job.reason == "gang aborted: task 0 failed with exit code 9"


def test_restart_runs_finished_ranks_again_and_stale_updates_of_killed_ranks_are_ignored() -> None:
    core = BatchCore()
    start(core, gang_spec(max_retries=2, gang_policy="restart"), [A, B])
    core.on_update("j1-0-0", S.TASK_FINISHED, 3)
    eff = core.on_update("j1-1-0", S.TASK_FAILED, 4, exit_code=1)
    assert [k for k, _ in kills(eff)] == ["j1-2-0"]
    job = core.job(1)
    assert job.tasks[0].phase is TaskPhase.PENDING and job.tasks[0].attempt == 1
    assert core.on_update("j1-0-0", S.TASK_FINISHED, 4.5) == []  # an old attempt
    core.on_update("j1-2-0", S.TASK_FAILED, 5, exit_code=137)  # ended by the kill: not a second failure
    assert job.gang_restarts == 1 and job.regrouping is None
    assert [t.task_id for t in launched(core.schedule([A, B], 6))] == ["j1-0-1", "j1-1-1", "j1-2-1"]


def test_a_rank_that_never_ran_places_the_whole_gang_again_without_spending_a_retry() -> None:
    core = BatchCore()
    core.submit(gang_spec(), 0)
    launched(core.schedule([A, B], 0))
    core.on_update("j1-0-0", S.TASK_RUNNING, 1)
    eff = core.on_update("j1-2-0", S.TASK_DROPPED, 1, message="offer gone")
    why = "placing the whole gang again: task 2 never ran (TASK_DROPPED)"
    assert kills(eff) == [("j1-0-0", why), ("j1-1-0", why)]
    core.on_update("j1-0-0", S.TASK_KILLED, 2)
    core.on_update("j1-1-0", S.TASK_DROPPED, 2)
    job = core.job(1)
    assert job.gang_restarts == 0 and job.state is JobState.PENDING
    assert [t.task_id for t in launched(core.schedule([A, B], 2))] == ["j1-0-1", "j1-1-1", "j1-2-1"]


def test_the_time_limit_is_the_gangs_and_stops_every_rank() -> None:
    core = BatchCore()
    start(core, gang_spec(time_limit=5), [A, B])  # running from 1
    assert core.next_wakeup(2) == 6
    assert core.tick(5.9) == []
    eff = core.tick(6)
    assert kills(eff) == [(f"j1-{i}-0", "time limit of 5s exceeded (the gang's)") for i in range(3)]
    assert core.next_wakeup(6.5) is None  # being enforced: no busy loop
    core.on_update("j1-1-0", S.TASK_KILLED, 6.2)
    job = core.job(1)
    assert job.aborting == "gang aborted: task 1 failed (TASK_KILLED): time limit of 5s exceeded"
    assert core.tick(6.3) == []  # the others are already being killed
    core.on_update("j1-0-0", S.TASK_KILLED, 6.4)
    core.on_update("j1-2-0", S.TASK_KILLED, 6.4)
    assert job.state is JobState.FAILED


def test_continue_is_the_array_behaviour_each_task_retried_alone() -> None:
    core = BatchCore()
    start(core, gang_spec(max_retries=1, gang_policy="continue"), [A, B])
    eff = core.on_update("j1-1-0", S.TASK_FAILED, 5, exit_code=1)
    assert kills(eff) == []
    assert [t.phase for t in core.job(1).tasks] == [TaskPhase.RUNNING, TaskPhase.PENDING, TaskPhase.RUNNING]


def test_cancel_during_an_abort_or_a_restart_ends_it_cancelled() -> None:
    core = BatchCore()
    start(core, gang_spec(max_retries=1), [A, B])
    core.on_update("j1-0-0", S.TASK_FAILED, 2, exit_code=1)
    eff = core.cancel(1, 3)
    assert [k for k, _ in kills(eff)] == ["j1-1-0", "j1-2-0"]
    assert core.job(1).state is JobState.CANCELLED and core.job(1).regrouping is None


def test_a_launch_of_part_of_the_gang_not_sent_places_it_again_whole() -> None:
    core = BatchCore()
    core.submit(gang_spec(), 0)
    core.schedule([A, B], 0)
    eff = core.launch_not_sent(["j1-2-0"], 1)
    assert [k for k, _ in kills(eff)] == ["j1-0-0", "j1-1-0"]
    core.on_update("j1-0-0", S.TASK_KILLED, 2)
    core.on_update("j1-1-0", S.TASK_KILLED, 2)
    assert [t.task_id for t in launched(core.schedule([A, B], 2))] == ["j1-0-1", "j1-1-1", "j1-2-0"]


def test_a_service_restart_sends_the_kills_of_an_aborting_gang_again() -> None:
    core = BatchCore()
    start(core, gang_spec(), [A, B])
    core.on_update("j1-1-0", S.TASK_FAILED, 5, exit_code=1)
    job = core.job(1)
    fresh = BatchCore()
    for t in job.tasks:
        t.killing = None  # not persisted
    fresh.restore(job)
    assert [k for k, _ in kills(fresh.resume_kills())] == ["j1-0-0", "j1-2-0"]


def test_the_gangs_demand_asks_for_the_rendezvous_port() -> None:
    from frameworks.batch.core import DeclareDemand

    core = BatchCore()
    core.submit(gang_spec(ports=2), 0)
    eff = core.schedule([], 0)
    (demand,) = [e for e in eff if isinstance(e, DeclareDemand)]
    assert demand.demands[0][1].ports == 3 and demand.demands[0][1].gang_min == 3
    assert not any(isinstance(e, Decline) for e in eff)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"gang": 2, "count": 2, "gang_policy": "abort", "max_retries": 1}, "max_retries: a gang with gang_policy abort"),
        ({"gang": 2, "count": 2, "gang_policy": "restart"}, "gang_policy restart: each restart of the gang is one"),
        ({"gang_policy": "abort"}, "gang_policy: only a gang has one"),
        ({"gang": 2, "count": 2, "gang_policy": "sometimes"}, "gang_policy: expected abort, restart or continue"),
        ({"ports": 1001}, "ports: 1001 is not within 0..1000"),
    ],
)
def test_bad_gang_input_is_refused_at_submit(body: dict[str, object], error: str) -> None:
    with pytest.raises(SpecError) as exc:
        spec_from_dict({"argv": ["true"], **body})
    assert str(exc.value).startswith(error), str(exc.value)


def test_a_requeued_gang_runs_again_whole_without_spending_a_restart() -> None:
    core = BatchCore()
    start(core, gang_spec(max_retries=1), [A, B])
    eff = core.requeue(1, 3, "alice")
    assert sorted(k for k, _ in kills(eff)) == ["j1-0-0", "j1-1-0", "j1-2-0"]
    for i in range(3):
        core.on_update(f"j1-{i}-0", S.TASK_KILLED, 4)
    job = core.job(1)
    assert job.gang_restarts == 0 and job.regrouping is None and job.aborting is None
    assert [t.task_id for t in launched(core.schedule([A, B], 4))] == ["j1-0-1", "j1-1-1", "j1-2-1"]


def test_an_aborted_gang_requeued_starts_afresh() -> None:
    core = BatchCore()
    start(core, gang_spec(), [A, B])
    core.on_update("j1-0-0", S.TASK_FAILED, 2, exit_code=4)
    core.on_update("j1-1-0", S.TASK_KILLED, 3)
    core.on_update("j1-2-0", S.TASK_KILLED, 3)
    job = core.job(1)
    assert job.state is JobState.FAILED and job.exit_code == 4
    core.requeue(1, 5, "alice")
    assert job.state is JobState.PENDING and job.aborting is None and job.exit_code is None
    again = launched(core.schedule([A, B], 5))
    assert [t.task_id for t in again] == ["j1-0-1", "j1-1-1", "j1-2-1"]
    for t in again:
        core.on_update(t.task_id, S.TASK_RUNNING, 6)
        core.on_update(t.task_id, S.TASK_FINISHED, 7)
    assert job.state is JobState.SUCCEEDED
