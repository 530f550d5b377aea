"""A gang counts the idle resources its framework already holds in offers (of the gang's role)
toward ``gang_min``: 4 units held on one agent + 4 cpus free on another satisfy a 5-gang, and only
the missing unit is offered. Regression of the batch e2e stall (two 4-cpu agents, gang B of 5 x
cpus:1 holding 4 on agent 2, agent 1 freed by gang A and never offered)."""

from __future__ import annotations

import pytest

from master.allocator import Demand, Offer, Revived

from .conftest import Sim

SHAPE = "cpus:1;mem:100"


def _stalled_setup(sim: Sim, refuse: float | None) -> Offer:
    """Gang A runs 4 tasks on a1 and 1 on a2 (from whole-agent leases: no REQUEST yet); gang B
    (5) is declared; a2's task ends (its cpus flow back into the framework's lease on a2: 4 idle,
    held, not tagged for B); the framework declines its lease on a1 while A still runs there; then
    A's tasks on a1 end and a1 has 4 cpus free."""
    sim.agent("a1").cpus(4).mem(1000).add()
    sim.agent("a2").cpus(4).mem(1000).add()
    sim.framework("batch").reusable().add()
    assert len(sim.created(sim.allocate())) == 2
    o1, o2 = sim.offer_on("batch", "a1"), sim.offer_on("batch", "a2")
    sim.accept("batch", o1.offer_id, *(sim.launch(f"A{i}", SHAPE) for i in range(4)))
    sim.accept("batch", o2.offer_id, sim.launch("A4", SHAPE))
    sim.demand("batch", Demand(sim.R(SHAPE), count=5, gang_id="B", gang_min=5))
    assert sim.allocate() == []  # nothing free anywhere
    sim.finish("batch", "a2", "A4")  # flows back into the a2 lease
    held = sim.offer_on("batch", "a2")
    assert held.resources.scalar("cpus") == 4
    sim.decline("batch", sim.offer_on("batch", "a1").offer_id, refuse=refuse)
    for i in range(4):
        sim.finish("batch", "a1", f"A{i}")
    view = sim.alloc.agent_view("a1")
    assert view is not None and view.free.scalar("cpus") == 4
    return held


@pytest.mark.parametrize("refuse", [None, 1000.0])
def test_gang_counts_its_held_offer_and_is_offered_only_the_missing_unit(sim: Sim, refuse: float | None) -> None:
    held = _stalled_setup(sim, refuse)
    out = sim.allocate()
    assert sim.summary(out) == [("created", "batch", "a1", "cpus:1; mem:100")]
    assert sim.offer_on("batch", "a2").offer_id == held.offer_id  # the held lease stays as it was
    # the framework launches the whole gang: 4 from the held lease, 1 from the new offer
    sim.accept("batch", held.offer_id, *(sim.launch(f"B{i}", SHAPE) for i in range(4)))
    sim.accept("batch", sim.offer_on("batch", "a1").offer_id, sim.launch("B4", SHAPE))
    assert sim.allocate() == []  # gang B met: nothing more is offered
    assert "no unmet demand" in sim.alloc.why_not_offered("batch")


def test_held_offer_alone_short_of_the_gang_offers_nothing(sim: Sim) -> None:
    sim.agent("a1").cpus(4).mem(1000).add()
    sim.agent("a2").cpus(4).mem(1000).add()
    sim.framework("batch").reusable().add()
    offer = sim.created(sim.allocate())
    assert len(offer) == 2  # a framework without REQUEST is offered as in Mesos
    busy = sim.offer_on("batch", "a1")
    sim.accept("batch", busy.offer_id, *(sim.launch(f"x{i}", SHAPE) for i in range(4)))
    sim.demand("batch", Demand(sim.R(SHAPE), count=9, gang_id="G", gang_min=9))
    assert sim.allocate() == []  # 4 held on a2 + 0 free < 9: whole or nothing
    assert "gang G: insufficient resources (4 of 9" in sim.alloc.why_not_offered("batch")


def test_another_frameworks_held_offer_never_counts(sim: Sim) -> None:
    """Two gangs each needing more than half: a held offer counts only for its holder, so they
    never both hold part."""
    sim.agent("a1").cpus(4).mem(1000).add()
    sim.agent("a2").cpus(4).mem(1000).add()
    sim.framework("jobA").reusable().add()
    sim.framework("jobB").reusable().add()
    shape = sim.R(SHAPE)
    sim.demand("jobA", Demand(shape, count=5, gang_id="A", gang_min=5))
    sim.demand("jobB", Demand(shape, count=5, gang_id="B", gang_min=5))
    sim.allocate()
    holders = {o.framework_id for o in sim.alloc.outstanding_offers() if o.resources.scalar("cpus") > 0}
    assert holders == {"jobA"}
    assert sim.allocate() == []
    assert "gang B: insufficient resources" in sim.alloc.why_not_offered("jobB")


def test_a_filter_covering_the_missing_unit_holds_until_revive(sim: Sim) -> None:
    """A DECLINE filter that contains the free resources still applies to a later REQUEST (Mesos:
    only REVIVE or expiry clears it); the reason names the held units."""
    sim.agent("a1").cpus(4).mem(1000).add()
    sim.agent("a2").cpus(4).mem(1000).add()
    sim.framework("batch").reusable().add()
    sim.allocate()
    sim.decline("batch", sim.offer_on("batch", "a1").offer_id, refuse=1000)  # all of a1, idle
    sim.demand("batch", Demand(sim.R(SHAPE), count=5, gang_id="B", gang_min=5))
    assert sim.allocate() == []
    assert "(4 of 5 units placeable at once, 4 of them in offers it holds)" in sim.alloc.why_not_offered("batch")
    sim.handle(Revived("batch"))
    out = sim.allocate()
    assert sim.summary(out) == [("created", "batch", "a1", "cpus:1; mem:100")]
