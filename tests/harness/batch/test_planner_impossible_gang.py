"""A gang the cluster cannot hold at all holds nothing; one that could fit holds only within its
bounded hold (a 4 x 1-cpu gang on a 2-cpu cluster held both cpus for 20 s while a small job
waited "largest free offer has 0"; a 9 x 1-cpu gang on 8 cpus held everything 30 s at a time)."""

from __future__ import annotations

from frameworks.batch.core import BatchCore, Decline, Launch
from frameworks.batch.model import JobSpec
from frameworks.batch.planner import AgentCapacity, OfferView, plan
from protocol.resources import Resources
from protocol.task_states import TaskState

from .builders import job, offer

TWO_CPUS = (
    AgentCapacity("agent-a", {"cpus": 1.0, "mem": 1024.0}, ports=100),
    AgentCapacity("agent-b", {"cpus": 1.0, "mem": 1024.0}, ports=100),
)
EIGHT_CPUS = (
    AgentCapacity("agent-a", {"cpus": 4.0, "mem": 4096.0}, ports=100),
    AgentCapacity("agent-b", {"cpus": 4.0, "mem": 4096.0}, ports=100),
)
CANNOT = "gang 0/4 placed; cannot fit in the cluster: 4 x cpus:1;mem:128 at once, its agents have room for 2"


def _where(p: object) -> list[tuple[int, int, str]]:
    return [(x.job_id, x.index, x.offer_id) for x in p.placements]  # type: ignore[attr-defined]


def test_an_unplaceable_gang_holds_nothing_and_a_small_job_runs_at_once() -> None:
    offers = [offer("a").cpus(1).mem(1024).build(), offer("b").cpus(1).mem(1024).build()]
    jobs = [job(1).cpus(1).count(4).gang(4).priority(5).build(), job(2).cpus(0.2).mem(16).build()]
    p = plan(jobs, offers, now=0, capacity=TWO_CPUS)
    assert _where(p) == [(2, 0, "a")]
    assert p.reasons == {1: CANNOT}
    assert p.held_offers == frozenset() and p.holding_job is None and p.released_job is None


def test_an_unplaceable_gang_is_not_the_head_so_a_gang_behind_it_starts() -> None:
    offers = [offer("a").cpus(4).mem(4096).build(), offer("b").cpus(4).mem(4096).build()]
    jobs = [job(1).cpus(1).count(9).gang(9).priority(5).build(), job(2).cpus(1).count(8).gang(8).build()]
    p = plan(jobs, offers, now=0, capacity=EIGHT_CPUS)
    assert [(j, i) for j, i, _ in _where(p)] == [(2, i) for i in range(8)]
    assert p.reasons == {
        1: "gang 0/9 placed; cannot fit in the cluster: 9 x cpus:1;mem:128 at once, its agents have room for 8"
    }
    assert p.holding_job is None


def test_a_gang_that_could_fit_holds_and_lets_go_after_its_hold() -> None:
    offers = [offer("a").cpus(1).mem(1024).build(), offer("b").cpus(1).mem(1024).build()]
    four = (*TWO_CPUS, AgentCapacity("agent-c", {"cpus": 2.0, "mem": 1024.0}, ports=100))
    jobs = [job(1).cpus(1).count(4).gang(4).priority(5).build(), job(2).cpus(0.2).mem(16).build()]
    p = plan(jobs, offers, now=0, capacity=four)
    assert p.holding_job == 1 and p.held_offers == {"a", "b"}
    assert p.placements == ()
    assert p.reasons == {
        1: "gang 2/4 placed; waiting for 1 cpus; largest free offer has 0",
        2: "waiting for 0.2 cpus; largest free offer has 0",
    }
    jobs[0] = job(1).cpus(1).count(4).gang(4).priority(5).holding_since(0).build()
    p = plan(jobs, offers, now=30, gang_timeout=30, capacity=four)
    assert p.released_job == 1 and p.holding_job is None
    assert _where(p) == [(2, 0, "a")]


def _offer(oid: str, cpus: float) -> OfferView:
    return OfferView(oid, f"agent-{oid}", f"host-{oid}", "*", Resources.of(cpus=cpus, mem=1024, ports=((31000, 31009),)))


def test_the_core_declines_nothing_for_it_and_drops_a_hold_it_had_before_the_cluster_was_known() -> None:
    core = BatchCore(gang_timeout=30)
    gang, _ = core.submit(
        JobSpec(name="g", argv=("true",), cpus=1, mem=64, count=4, gang=4, priority=5), now=0
    )
    offers = [_offer("a", 1), _offer("b", 1)]
    eff = core.schedule(offers, now=0)  # the cluster is not known yet: it holds what it can
    assert core.job(gang).hold_since == 0 and not any(isinstance(e, Decline) for e in eff)
    core.cluster = TWO_CPUS
    small, _ = core.submit(JobSpec(name="s", argv=("true",), cpus=0.2, mem=16), now=1)
    eff = core.schedule(offers, now=1)
    assert [(t.task_id, e.offer_id) for e in eff if isinstance(e, Launch) for t in e.tasks] == [
        ("j2-0-0", "a")
    ]
    assert Decline(("b",), 5.0) in eff  # nothing kept for the gang
    job = core.job(gang)
    assert job.hold_since is None and job.hold_cooldown_until == 0
    assert (
        job.reason
        == "gang 0/4 placed; cannot fit in the cluster: 4 x cpus:1;mem:64 at once, its agents have room for 2"
    )
    assert core.next_wakeup(1) is None  # no hold to time out: it waits for the cluster to change
    # The cluster grows (an agent added): the gang is placeable again and holds, bounded.
    core.cluster = (*TWO_CPUS, AgentCapacity("agent-c", {"cpus": 2.0, "mem": 1024.0}, ports=100))
    core.on_update(f"j{small}-0-0", TaskState.TASK_RUNNING, 2)
    eff = core.schedule([_offer("a", 0.8), _offer("b", 1)], now=2)
    assert (
        job.hold_since == 2
        and job.reason == "gang 1/4 placed; waiting for 1 cpus; largest free offer has 0.8"
    )
    assert core.next_wakeup(2) == 32


def test_an_agent_offered_before_the_cluster_read_sees_it_counts_toward_the_gang() -> None:
    # The cluster was read (every ``cluster_interval``) before agent-c registered; the master
    # offers the gang its units as soon as agent-c is there: the gang starts with them at once,
    # not after the next read of the cluster.
    offers = [offer("a").cpus(1).mem(1024).build(), offer("b").cpus(1).mem(1024).build(),
              offer("c").cpus(2).mem(1024).build()]
    jobs = [job(1).cpus(1).count(4).gang(4).priority(5).build()]
    p = plan(jobs, offers, now=0, capacity=TWO_CPUS)
    assert sorted(_where(p)) == [(1, 0, "a"), (1, 1, "b"), (1, 2, "c"), (1, 3, "c")]
    assert p.reasons == {} and p.holding_job is None


def test_an_agent_offering_more_than_the_cluster_read_says_counts_with_what_it_offers() -> None:
    # agent-b re-registered with 3 cpus since the last read (which says 1)
    offers = [offer("a").cpus(1).mem(1024).build(), offer("b").cpus(3).mem(1024).build()]
    jobs = [job(1).cpus(1).count(4).gang(4).priority(5).build()]
    p = plan(jobs, offers, now=0, capacity=TWO_CPUS)
    assert sorted(_where(p)) == [(1, 0, "a"), (1, 1, "b"), (1, 2, "b"), (1, 3, "b")]
