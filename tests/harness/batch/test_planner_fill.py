"""The planner's one-pass fill of an array places exactly what per-task best fit would: each
task on the eligible offer with the least cpus left after placing it (first of equals)."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from frameworks.batch.model import JobSpec
from frameworks.batch.planner import JobView, OfferView, Placement, carve, matches, plan
from protocol.resources import Resources


def best_fit_per_task(job: JobView, offers: Sequence[OfferView]) -> list[Placement]:
    """The reference: for every task, look at every offer."""
    spec, want = job.spec, job.spec.resources()
    free = {o.offer_id: o.resources for o in offers}
    out: list[Placement] = []
    for index in job.pending:
        best: tuple[float, OfferView, Resources] | None = None
        for o in offers:
            if not matches(spec, o):
                continue
            got = carve(free[o.offer_id], want, spec.queue, spec.preemptible)
            if got is None:
                continue
            left = free[o.offer_id].scalar("cpus") - got.scalar("cpus")
            if best is None or left < best[0]:
                best = (left, o, got)
        if best is None:
            break
        _, o, got = best
        free[o.offer_id] = free[o.offer_id] - got
        out.append(Placement(job.job_id, index, o.offer_id, o.agent_id, got))
    return out


halves = st.integers(0, 12).map(lambda n: n / 2)


@st.composite
def offers(draw: st.DrawFn) -> list[OfferView]:
    out = []
    for i in range(draw(st.integers(0, 8))):
        res = Resources.empty()
        cpus, rcpus, mem = draw(halves), draw(st.sampled_from((0.0, 0.0, 1.0, 2.5))), draw(st.sampled_from((0, 64, 200, 1024)))
        if cpus:
            res = res + Resources.of(cpus=cpus)
        if rcpus:
            res = res + Resources.of(cpus=rcpus, revocable=True)
        if mem:
            res = res + Resources.of(mem=mem)
        role = draw(st.sampled_from(("*", "*", "dev")))
        attrs = {"rack": draw(st.sampled_from(("a", "b")))}
        out.append(OfferView(f"o{i}", f"agent{i}", f"h{i}", role, res, attrs))
    return out


@st.composite
def jobs(draw: st.DrawFn) -> JobView:
    spec = JobSpec(
        name="arr",
        argv=("true",),
        cpus=draw(st.sampled_from((0.5, 1.0, 1.5))),
        mem=draw(st.sampled_from((0.0, 32.0, 100.0))),
        count=draw(st.integers(1, 30)),
        queue=draw(st.sampled_from(("*", "dev"))),
        preemptible=draw(st.booleans()),
        constraints=draw(st.sampled_from(((), (("rack", "a"),)))),
    )
    return JobView(job_id=1, spec=spec, submitted_at=0.0, pending=tuple(range(spec.count)))


@settings(max_examples=150, deadline=None)
@given(jobs(), offers())
def test_fill_places_like_per_task_best_fit(job: JobView, offered: list[OfferView]) -> None:
    assert list(plan([job], offered, now=0).placements) == best_fit_per_task(job, offered)
