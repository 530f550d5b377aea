"""Batch planner harness: feed jobs and offers, assert the exact plan and reasons."""

from __future__ import annotations

from frameworks.batch.planner import plan
from protocol.resources import Resources

from .builders import job, offer


def _where(p: object) -> list[tuple[int, int, str]]:
    return [(x.job_id, x.index, x.offer_id) for x in p.placements]  # type: ignore[attr-defined]


def test_array_job_fills_offers_best_fit() -> None:
    p = plan(
        [job(1).cpus(1).mem(100).count(5).build()],
        [offer("a").cpus(2).mem(1000).build(), offer("b").cpus(4).mem(1000).build()],
        now=0,
    )
    # best fit: the tighter offer "a" first, then "b".
    assert _where(p) == [(1, 0, "a"), (1, 1, "a"), (1, 2, "b"), (1, 3, "b"), (1, 4, "b")]
    assert p.reasons == {}


def test_priority_orders_jobs_across_queues_and_reason_names_the_shortfall() -> None:
    p = plan(
        [job(1).cpus(2).build(), job(2).cpus(2).priority(10).build()],
        [offer("a").cpus(2).mem(512).build()],
        now=0,
    )
    assert _where(p) == [(2, 0, "a")]
    assert p.reasons == {1: "waiting for 2 cpus; largest free offer has 0"}


def test_gpu_reason() -> None:
    p = plan([job(1).gpus(4).build()], [offer("a").cpus(8).mem(4096).gpus(2).build()], now=0)
    assert p.placements == ()
    assert p.reasons[1] == "waiting for 4 gpus; largest free offer has 2"


def test_gang_is_all_or_nothing_and_holds_for_itself() -> None:
    p = plan(
        [job(1).cpus(2).count(4).gang(4).build(), job(2).cpus(1).priority(-1).build()],
        [offer("a").cpus(4).mem(4096).build(), offer("b").cpus(1).mem(4096).build()],
        now=0,
    )
    # Only 2 of 4 gang tasks fit: nothing is placed for the gang; "a" is held for it.
    assert p.reasons[1] == "gang 2/4 placed; waiting for 2 cpus; largest free offer has 1"
    assert p.held_offers == {"a"}
    assert p.holding_job == 1
    # Backfill: the small job uses "b", which cannot host a gang task, so it does not delay it.
    assert _where(p) == [(2, 0, "b")]


def test_gang_starts_whole_when_it_fits() -> None:
    p = plan([job(1).cpus(2).count(4).gang(4).build()], [offer("a").cpus(8).mem(4096).build()], now=0)
    assert [x.index for x in p.placements] == [0, 1, 2, 3]
    assert p.held_offers == frozenset()


def test_second_gang_waits_behind_the_head_gang() -> None:
    p = plan(
        [job(1).cpus(4).count(2).gang(2).build(), job(2).cpus(4).count(2).gang(2).build()],
        [offer("a").cpus(4).mem(4096).build()],
        now=0,
    )
    assert p.placements == ()
    assert p.reasons[2] == "gang 0/2 placed; behind gang job 1"
    assert p.holding_job == 1


def test_gang_hold_released_after_timeout() -> None:
    p = plan(
        [job(1).cpus(4).count(2).gang(2).holding_since(0).build(), job(2).cpus(4).count(2).gang(2).build()],
        [offer("a").cpus(4).mem(4096).build(), offer("b").cpus(2).mem(4096).build()],
        now=31,
        gang_timeout=30,
    )
    assert p.released_job == 1
    assert "released held resources after 30s" in p.reasons[1]
    # The next gang becomes the head and holds what it can.
    assert p.holding_job == 2
    assert p.held_offers == {"a"}


def test_started_gang_places_the_rest_one_by_one() -> None:
    p = plan(
        [job(1).cpus(2).count(8).gang(4).pending(4, 5, 6, 7).active(4).build()],
        [offer("a").cpus(2).mem(4096).build()],
        now=0,
    )
    assert _where(p) == [(1, 4, "a")]
    assert p.reasons[1].startswith("1 of 4 pending tasks placed; waiting for 2 cpus")


def test_queue_and_constraints() -> None:
    jobs = [job(1).queue("ml").build(), job(2).constraint("rack", "r2").build()]
    offers = [offer("a").cpus(4).mem(4096).attr("rack", "r1").build()]
    p = plan(jobs, offers, now=0)
    assert p.placements == ()
    assert p.reasons == {1: "no offers for queue 'ml'", 2: "no offered agent matches rack=r2"}
    p2 = plan(jobs, [*offers, offer("m").role("ml").cpus(1).mem(512).build()], now=0)
    assert _where(p2) == [(1, 0, "m")]


def test_revocable_only_for_preemptible_jobs_and_preferred_by_them() -> None:
    o = offer("a").cpus(2).cpus(2, revocable=True).mem(4096).build()
    p = plan([job(1).cpus(2).build(), job(2).cpus(2).preemptible().build()], [o], now=0)
    got = {x.job_id: x.resources for x in p.placements}
    assert got[1] == Resources.of(cpus=2, mem=128)
    assert got[2].revocable().scalar("cpus") == 2
    p2 = plan([job(1).cpus(3).build()], [o], now=0)
    assert p2.reasons[1] == "waiting for 3 cpus; largest free offer has 2"


def test_blocked_jobs_keep_their_reason() -> None:
    p = plan([job(2).after(1).blocked("after job 1").build()], [offer("a").cpus(4).mem(4096).build()], now=0)
    assert p.placements == ()
    assert p.reasons == {2: "after job 1"}


def test_reserved_resources_are_used_by_their_queue() -> None:
    o = offer("a").role("ml").build()
    o = type(o)(o.offer_id, o.agent_id, o.hostname, "ml", Resources.parse("cpus(ml):2;mem(ml):1024"), {})
    p = plan([job(1).queue("ml").cpus(2).build()], [o], now=0)
    assert p.placements[0].resources == Resources.parse("cpus(ml):2;mem(ml):128")


def test_gang_with_no_offers_says_it_waits_for_a_whole_gang() -> None:
    p = plan([job(1).cpus(1).mem(16).count(4).gang(4).build()], [], now=0)
    assert p.reasons[1] == "gang 0/4 placed; waiting for 4 x cpus:1;mem:16 to be offered together"


def test_reason_says_held_resources_are_in_use_rather_than_that_there_are_no_offers() -> None:
    busy = offer("a")  # held, every resource of it in use by running tasks
    p = plan([job(1).cpus(1).count(3).build()], [busy.build()], now=0)
    assert p.placements == () and p.reasons == {1: "all held resources in use"}
    p = plan([job(1).cpus(1).count(3).build()], [], now=0)
    assert p.reasons == {1: "no offers for queue '*'"}
    # Used up by this plan's own placements: the rest of the array waits on them too.
    p = plan([job(1).cpus(1).mem(128).count(3).build()], [offer("b").cpus(2).mem(256).build()], now=0)
    assert _where(p) == [(1, 0, "b"), (1, 1, "b")]
    assert p.reasons == {1: "2 of 3 pending tasks placed; all held resources in use"}
    # A gang whose offers are all busy waits to be offered together (REQUEST with gang_min).
    p = plan([job(1).cpus(1).count(2).gang(2).build()], [busy.build()], now=0)
    assert p.reasons[1] == "gang 0/2 placed; waiting for 2 x cpus:1;mem:128 to be offered together"
