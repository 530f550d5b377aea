"""The allocator's hooks and shared types: victim selection (``AllocatorConfig.victims``) and the
tentative placement (``protocol.placement.Tentative``) of a gang's units. Exact decisions."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from master.allocator import Accepted, AgentSlackEstimated, AllocatorConfig, Demand, Revoke
from master.allocator.state import TaskAlloc
from master.allocator.victims import LowestPriorityLargestFirst
from protocol.placement import DraftState, Tentative, TentativeClosed
from protocol.resources import Resources

from .conftest import Sim


class HighestPriorityFirst:
    """A policy unlike the default: the most important task goes first."""

    def choose(self, candidates: Sequence[TaskAlloc], over: Resources) -> list[TaskAlloc]:
        return sorted(candidates, key=lambda t: (-t.priority, t.task_id))[:1]


def _revoke_after_shrink(sim: Sim) -> list[tuple[str, tuple[str, ...]]]:
    """Two revocable tasks (r1 priority 1, r2 priority 0) on n1, then the estimate shrinks."""
    sim.agent("n1").cpus(4).mem(400).add()
    sim.framework("plain").add()
    o = sim.created(sim.allocate())[0]
    sim.accept("plain", o.offer_id, sim.launch("t1", "cpus:4;mem:400"))
    sim.framework("be").revocable().add()
    sim.handle(AgentSlackEstimated("n1", sim.R("cpus:3;mem:300")))
    offer = sim.created(sim.allocate())[0]
    rev = sim.R("cpus:1;mem:100").as_revocable()
    res = sim.accept("be", offer.offer_id, sim.launch("r1", str(rev), priority=1), sim.launch("r2", str(rev)))
    assert isinstance(res, Accepted)
    out = sim.handle(AgentSlackEstimated("n1", sim.R("cpus:1;mem:100")))
    return [(d.framework_id, d.task_ids) for d in out if isinstance(d, Revoke)]


def test_default_victim_policy_revokes_the_lowest_priority_task() -> None:
    sim = Sim(AllocatorConfig(offer_id_prefix="t"))
    assert isinstance(sim.alloc.config.victims, LowestPriorityLargestFirst)
    assert _revoke_after_shrink(sim) == [("be", ("r2",))]


def test_a_plugged_victim_policy_decides_who_is_revoked() -> None:
    sim = Sim(AllocatorConfig(offer_id_prefix="t", victims=HighestPriorityFirst()))
    assert _revoke_after_shrink(sim) == [("be", ("r1",))]


def test_default_policy_prefers_the_larger_task_at_equal_priority_and_stops_when_covered() -> None:
    def task(tid: str, cpus: float, priority: int = 0) -> TaskAlloc:
        return TaskAlloc("f", tid, "a", "r", Resources(), Resources.of(cpus=cpus), None, priority)

    small, big, other = task("s", 1), task("b", 3), task("o", 1, priority=5)
    chosen = LowestPriorityLargestFirst().choose([small, other, big], Resources.of(cpus=2))
    assert [t.task_id for t in chosen] == ["b"]
    chosen = LowestPriorityLargestFirst().choose([small, other, big], Resources.of(cpus=4.5))
    assert [t.task_id for t in chosen] == ["b", "s", "o"]


# --- the tentative placement --------------------------------------------------------------------


def test_tentative_works_on_a_copy_until_commit() -> None:
    base = {"o1": Resources.of(cpus=4), "o2": Resources.of(cpus=1)}
    draft: Tentative[str, str] = Tentative(base)
    draft.place("o1", Resources.of(cpus=3), "t0")
    draft.hold("o2", Resources.of(cpus=1))
    assert (draft.free("o1"), draft.free("o2"), draft.get("o3")) == (Resources.of(cpus=1), Resources(), None)
    assert base == {"o1": Resources.of(cpus=4), "o2": Resources.of(cpus=1)}  # untouched so far
    draft.release("o2", Resources.of(cpus=1))
    draft.place("elsewhere", Resources.of(cpus=9), "t1", units=2)  # a key without a copy: recorded only
    assert (draft.placed, draft.units, len(draft)) == (["t0", "t1"], 3, 2)
    assert draft.changes() == {"o1": Resources.of(cpus=1), "o2": Resources.of(cpus=1)}
    assert draft.commit(base) == ["t0", "t1"]
    assert base == {"o1": Resources.of(cpus=1), "o2": Resources.of(cpus=1)}
    assert draft.state is DraftState.COMMITTED
    with pytest.raises(TentativeClosed, match=r"^the tentative placement is already committed$"):
        draft.place("o1", Resources.of(cpus=1), "t2")


def test_a_discarded_tentative_leaves_the_base_alone_and_refuses_a_commit() -> None:
    base = {"o1": Resources.of(cpus=4)}
    draft: Tentative[str, str] = Tentative(base)
    draft.place("o1", Resources.of(cpus=4), "t0")
    draft.discard()
    assert base == {"o1": Resources.of(cpus=4)}
    with pytest.raises(TentativeClosed, match=r"^the tentative placement is already discarded$"):
        draft.commit(base)


def test_the_demand_stage_discards_a_gang_short_of_its_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    ends: list[str] = []
    commit, discard = Tentative.commit, Tentative.discard

    def spy_commit(self: Tentative[str, object], into: dict[str, Resources] | None = None) -> list[object]:
        ends.append(f"commit {self.units}")
        return commit(self, into)

    def spy_discard(self: Tentative[str, object]) -> None:
        ends.append(f"discard {self.units}")
        discard(self)

    monkeypatch.setattr(Tentative, "commit", spy_commit)
    monkeypatch.setattr(Tentative, "discard", spy_discard)
    sim = Sim(AllocatorConfig(offer_id_prefix="t"))
    sim.agent("a1").cpus(2).mem(1000).add()
    sim.agent("a2").cpus(1).mem(1000).add()
    sim.framework("f").role("ml").add()
    sim.demand("f", Demand(Resources.parse("cpus:1;mem:100"), 4, "g", 4))
    assert sim.allocate() == []  # 3 of 4 units placeable: nothing offered
    assert ends == ["discard 3"]
    assert sim.alloc.why_not_offered("f") == "gang g: insufficient resources (3 of 4 units placeable at once)"
    sim.agent("a3").cpus(1).mem(1000).add()
    out = sim.allocate()  # the next round (no sweep needed): every agent with free resources
    assert sorted((o.agent_id, str(o.resources)) for o in sim.created(out)) == [
        ("a1", "cpus:2; mem:200"), ("a2", "cpus:1; mem:100"), ("a3", "cpus:1; mem:100")]
    assert ends == ["discard 3", "commit 4"]
