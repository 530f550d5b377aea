"""Planned backfill from time limits: the head job's exact reservation, which smaller jobs may
start now (only those done before it), expected starts for every pending job, and the order
after an update of priorities stays fair (priority, then submit time)."""

from __future__ import annotations

import attrs

from frameworks.batch.backfill import Release, Reservation, Waiting, expected_starts
from frameworks.batch.core import BatchCore, Launch
from frameworks.batch.model import JobSpec
from frameworks.batch.planner import OfferView, plan
from protocol.resources import Resources
from protocol.task_states import TaskState

from .builders import job, offer


def test_the_head_job_gets_a_reservation_and_only_jobs_done_before_it_backfill() -> None:
    # agent a: 4 cpus, 2 of them run a task of ours that ends (time limit) at t=100
    releases = [Release("a", 100.0, {"cpus": 2.0, "mem": 128.0})]
    jobs = [
        job(1).cpus(4).priority(10).build(),  # the head: needs all 4 cpus
        attrs.evolve(job(2).cpus(2).build(), spec=JobSpec("short", ("true",), cpus=2, time_limit=50)),
        attrs.evolve(job(3).cpus(2).build(), spec=JobSpec("long", ("true",), cpus=2, time_limit=500)),
        job(4).cpus(2).build(),  # no time limit: it would hold the cpus forever
    ]
    p = plan(jobs, [offer("a").cpus(2).mem(1024).build()], now=10.0, releases=releases)
    assert p.reservation == Reservation(1, 100.0, {"a": {"cpus": 4.0, "mem": 128.0}}, None)
    assert [(pl.job_id, pl.index) for pl in p.placements] == [(2, 0)]
    assert p.reasons[1] == "waiting for 4 cpus; largest free offer has 2; reserved to start in 90s"
    assert p.reasons[3] == p.reasons[4] == "waiting for 2 cpus; largest free offer has 0"


def test_a_short_job_uses_the_reserved_cpus_but_a_long_one_only_what_is_left() -> None:
    # a: 6 cpus free now; the head needs 8: 4 more come back at t=60 (two tasks of ours)
    releases = [Release("a", 60.0, {"cpus": 2.0, "mem": 128.0}), Release("a", 60.0, {"cpus": 2.0, "mem": 128.0})]
    jobs = [
        job(1).cpus(8).mem(100).priority(5).build(),
        attrs.evolve(job(2).build(), spec=JobSpec("long", ("true",), cpus=3, mem=100, time_limit=1000)),
        attrs.evolve(job(3).build(), spec=JobSpec("short", ("true",), cpus=3, mem=100, time_limit=30)),
    ]
    p = plan(jobs, [offer("a").cpus(6).mem(1024).build()], now=0.0, releases=releases)
    assert p.reservation == Reservation(1, 60.0, {"a": {"cpus": 8.0, "mem": 100.0}}, None)
    # the long job would still hold its 3 cpus at 60, when the head needs all 6 free ones: it
    # waits; the short one is done by 30 and runs now
    assert [pl.job_id for pl in p.placements] == [3]


def test_expected_starts_in_priority_order() -> None:
    free = {"a": {"cpus": 2.0, "mem": 1000.0}, "b": {"cpus": 0.0, "mem": 1000.0}}
    releases = [Release("a", 50.0, {"cpus": 2.0}), Release("b", 80.0, {"cpus": 4.0})]
    both = frozenset({"a", "b"})
    starts = expected_starts(
        [
            Waiting(1, {"cpus": 2.0}, 1, both, 100.0),  # fits now on a
            Waiting(2, {"cpus": 4.0}, 1, both, 100.0),  # 4 cpus on one agent: b at 80
            Waiting(3, {"cpus": 2.0}, 1, both, None),  # a frees 2 at 50 (job 1 holds the others)
            Waiting(4, {"cpus": 2.0}, 1, frozenset({"a"}), None),  # a: job 1 until 100, job 3 forever
            Waiting(5, {"cpus": 2.0}, 2, both, 10.0),  # a gang of 2 at once: b once job 2 is done
        ],
        now=0.0,
        free=free,
        releases=releases,
    )
    assert {k: None if v is None else v.start_at for k, v in starts.items()} == {
        1: 0.0, 2: 80.0, 3: 50.0, 4: 100.0, 5: 180.0,
    }  # fmt: skip
    assert starts[2] == Reservation(2, 80.0, {"b": {"cpus": 4.0}}, 180.0)


def offer_view(oid: str, cpus: float) -> OfferView:
    return OfferView(oid, f"agent-{oid}", f"host-{oid}", "*", Resources.of(cpus=cpus, mem=1024, ports=((31000, 31099),)))


def test_core_expected_starts_from_running_time_limits() -> None:
    core = BatchCore()
    core.submit(JobSpec("run", ("true",), cpus=2, mem=10, time_limit=100), 0)
    eff = core.schedule([offer_view("a", 2)], 0)
    tid = next(t.task_id for e in eff if isinstance(e, Launch) for t in e.tasks)
    core.on_update(tid, TaskState.TASK_RUNNING, 10)
    core.submit(JobSpec("next", ("true",), cpus=2, mem=10, time_limit=30), 11)
    core.submit(JobSpec("after", ("true",), cpus=2, mem=10), 12)
    core.submit(JobSpec("urgent", ("true",), cpus=2, mem=10, priority=5, time_limit=5), 13)
    assert core.expected_starts([offer_view("a", 0)], 20) == {4: 110.0, 2: 115.0, 3: 145.0}
    # the full agent's offer declined: its tasks' resources still come back there
    assert core.expected_starts([], 20) == {4: 110.0, 2: 115.0, 3: 145.0}


def test_fair_order_after_updates_priority_then_submit_time() -> None:
    core = BatchCore()
    for i in range(4):
        core.submit(JobSpec(f"j{i}", ("true",), cpus=1, mem=10), float(i))
    core.update(3, {"priority": 5}, 10, "op")
    core.update(1, {"priority": 5}, 11, "op")  # raised later, but submitted earlier: it goes first
    core.update(2, {"cpus": 2}, 12, "op")  # a change of size keeps its place in the order
    eff = core.schedule([offer_view("a", 2)], 13)
    assert [t.job_id for e in eff if isinstance(e, Launch) for t in e.tasks] == [1, 3]
    assert core.job(2).reason == "waiting for 2 cpus; largest free offer has 0"
    eff = core.schedule([offer_view("a", 3)], 14)
    assert [t.job_id for e in eff if isinstance(e, Launch) for t in e.tasks] == [2, 4]
