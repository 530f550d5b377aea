"""Offers held unused past ``offer_hold_bound`` are taken back for a starving framework
(master/allocator/starvation.py), exactly when and only when one starves."""

from __future__ import annotations

from master.allocator import Demand, OfferRescinded

from .conftest import make_sim


def test_a_held_offer_goes_to_a_starving_framework_after_the_bound() -> None:
    sim = make_sim(offer_hold_bound=3.0, default_refuse_seconds=5.0)
    sim.agent("a1").cpus(4).mem(1024).add()
    sim.framework("hog").add()
    (offer,) = sim.created(sim.allocate())
    sim.framework("new").add()
    assert sim.allocate() == []  # nothing free: "new" starves
    assert sim.alloc.next_deadline(sim.now) == sim.now + 3.0  # the hog's offer is due then
    assert sim.advance(2.9) == []
    out = sim.advance(0.1)
    assert sim.summary(out) == [("rescinded", "hog", "a1", offer.offer_id), ("created", "new", "a1", "cpus:4; mem:1024")]
    (rescind,) = [d for d in out if isinstance(d, OfferRescinded)]
    assert rescind.reason == "unused for 3.0s while framework new has no offer (offer_hold_bound 3s)"


def test_a_lone_framework_keeps_its_offer() -> None:
    sim = make_sim(offer_hold_bound=3.0)
    sim.agent("a1").cpus(4).mem(1024).add()
    sim.framework("only").add()
    sim.allocate()
    assert sim.advance(20.0) == [] and len(sim.offers("only")) == 1


def test_a_lease_gives_back_only_its_idle_part_and_keeps_its_tasks() -> None:
    sim = make_sim(offer_hold_bound=3.0)
    sim.agent("a1").cpus(4).mem(1024).add()
    sim.framework("batch").reusable().add()
    (lease,) = sim.created(sim.allocate())
    sim.accept("batch", lease.offer_id, sim.launch("t1", "cpus:1;mem:256"))
    sim.framework("pymesos").add()
    out = sim.advance(3.0)
    assert sim.summary(out) == [("updated", "batch", "a1", ""), ("created", "pymesos", "a1", "cpus:3; mem:768")]
    assert sim.alloc.task_view("batch", "t1") is not None


def test_a_starving_framework_that_cannot_use_the_offer_takes_nothing() -> None:
    sim = make_sim(offer_hold_bound=3.0)
    sim.agent("g1").cpus(4).mem(1024).gpus(1).add()
    sim.framework("gpu").gpu().add()
    sim.allocate()
    sim.framework("cpu-only").add()  # may not be offered a GPU agent's resources
    assert sim.advance(10.0) == []


def test_the_holder_sits_out_only_the_one_pass() -> None:
    sim = make_sim(offer_hold_bound=3.0, default_refuse_seconds=5.0)
    sim.agent("a1").cpus(4).mem(1024).add()
    sim.framework("hog").add()
    sim.allocate()
    sim.framework("new").add()
    out = sim.advance(3.0)
    (given,) = sim.created(out)
    assert given.framework_id == "new"
    # the newcomer does not want it after all: the former holder gets it back at once, not
    # after a refuse filter
    sim.decline("new", given.offer_id, refuse=60.0)
    assert [(o.framework_id, str(o.resources)) for o in sim.created(sim.allocate())] == [("hog", "cpus:4; mem:1024")]


def test_offers_a_gang_counts_toward_its_minimum_are_not_taken_one_by_one() -> None:
    """A gang holds two offers toward its gang_min of 2; a starving framework could use only one
    of them (the other is on a GPU agent). Taking that one would leave the gang half placed, so
    neither is taken: the gang's hold is whole or nothing (found by the allocator state machine)."""
    sim = make_sim(offer_hold_bound=3.0)
    sim.agent("a1").cpus(1).mem(100).add()
    sim.agent("g1").cpus(1).mem(100).gpus(1).add()
    sim.framework("ml").gpu().add()
    assert len(sim.created(sim.allocate())) == 2
    sim.demand("ml", Demand(sim.R("cpus:1;mem:100"), count=2, gang_id="G", gang_min=2))
    assert sim.allocate() == []
    (gang,) = sim.alloc.ledger.frameworks["ml"].demands
    assert gang.in_offers == 2
    sim.framework("cpu-only").add()  # holds nothing: starves
    assert sim.advance(3.0) == [] and sim.advance(10.0) == []
    assert gang.in_offers == 2 and len(sim.offers("ml")) == 2
