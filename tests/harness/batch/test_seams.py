"""The batch planner's and preemption's seams: a gang is placed on a
``protocol.placement.Tentative`` (committed whole or discarded), and victims are chosen by the
``Evictions.victims`` hook (``preempt.choose`` by default). Exact outcomes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from frameworks.batch.core import BatchCore, Kill, Launch
from frameworks.batch.model import JobSpec
from frameworks.batch.planner import OfferView, plan
from frameworks.batch.preempt import Candidate, Need, choose
from protocol.placement import Tentative
from protocol.resources import Resources
from protocol.task_states import TaskState

from .builders import job, offer


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    ends: list[str] = []
    commit, discard = Tentative.commit, Tentative.discard

    def spy_commit(self: Tentative[str, object], into: dict[str, Resources] | None = None) -> list[object]:
        ends.append(f"commit {len(self)}")
        return commit(self, into)

    def spy_discard(self: Tentative[str, object]) -> None:
        ends.append(f"discard {len(self)}")
        discard(self)

    monkeypatch.setattr(Tentative, "commit", spy_commit)
    monkeypatch.setattr(Tentative, "discard", spy_discard)
    return ends


def test_a_whole_gang_is_committed(monkeypatch: pytest.MonkeyPatch) -> None:
    ends = _spy(monkeypatch)
    p = plan([job(1).cpus(2).count(4).gang(4).build()], [offer("a").cpus(8).mem(4096).build()], now=0)
    assert [(x.index, x.offer_id) for x in p.placements] == [(0, "a"), (1, "a"), (2, "a"), (3, "a")]
    assert ends == ["commit 4"]
    assert p.free_after["a"].scalar("cpus") == 0.0


def test_a_short_gang_past_its_hold_is_discarded_and_leaves_the_offers_to_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ends = _spy(monkeypatch)
    p = plan(
        [job(1).cpus(2).count(4).gang(4).holding_since(0).build(), job(2).cpus(1).priority(-1).build()],
        [offer("a").cpus(4).mem(4096).build()],
        now=100,
    )
    assert ends == ["discard 2", "commit 1"]  # the gang's 2 of 4 dropped; job 2 placed on "a"
    assert [(x.job_id, x.offer_id) for x in p.placements] == [(2, "a")]
    assert p.released_job == 1


# --- the victim hook ------------------------------------------------------------------------------

S = TaskState


def _spec(**kw: object) -> JobSpec:
    base: dict[str, object] = {"name": "j", "argv": ("true",), "cpus": 1.0, "mem": 64.0}
    base.update(kw)
    return JobSpec(**base)  # type: ignore[arg-type]


def _offer(agent: str, cpus: float) -> OfferView:
    res = Resources.of(cpus=cpus, mem=1024) if cpus else Resources.empty()
    return OfferView(f"o-{agent}", agent, f"host-{agent}", "*", res)


def _kills_for_a_two_cpu_preemptor(core: BatchCore) -> list[str]:
    core.submit(_spec(count=4, cpus=1, preemptible=True, priority=1), 0)
    for e in core.schedule([_offer("a", 4)], 1):
        if isinstance(e, Launch):
            for t in e.tasks:
                core.on_update(t.task_id, S.TASK_RUNNING, 2)
    core.submit(_spec(cpus=2, priority=10, preempt=True), 3)
    return [e.task_id for e in core.schedule([_offer("a", 0)], 4) if isinstance(e, Kill)]


def highest_index_first(
    need: Need, free: Mapping[str, Mapping[str, float]], candidates: Sequence[Candidate]
) -> tuple[Candidate, ...] | None:
    """Unlike the default: the last tasks of a job go first (two, enough for one 2-cpu task)."""
    return tuple(sorted(candidates, key=lambda c: -c.index)[:2])


def test_default_victims_are_the_fewest_lowest_indexes() -> None:
    core = BatchCore()
    assert core.evictions.victims is choose
    assert _kills_for_a_two_cpu_preemptor(core) == ["j1-0-0", "j1-1-0"]


def test_a_plugged_victim_policy_decides_who_is_evicted() -> None:
    core = BatchCore()
    core.evictions.victims = highest_index_first
    assert _kills_for_a_two_cpu_preemptor(core) == ["j1-3-0", "j1-2-0"]


def test_the_core_takes_the_victim_policy_as_an_argument() -> None:
    core = BatchCore(victims=highest_index_first)
    assert core.evictions.victims is highest_index_first
    assert _kills_for_a_two_cpu_preemptor(core) == ["j1-3-0", "j1-2-0"]
