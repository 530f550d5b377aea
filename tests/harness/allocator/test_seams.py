"""The allocator's seams: the sorter behind ``AllocatorConfig.role_sorter``/``framework_sorter``
and the eligibility chain (``eligibility.ELIGIBILITY``). Exact decisions: one answer each."""

from __future__ import annotations

import pytest

from master.allocator import AllocatorConfig, FrameworkAdded, OfferRescinded, Predicate
from master.allocator.constraints import AttributeConstraint
from master.allocator.eligibility import (
    CONSTRAINT_REASON,
    DEMAND,
    DRF,
    ELIGIBILITY,
    GPU_REASON,
    HELD_CONSTRAINTS,
    HELD_GPU,
    LEASE,
    QUOTA,
    REVOCABLE,
    STARVATION,
    chain,
    why_not,
)
from master.allocator.sorter import AgeSorter, DRFSorter, Totals
from protocol.resources import Resources

from .conftest import Sim


def _two_frameworks_one_busy(sim: Sim) -> None:
    """f1 (older) runs a task on all of a1; f2 holds nothing; then a2 comes."""
    sim.agent("a1").cpus(4).mem(1024).add()
    sim.framework("f1").role("r").add()
    sim.allocate()
    (o1,) = sim.offers("f1")
    sim.accept("f1", o1.offer_id, sim.launch("t1", "cpus:4;mem:1024"))
    sim.framework("f2").role("r").add()
    sim.agent("a2").cpus(2).mem(512).add()


def test_drf_framework_sorter_gives_the_new_agent_to_the_lowest_share() -> None:
    sim = Sim(AllocatorConfig(offer_id_prefix="t"))
    _two_frameworks_one_busy(sim)
    assert sim.summary(sim.allocate()) == [("created", "f2", "a2", "cpus:2; mem:512")]


def test_age_framework_sorter_serves_the_oldest_framework_first() -> None:
    sim = Sim(AllocatorConfig(offer_id_prefix="t", framework_sorter=AgeSorter))
    _two_frameworks_one_busy(sim)
    assert sim.summary(sim.allocate()) == [("created", "f1", "a2", "cpus:2; mem:512")]
    # shares are still kept for views and quota: f1 holds everything
    assert sim.alloc.framework_share("f1", "r") == 1.0
    assert sim.alloc.framework_share("f2", "r") == 0.0


def test_age_role_sorter_orders_roles_by_arrival_not_share() -> None:
    for factory, winner in ((DRFSorter, "small"), (AgeSorter, "big")):
        sim = Sim(AllocatorConfig(offer_id_prefix="t", role_sorter=factory))
        sim.agent("a1").cpus(4).mem(1024).add()
        sim.framework("fb").role("big").add()
        sim.allocate()
        (o1,) = sim.offers("fb")
        sim.accept("fb", o1.offer_id, sim.launch("t1", "cpus:4;mem:1024"))
        sim.framework("fs").role("small").add()
        sim.agent("a2").cpus(2).mem(512).add()
        (made,) = sim.created(sim.allocate())
        assert (made.role, made.agent_id) == (winner, "a2"), factory


def test_age_sorter_requeues_a_reactivated_client_at_the_end() -> None:
    s = AgeSorter(Totals())
    for name in ("a", "b", "c"):
        s.add(name)
    s.deactivate("a")
    s.activate("a")
    s.update("b", {"cpus": 5.0})
    assert s.sorted() == ["b", "c", "a"]
    assert [k[2] for k in s.first_keys()] == ["b", "c", "a"]
    assert s.allocation("b") == {"cpus": 5.0}
    s.remove("c")
    assert (s.sorted(), len(s), "c" in s) == (["b", "a"], 2, False)


# --- the eligibility chain ------------------------------------------------------------------


def test_the_chain_is_one_named_ordered_tuple() -> None:
    assert [c.name for c in ELIGIBILITY] == [
        "agent_active", "framework_active", "role_offered", "role_not_suppressed", "plain_drf",
        "revocable_capable", "gpu_capability", "offer_constraints", "no_filter", "nonempty", "not_declined",
        "minimum_allocatable",
    ]
    names = {c.name for c in ELIGIBILITY}
    for stage in (DRF, QUOTA, DEMAND, REVOCABLE, STARVATION, LEASE):
        assert set(c.name for c in stage) <= names
        assert list(stage) == [c for c in ELIGIBILITY if c in stage]  # the chain's order
    assert [c.name for c in LEASE] == [
        "agent_active", "framework_active", "role_not_suppressed", "gpu_capability", "offer_constraints"]


def test_each_check_gives_its_own_reason(sim: Sim) -> None:
    rack = AttributeConstraint.make(Predicate.TEXT_EQUALS, attribute="rack", text="r1")
    sim.agent("gpu").cpus(4).mem(1024).gpus(1).attr("rack", "r1").add()
    sim.agent("r2").cpus(4).mem(1024).attr("rack", "r2").add()
    sim.agent("r1").cpus(4).mem(1024).attr("rack", "r1").add()
    sim.handle(FrameworkAdded("f", ("ml",), frozenset(), offer_constraints={"ml": ((rack,),)}))
    ledger = sim.alloc.ledger
    fw = ledger.frameworks["f"]
    agents = ledger.agents
    free = agents["r1"].free
    assert why_not(DRF, ledger, fw, "ml", agents["gpu"], agents["gpu"].free) == GPU_REASON
    assert why_not(DRF, ledger, fw, "ml", agents["r2"], agents["r2"].free) == CONSTRAINT_REASON
    assert why_not(DRF, ledger, fw, "ml", agents["r1"], free) is None
    assert why_not(DRF, ledger, fw, "other", agents["r1"], free) == "framework not subscribed in role other"
    assert why_not(REVOCABLE, ledger, fw, "ml", agents["r1"], free) == (
        "framework lacks the REVOCABLE_RESOURCES capability")
    assert why_not(DRF, ledger, fw, "ml", agents["r1"], free.only("disk")) == (
        "nothing left for the role here (reservations, quota limit, guarantees' headroom)")
    assert why_not(DRF, ledger, fw, "ml", agents["r1"], Resources.parse("mem:8")) == (
        "below the minimum allocatable resources")
    # the triple alone (no candidate): the candidate's checks are skipped
    assert why_not(DRF, ledger, fw, "ml", agents["r1"]) is None
    sim.allocate()
    (offer,) = sim.offers("f")
    sim.decline("f", offer.offer_id, refuse=100)
    assert why_not(DRF, ledger, fw, "ml", agents["r1"], free) == "a DECLINE filter covers these resources"
    sim.alloc.handle(FrameworkAdded("f", ("ml",), frozenset(), active=False), sim.now)
    assert why_not(chain("framework_active"), ledger, fw, "ml", agents["r1"]) == "framework inactive (disconnected)"


def test_an_unknown_check_name_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^unknown eligibility checks \['no_such_check'\]$"):
        chain("agent_active", "no_such_check")


def test_held_offers_and_why_not_offered_use_the_chains_checks(sim: Sim) -> None:
    assert [c.name for c in HELD_GPU] == ["gpu_capability"]
    assert [c.name for c in HELD_CONSTRAINTS] == ["offer_constraints"]
    sim.agent("a").cpus(4).mem(1024).gpus(1).attr("rack", "r1").add()
    sim.agent("b").cpus(4).mem(1024).attr("rack", "r1").add()
    sim.handle(FrameworkAdded("f", ("ml",), frozenset({"GPU_RESOURCES"})))
    sim.allocate()
    assert sorted(o.agent_id for o in sim.offers("f")) == ["a", "b"]
    # re-subscribed without GPU_RESOURCES and with a constraint b fails: each offer goes back with
    # the reason of the check that refuses it now
    other = AttributeConstraint.make(Predicate.TEXT_EQUALS, attribute="rack", text="r2")
    out = sim.handle(FrameworkAdded("f", ("ml",), frozenset(), offer_constraints={"ml": ((other,),)}))
    assert [(d.agent_id, d.reason) for d in out if isinstance(d, OfferRescinded)] == [
        ("a", GPU_REASON), ("b", CONSTRAINT_REASON)]
    assert len(out) == 2
    assert sim.alloc.why_not_offered("f") == f"every agent is excluded: {CONSTRAINT_REASON} (offer_constraints)"
