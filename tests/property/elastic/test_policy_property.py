"""Policy invariants: a job holding its minimum never goes below it; nobody exceeds its maximum;
targets fit in held + free capacity per kind; a started job gets at least its minimum."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from frameworks.elastic.policy import Capacity, JobView, plan


@st.composite
def jobs(draw: st.DrawFn) -> list[JobView]:
    out = []
    for i in range(draw(st.integers(0, 6))):
        lo = draw(st.integers(1, 6))
        hi = draw(st.integers(lo, 12))
        total = draw(st.one_of(st.just(0), st.integers(0, hi + 3)))
        rev = draw(st.integers(0, total))
        out.append(
            JobView(
                f"j{i}",
                lo,
                hi,
                regular=total - rev,
                revocable=rev,
                priority=draw(st.integers(0, 2)),
                revocable_ok=draw(st.booleans()),
                order=float(i),
            )
        )
    return out


@settings(max_examples=200, deadline=None)
@given(js=jobs(), reg=st.integers(0, 30), rev=st.integers(0, 15), margin=st.sampled_from([0.0, 0.1]))
def test_policy_invariants(js: list[JobView], reg: int, rev: int, margin: float) -> None:
    p = plan(js, Capacity(reg, rev), margin=margin)
    for v in js:
        t = p.target(v.job_id)
        assert t.regular >= 0 and t.revocable >= 0
        assert t.total <= v.max_workers
        if v.current >= v.min_workers:
            assert t.total >= v.min_workers, (v, t)
        if v.current == 0 and t.total > 0:
            assert v.job_id in p.started and t.regular >= v.min_workers
        if v.current == 0 and t.total == 0:
            assert v.job_id in p.reasons
        if not v.revocable_ok:
            assert t.revocable <= v.revocable
        if t.total < v.max_workers:
            assert v.job_id in p.reasons
    assert sum(t.regular for t in p.targets.values()) <= sum(v.regular for v in js) + reg
    assert sum(t.revocable for t in p.targets.values()) <= sum(v.revocable for v in js) + rev
    # the plan is a fixed point: planning from it with the leftover capacity changes nothing
    left_reg = sum(v.regular for v in js) + reg - sum(t.regular for t in p.targets.values())
    left_rev = sum(v.revocable for v in js) + rev - sum(t.revocable for t in p.targets.values())
    again = plan(
        [
            JobView(
                v.job_id,
                v.min_workers,
                v.max_workers,
                p.target(v.job_id).regular,
                p.target(v.job_id).revocable,
                v.priority,
                v.revocable_ok,
                v.order,
            )
            for v in js
        ],
        Capacity(left_reg, left_rev),
        margin=margin,
    )
    assert again.changes == (), again.changes
