"""Offer constraints (Mesos 1.11's ``offer_constraints``) in every stage of the allocator: an
agent is offered to a framework in a role only if it satisfies every constraint of one of the
role's groups; a change of constraints (UPDATE_FRAMEWORK) takes back what they now exclude, and an
agent that re-registers with other attributes is judged again."""

from __future__ import annotations

from master.allocator import (
    AgentAdded,
    AgentSlackEstimated,
    AttributeConstraint,
    Demand,
    FrameworkAdded,
    Predicate,
    Pseudo,
    QuotaSet,
)
from master.allocator.constraints import RoleConstraints
from master.allocator.eligibility import CONSTRAINT_REASON

from .conftest import Sim


def rack(value: str) -> AttributeConstraint:
    return AttributeConstraint.make(Predicate.TEXT_EQUALS, attribute="rack", text=value)


def only(role: str, *groups: tuple[AttributeConstraint, ...]) -> dict[str, RoleConstraints]:
    return {role: tuple(groups)}


def _cluster(sim: Sim) -> None:
    sim.agent("a1").cpus(4).mem(1000).attr("rack", "r1").add()
    sim.agent("a2").cpus(4).mem(1000).attr("rack", "r2").add()
    sim.agent("a3").cpus(4).mem(1000).add()  # no rack


def _add(sim: Sim, fid: str, roles: tuple[str, ...], oc: dict[str, RoleConstraints], caps: frozenset[str] = frozenset()) -> None:
    sim.handle(FrameworkAdded(fid, roles, caps, offer_constraints=oc))


def _agents_of(sim: Sim, fid: str) -> set[str]:
    return {o.agent_id for o in sim.alloc.offers_of(fid)}


def test_drf_offers_only_agents_that_satisfy_a_group(sim: Sim) -> None:
    _cluster(sim)
    _add(sim, "f", ("*",), only("*", (rack("r1"),), (rack("r2"),)))
    sim.framework("g").add()  # unconstrained: gets what f may not have
    out = sim.allocate()
    assert sorted((o.framework_id, o.agent_id) for o in sim.created(out)) == [("f", "a1"), ("f", "a2"), ("g", "a3")]


def test_a_group_needs_all_its_constraints(sim: Sim) -> None:
    _cluster(sim)
    slots = AttributeConstraint.make(Predicate.EXISTS, attribute="slots")
    _add(sim, "f", ("*",), only("*", (rack("r1"), slots)))
    assert sim.allocate() == []
    assert sim.alloc.why_not_offered("f") == f"every agent is excluded: {CONSTRAINT_REASON} (offer_constraints)"
    sim.handle(AgentAdded("a1", "h", sim.R("cpus:4;mem:1000"), {"rack": "r1", "slots": 4.0}))  # re-registers
    out = sim.allocate()
    assert sim.summary(out) == [("created", "f", "a1", "cpus:4; mem:1000")]


def test_constraints_apply_per_role(sim: Sim) -> None:
    _cluster(sim)
    _add(sim, "f", ("web", "batch"), only("web", (rack("r2"),)))
    out = sim.allocate()
    # web only on a2; batch (no constraints) takes the others
    assert sorted((o.role, o.agent_id) for o in sim.created(out)) == [("batch", "a1"), ("batch", "a3"), ("web", "a2")]


def test_update_takes_back_what_new_constraints_exclude_and_brings_the_rest(sim: Sim) -> None:
    _cluster(sim)
    sim.framework("f").reusable().add()
    sim.allocate()
    assert _agents_of(sim, "f") == {"a1", "a2", "a3"}
    lease = sim.offer_on("f", "a2")
    sim.accept("f", lease.offer_id, sim.launch("t1", "cpus:1;mem:100"))
    out = sim.handle(FrameworkAdded("f", ("*",), frozenset({"REUSABLE_OFFERS"}),
                                    offer_constraints=only("*", (rack("r1"),))))
    # a3's lease is idle: rescinded; a2's keeps its task but loses its idle part
    assert [d[:3] for d in sim.summary(out)] == [("rescinded", "f", "a3"), ("updated", "f", "a2")]
    assert [str(o.resources) for o in sim.updated(out)] == [""]
    assert sim.finish("f", "a2", "t1") == []  # its resources do not flow back into the lease
    assert sim.allocate() == []  # a1 is still held; nothing else is allowed
    # dropping the constraints: every agent again
    sim.handle(FrameworkAdded("f", ("*",), frozenset({"REUSABLE_OFFERS"})))
    assert sim.summary(sim.allocate()) == [
        ("updated", "f", "a2", "cpus:4; mem:1000"), ("created", "f", "a3", "cpus:4; mem:1000")]


def test_quota_guarantee_is_met_only_from_allowed_agents(sim: Sim) -> None:
    _cluster(sim)
    _add(sim, "q", ("q",), only("q", (rack("r2"),)))
    sim.handle(QuotaSet("q", sim.R("cpus:2;mem:100")))
    out = sim.allocate()
    assert [(d[1], d[2]) for d in sim.summary(out)] == [("q", "a2"), ("q", "a2")]


def test_demand_and_revocable_stages_honour_constraints(sim: Sim) -> None:
    _cluster(sim)
    _add(sim, "job", ("*",), only("*", (rack("r1"),)))
    sim.demand("job", Demand(sim.R("cpus:1;mem:100"), count=6))
    out = sim.allocate()
    assert {o.agent_id for o in sim.created(out)} == {"a1"}
    # usage slack on a2 goes only to a revocable framework its constraints admit
    sim.framework("holder").reusable().add()
    sim.allocate()
    sim.accept("holder", sim.offer_on("holder", "a2").offer_id, sim.launch("h1", "cpus:4;mem:1000"))
    sim.handle(AgentSlackEstimated("a2", sim.R("cpus:2;mem:200")))
    _add(sim, "be", ("*",), only("*", (rack("r1"),)), frozenset({"REVOCABLE_RESOURCES"}))
    assert [o for o in sim.created(sim.allocate()) if o.agent_id == "a2" and o.revocable] == []
    _add(sim, "be", ("*",), only("*", (rack("r2"),)), frozenset({"REVOCABLE_RESOURCES"}))
    out = sim.allocate()
    assert [(o.framework_id, o.agent_id, str(o.revocable)) for o in sim.created(out) if o.revocable] == [
        ("be", "a2", "cpus{REV}:2; mem{REV}:200")]


def test_hostname_pseudoattribute_and_agent_without_fault_domain(sim: Sim) -> None:
    sim.agent("a1").cpus(1).mem(100).add()
    host = sim.alloc.ledger.agents["a1"].hostname
    zone = AttributeConstraint.make(Predicate.NOT_EXISTS, pseudo=Pseudo.ZONE)
    _add(sim, "f", ("*",), only("*", (AttributeConstraint.make(Predicate.TEXT_MATCHES, pseudo=Pseudo.HOSTNAME,
                                                              text=host.replace(".", "\\.")), zone)))
    _add(sim, "g", ("*",), only("*", (AttributeConstraint.make(Predicate.TEXT_NOT_EQUALS, pseudo=Pseudo.HOSTNAME,
                                                              text=host),)))
    out = sim.allocate()
    assert [(o.framework_id, o.agent_id) for o in sim.created(out)] == [("f", "a1")]


def test_one_role_cluster_with_constraints_takes_the_general_path(sim: Sim) -> None:
    """The one-role DRF fast path never tests constraints: with a constrained framework in the
    cluster the general loop runs, and decides as the fast one would without the constraint."""
    _cluster(sim)
    sim.framework("plain").add()
    _add(sim, "f", ("*",), only("*", (rack("r1"),)))
    out = sim.allocate()
    assert sorted((o.framework_id, o.agent_id) for o in sim.created(out)) == [("f", "a1"), ("plain", "a2"), ("plain", "a3")]
    assert sim.alloc.ledger.constrained == {"f": None}
    sim.handle(FrameworkAdded("f", ("*",), frozenset()))
    assert sim.alloc.ledger.constrained == {}
