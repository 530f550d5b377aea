from __future__ import annotations

import pytest

from frameworks.elastic.policy import Capacity, JobView, PolicyError, fulfillment, plan


def job(jid: str, lo: int, hi: int, reg: int = 0, rev: int = 0, **kw: object) -> JobView:
    return JobView(jid, lo, hi, reg, rev, **kw)  # type: ignore[arg-type]


def test_fulfillment_formula() -> None:
    assert fulfillment(2, 2, 10) == 0.0
    assert fulfillment(6, 2, 10) == 0.5
    assert fulfillment(1, 2, 10) < 0
    assert fulfillment(3, 3, 3) == 1.0


def test_pending_job_starts_only_when_its_min_fits() -> None:
    p = plan([job("a", 4, 8)], Capacity(regular=3))
    assert p.target("a").total == 0 and p.started == ()
    assert "minimum of 4" in p.reasons["a"]
    p = plan([job("a", 4, 8)], Capacity(regular=4))
    assert p.started == ("a",) and p.target("a").regular == 4


def test_workers_beyond_min_prefer_revocable() -> None:
    p = plan([job("a", 2, 6)], Capacity(regular=10, revocable=3))
    assert (p.target("a").regular, p.target("a").revocable) == (3, 3)
    p = plan([job("a", 2, 6, revocable_ok=False)], Capacity(regular=1, revocable=3))
    assert p.target("a").total == 0  # min needs regular; revocable refused
    p = plan([job("b", 2, 6, reg=2, revocable_ok=False)], Capacity(regular=0, revocable=3))
    assert p.target("b").total == 2 and "refuses" in p.reasons["b"]


def test_free_capacity_goes_to_lowest_fulfillment() -> None:
    jobs = [job("a", 2, 10, reg=8), job("b", 2, 10, reg=2)]
    p = plan(jobs, Capacity(regular=2))
    # b (0.0) is served before a (0.75); then rebalance evens them out
    assert p.target("a").total == 6 and p.target("b").total == 6


def test_new_job_min_comes_from_most_fulfilled_without_breaking_its_min() -> None:
    jobs = [job("full", 2, 6, reg=6), job("half", 2, 10, reg=6), job("new", 3, 3)]
    p = plan(jobs, Capacity(regular=0))
    assert "new" in p.started and p.target("new").total == 3
    # full (1.0) is drained first; nobody goes below min; nothing is lost or created
    assert p.target("full").total >= 2 and p.target("half").total >= 2
    assert sum(t.total for t in p.targets.values()) == 12


def test_new_job_takes_nothing_if_min_cannot_be_gathered() -> None:
    jobs = [job("a", 4, 6, reg=5), job("new", 3, 4)]
    p = plan(jobs, Capacity(regular=1))
    assert p.target("new").total == 0 and p.target("a").total == 6
    assert "reclaimable" in p.reasons["new"]


def test_two_jobs_converge_to_even_fulfillment_split() -> None:
    p = plan([job("a", 2, 10, reg=10), job("b", 2, 10)], Capacity(regular=0))
    assert (p.target("a").total, p.target("b").total) == (5, 5)
    # stable: planning again from the result changes nothing
    again = plan(
        [job("a", 2, 10, reg=p.target("a").regular), job("b", 2, 10, reg=p.target("b").regular)], Capacity(0)
    )
    assert again.changes == ()


def test_unequal_jobs_split_by_fulfillment() -> None:
    # a: 1..5 (span 4), b: 1..9 (span 8), 10 slots => a 4 (0.75), b 6 (0.625) or similar near-equal split
    p = plan([job("a", 1, 5), job("b", 1, 9)], Capacity(regular=10))
    fa = fulfillment(p.target("a").total, 1, 5)
    fb = fulfillment(p.target("b").total, 1, 9)
    assert p.target("a").total + p.target("b").total == 10
    assert abs(fa - fb) <= 0.25


def test_higher_priority_takes_from_lower_down_to_its_min() -> None:
    p = plan([job("low", 2, 8, reg=8), job("high", 2, 8, priority=5)], Capacity(regular=0))
    assert p.target("high").total == 6 and p.target("low").total == 2


def test_scale_down_max_shrinks_revocable_first() -> None:
    p = plan([job("a", 1, 3, reg=2, rev=3)], Capacity(0))
    assert (p.target("a").regular, p.target("a").revocable) == (2, 1)


def test_degraded_job_below_min_is_served_first() -> None:
    p = plan([job("a", 4, 8, reg=2), job("b", 1, 8, reg=1)], Capacity(regular=2))
    assert p.target("a").total == 4


def test_bad_input() -> None:
    with pytest.raises(PolicyError):
        job("a", 3, 2)
    with pytest.raises(PolicyError):
        plan([job("a", 1, 2), job("a", 1, 2)], Capacity(1))
    with pytest.raises(PolicyError):
        plan([], Capacity(-1))
