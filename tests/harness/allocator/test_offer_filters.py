"""Mesos' per-framework offer filters (``FrameworkInfo.offer_filters``: minimum allocatable
resources by role): they replace the allocator's minimum for that framework in that role, in the
DRF, quota and revocable stages; an empty list of alternatives admits any amount."""

from __future__ import annotations

from collections.abc import Callable

from master.allocator import AgentSlackEstimated, FrameworkAdded, OfferCreated, QuotaSet

from .conftest import Sim


def _add(sim: Sim, fid: str, roles: tuple[str, ...], minimum: dict[str, tuple[dict[str, float], ...]],
         caps: frozenset[str] = frozenset()) -> None:
    sim.handle(FrameworkAdded(fid, roles, caps, min_allocatable=minimum))


def test_a_framework_minimum_passes_over_agents_with_less(sim: Sim) -> None:
    sim.agent("small").cpus(2).mem(1000).add()
    sim.agent("big").cpus(8).mem(1000).add()
    _add(sim, "f", ("*",), {"*": ({"cpus": 4.0},)})
    out = sim.allocate()
    assert sim.summary(out) == [("created", "f", "big", "cpus:8; mem:1000")]
    assert sim.alloc.ledger.own_minimum == {"f": None}
    sim.framework("g").add()  # the allocator's minimum: the small agent is offered to it
    assert sim.summary(sim.allocate()) == [("created", "g", "small", "cpus:2; mem:1000")]


def test_alternatives_and_other_roles(sim: Sim) -> None:
    sim.agent("a").cpus(1).mem(2048).add()
    # web: 2 cpus, or 1 GB of memory; batch: the allocator's minimum
    _add(sim, "f", ("web",), {"web": ({"cpus": 2.0}, {"mem": 1024.0}), "batch": ({"cpus": 100.0},)})
    assert sim.summary(sim.allocate()) == [("created", "f", "a", "cpus:1; mem:2048")]


def test_an_empty_minimum_admits_what_the_allocator_minimum_would_not(sim: Sim) -> None:
    sim.agent("a").disk(100).add()  # no cpus, no mem: below the default minimum (cpus:0.01 | mem:32)
    sim.framework("plain").add()
    assert sim.allocate() == []
    _add(sim, "f", ("*",), {"*": ()})
    assert sim.summary(sim.allocate()) == [("created", "f", "a", "disk:100")]


def test_quota_stage_checks_the_chosen_framework_minimum(sim: Sim, sim_factory: Callable[[], Sim]) -> None:
    def run(s: Sim, minimum: dict[str, tuple[dict[str, float], ...]]) -> list[tuple[str, str]]:
        s.agent("a").cpus(4).mem(1000).add()
        _add(s, "picky", ("q",), minimum)
        s.handle(QuotaSet("q", s.R("cpus:2;mem:100")))
        return [(str(d.offer.resources), d.reason) for d in s.allocate() if isinstance(d, OfferCreated)]

    # the guarantee's 2 cpus are less than it takes: not offered in the quota stage; DRF then
    # offers the whole agent
    assert run(sim, {"q": ({"cpus": 3.0},)}) == [("cpus:4; mem:1000", "DRF: lowest weighted dominant share")]
    assert run(sim_factory(), {}) == [
        ("cpus:2; mem:100", "quota guarantee of role q"), ("cpus:2; mem:900", "DRF: lowest weighted dominant share")]


def test_revocable_offers_respect_the_framework_minimum(sim: Sim) -> None:
    sim.agent("a").cpus(4).mem(1000).add()
    sim.framework("holder").reusable().add()
    sim.allocate()
    sim.accept("holder", sim.offer_on("holder", "a").offer_id, sim.launch("t", "cpus:4;mem:1000"))
    sim.handle(AgentSlackEstimated("a", sim.R("cpus:2;mem:200")))
    _add(sim, "be", ("*",), {"*": ({"cpus": 3.0},)}, frozenset({"REVOCABLE_RESOURCES"}))
    assert sim.allocate() == []
    _add(sim, "be", ("*",), {"*": ({"cpus": 2.0},)}, frozenset({"REVOCABLE_RESOURCES"}))
    assert [(o.framework_id, str(o.revocable)) for o in sim.created(sim.allocate())] == [
        ("be", "cpus{REV}:2; mem{REV}:200")]
