"""Resource estimators: noop, fixed, usage (smoothing, margin, compressible only, change-only reports)."""

from __future__ import annotations

import pytest

from agent.estimator import ESTIMATORS, EstimatorError, make_estimator
from protocol.resources import Resources

TOTAL = Resources.parse("cpus:8;mem:16384;disk:10000;ports:[31000-32000]")


def alloc(cpus: float, mem: float = 1024) -> Resources:
    return Resources.of(cpus=cpus, mem=mem)


def test_map_is_explicit() -> None:
    assert set(ESTIMATORS) == {"noop", "fixed", "usage"}


def test_unknown_name_is_a_typed_error() -> None:
    with pytest.raises(EstimatorError, match="unknown resource estimator 'magic'"):
        make_estimator("magic")


def test_noop_reports_empty_once_then_none() -> None:
    est = make_estimator("noop")
    assert est.estimate(TOTAL, alloc(2), {"cpus": 0.1}, 0.0) == Resources.empty()
    assert est.estimate(TOTAL, alloc(4), {"cpus": 0.0}, 1.0) is None
    est.reset()
    assert est.estimate(TOTAL, alloc(4), {}, 2.0) == Resources.empty()


def test_fixed_reports_revocable_amount_once() -> None:
    est = make_estimator("fixed", oversubscribed="cpus:4;mem:512")
    first = est.estimate(TOTAL, alloc(1), {}, 0.0)
    assert first is not None
    assert first == Resources.of(cpus=4, mem=512, revocable=True)
    assert first.revocable() == first
    assert est.estimate(TOTAL, alloc(7), {"cpus": 7}, 5.0) is None


def test_fixed_drops_reservations() -> None:
    est = make_estimator("fixed", oversubscribed="cpus(ml):2")
    assert est.estimate(TOTAL, alloc(1), {}, 0.0) == Resources.of(cpus=2, revocable=True)


@pytest.mark.parametrize(
    "opts", [{}, {"oversubscribed": ""}, {"oversubscribed": "cpus:-1"}, {"oversubscribed": "cpus:0"}]
)
def test_fixed_bad_options(opts: dict[str, str]) -> None:
    with pytest.raises(EstimatorError, match="fixed estimator"):
        make_estimator("fixed", **opts)


def test_fixed_unknown_option() -> None:
    with pytest.raises(EstimatorError, match="unknown options"):
        make_estimator("fixed", oversubscribed="cpus:1", bogus=1)


def test_none_options_are_dropped() -> None:
    est = make_estimator("usage", half_life=None, safety_margin=0.0)
    assert est.name == "usage"


def test_usage_rises_smoothly_and_drops_at_once() -> None:
    est = make_estimator("usage", half_life=10.0, safety_margin=0.0, granularity=0.1)
    # 4 cpus allocated, 1 used: raw slack 3, but the estimate starts at 0 and climbs.
    assert est.estimate(TOTAL, alloc(4), {"cpus": 1.0}, 0.0) == Resources.empty()
    after_one_half_life = est.estimate(TOTAL, alloc(4), {"cpus": 1.0}, 10.0)
    assert after_one_half_life == Resources.of(cpus=1.5, revocable=True)
    later = est.estimate(TOTAL, alloc(4), {"cpus": 1.0}, 20.0)
    assert later == Resources.of(cpus=2.2, revocable=True)  # 1.5 + 1.5/2 = 2.25, rounded down
    # Usage jumps to 3.5: slack drops to 0.5 immediately.
    assert est.estimate(TOTAL, alloc(4), {"cpus": 3.5}, 21.0) == Resources.of(cpus=0.5, revocable=True)
    # Unchanged -> None.
    assert est.estimate(TOTAL, alloc(4), {"cpus": 3.5}, 22.0) is None


def test_usage_safety_margin_and_never_negative() -> None:
    est = make_estimator("usage", half_life=0.001, safety_margin=0.25, granularity=0.1)
    est.estimate(TOTAL, alloc(4), {"cpus": 2.0}, 0.0)
    got = est.estimate(TOTAL, alloc(4), {"cpus": 2.0}, 100.0)
    assert got == Resources.of(cpus=1.0, revocable=True)  # 2 slack - 25% of 4
    # Usage above allocation (bursting): no slack, never negative.
    assert est.estimate(TOTAL, alloc(4), {"cpus": 6.0}, 101.0) == Resources.empty()


def test_usage_ignores_revocable_allocations_and_bad_measurements() -> None:
    est = make_estimator("usage", half_life=0.001, safety_margin=0.0)
    held = alloc(2) + Resources.of(cpus=3, revocable=True)
    est.estimate(TOTAL, held, {"cpus": 0.0}, 0.0)
    assert est.estimate(TOTAL, held, {"cpus": 0.0}, 100.0) == Resources.of(cpus=2, revocable=True)
    # NaN usage must not create slack.
    assert est.estimate(TOTAL, held, {"cpus": float("nan")}, 101.0) == Resources.empty()


def test_usage_only_compressible() -> None:
    with pytest.raises(EstimatorError, match="'mem' is not compressible"):
        make_estimator("usage", resources="cpus,mem")
    with pytest.raises(EstimatorError, match="half_life"):
        make_estimator("usage", half_life=0)
    with pytest.raises(EstimatorError, match="unknown options"):
        make_estimator("usage", alpha=0.3)


def test_usage_memory_is_never_offered() -> None:
    est = make_estimator("usage", half_life=0.001, safety_margin=0.0)
    est.estimate(TOTAL, alloc(2, mem=8000), {"cpus": 0.0, "mem": 10.0}, 0.0)
    got = est.estimate(TOTAL, alloc(2, mem=8000), {"cpus": 0.0, "mem": 10.0}, 50.0)
    assert got is not None and got.names() == frozenset({"cpus"})
