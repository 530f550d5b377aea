"""A gang short of ``gang_min`` is looked at again as soon as capacity appears anywhere: a new
agent, a task's end, a declined or taken-back offer, a reactivated agent. The next allocation
round places the gang over every agent with free resources, not only the agents that changed
(and without waiting for the periodic sweep). Exact decisions; the clock never moves."""

from __future__ import annotations

from master.allocator import AgentDeactivated, AgentReactivated, AllocatorConfig, Decision, Demand
from protocol.resources import Resources

from .conftest import Sim

UNIT = "cpus:1;mem:100"


def _short_gang(gang_min: int = 4) -> Sim:
    """a1 (2 cpus) and a2 (1 cpu) hold 3 units of a gang of ``gang_min``: nothing offered."""
    sim = Sim(AllocatorConfig(offer_id_prefix="t"))
    sim.agent("a1").cpus(2).mem(1000).add()
    sim.agent("a2").cpus(1).mem(1000).add()
    sim.framework("f").role("ml").add()
    sim.demand("f", Demand(Resources.parse(UNIT), gang_min, "g", gang_min))
    assert sim.allocate() == []
    assert sim.alloc.why_not_offered("f") == "gang g: insufficient resources (3 of 4 units placeable at once)"
    return sim


def _placed(sim: Sim, out: list[Decision]) -> list[tuple[str, str]]:
    """The gang framework's new offers as (agent, resources)."""
    return sorted((o.agent_id, str(o.resources)) for o in sim.created(out) if o.framework_id == "f")


def test_a_new_agent_completes_a_waiting_gang_in_the_next_round() -> None:
    sim = _short_gang()
    sim.agent("a3").cpus(1).mem(1000).add()
    out = sim.allocate()
    assert _placed(sim, out) == [("a1", "cpus:2; mem:200"), ("a2", "cpus:1; mem:100"), ("a3", "cpus:1; mem:100")]
    assert sim.alloc.last_pass.full_sweep is False


def test_a_reactivated_agent_completes_a_waiting_gang() -> None:
    sim = Sim(AllocatorConfig(offer_id_prefix="t"))
    for a, cpus in (("a1", 2), ("a2", 1), ("a3", 1)):
        sim.agent(a).cpus(cpus).mem(1000).add()
    sim.handle(AgentDeactivated("a3", "maintenance"))
    sim.framework("f").role("ml").add()
    sim.demand("f", Demand(Resources.parse(UNIT), 4, "g", 4))
    assert sim.allocate() == []
    sim.handle(AgentReactivated("a3"))
    assert _placed(sim, sim.allocate()) == [
        ("a1", "cpus:2; mem:200"), ("a2", "cpus:1; mem:100"), ("a3", "cpus:1; mem:100")]


def test_a_task_end_completes_a_waiting_gang() -> None:
    sim = Sim(AllocatorConfig(offer_id_prefix="t"))
    sim.agent("a1").cpus(2).mem(1000).add()
    sim.agent("a2").cpus(2).mem(1000).add()
    sim.framework("plain").role("web").add()
    offers = {o.agent_id: o for o in sim.created(sim.allocate())}
    sim.accept("plain", offers["a1"].offer_id, sim.launch("t1", "cpus:2;mem:200"))
    sim.accept("plain", offers["a2"].offer_id, sim.launch("t2", "cpus:1;mem:100"))
    sim.framework("f").role("ml").add()
    sim.demand("f", Demand(Resources.parse(UNIT), 3, "g", 3))
    assert sim.allocate() == []  # a2's 1 unit of 3
    sim.finish("plain", "a1", "t1")
    out = sim.allocate()  # the gang first (demand before DRF), plain the rest of a1
    assert _placed(sim, out) == [("a1", "cpus:2; mem:200"), ("a2", "cpus:1; mem:100")]
    assert [(o.framework_id, o.agent_id, str(o.resources)) for o in sim.created(out)][2:] == [
        ("plain", "a1", "mem:800")]


def test_a_declined_offer_completes_a_waiting_gang() -> None:
    # (no fairness take-back, so only the DECLINE frees a1)
    sim = Sim(AllocatorConfig(offer_id_prefix="t", idle_rescind_for_fairness=False))
    sim.agent("a1").cpus(2).mem(1000).add()
    sim.agent("a2").cpus(1).mem(1000).add()
    sim.framework("plain").role("web").add()
    held = sim.created(sim.allocate())
    on_a1 = next(o for o in held if o.agent_id == "a1")
    sim.decline("plain", next(o.offer_id for o in held if o.agent_id == "a2"), refuse=60.0)
    sim.framework("f").role("ml").add()
    sim.demand("f", Demand(Resources.parse(UNIT), 3, "g", 3))
    assert sim.allocate() == []  # a2's 1 unit of 3: a1 is held by plain
    sim.decline("plain", on_a1.offer_id, refuse=60.0)
    assert _placed(sim, sim.allocate()) == [("a1", "cpus:2; mem:200"), ("a2", "cpus:1; mem:100")]


def test_a_round_with_nothing_freed_does_not_visit_every_agent() -> None:
    sim = _short_gang()
    assert sim.allocate() == []
    assert (sim.alloc.last_pass.full_sweep, sim.alloc.last_pass.agents_visited) == (False, 0)
