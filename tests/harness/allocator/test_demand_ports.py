"""A demand may ask for a number of ports per unit (``Demand.ports``, REQUEST ``ports``): a framework
that declared demand gets only shaped offers, so without it a gang whose tasks need ports (a
rendezvous port, ``--ports K``) was offered cpus and mem and never a port. The allocator takes
the lowest free ports of the agent's ranges; an agent without enough ports hosts fewer units."""

from __future__ import annotations

from master.allocator import Demand

from .conftest import Sim


def test_shaped_offers_carry_the_ports_a_unit_needs(sim: Sim) -> None:
    sim.agent("a1").cpus(4).mem(1000).ports(31000, 31009).add()
    sim.agent("a2").cpus(4).mem(1000).ports(32000, 32001).add()
    sim.framework("batch").reusable().add()
    sim.demand("batch", Demand(sim.R("cpus:1;mem:100"), count=3, gang_id="g", gang_min=3, ports=2))
    out = sim.allocate()
    # a1 hosts 3 units (6 of its 10 ports): the gang fits on the first agent.
    assert sim.summary(out) == [("created", "batch", "a1", "cpus:3; mem:300; ports:[31000-31005]")]


def test_ports_limit_the_units_an_agent_hosts(sim: Sim) -> None:
    sim.agent("a1").cpus(4).mem(1000).ports(31000, 31002).add()
    sim.agent("a2").cpus(4).mem(1000).ports(32000, 32009).add()
    sim.framework("batch").reusable().add()
    sim.demand("batch", Demand(sim.R("cpus:1;mem:100"), count=4, gang_id="g", gang_min=4, ports=2))
    out = sim.allocate()
    assert sorted(sim.summary(out)) == [
        ("created", "batch", "a1", "cpus:1; mem:100; ports:[31000-31001]"),
        ("created", "batch", "a2", "cpus:3; mem:300; ports:[32000-32005]"),
    ]


def test_a_gang_with_more_ports_than_the_cluster_has_gets_nothing(sim: Sim) -> None:
    sim.agent("a1").cpus(4).mem(1000).ports(31000, 31002).add()
    sim.agent("a2").cpus(4).mem(1000).add()  # no ports at all
    sim.framework("batch").reusable().add()
    sim.demand("batch", Demand(sim.R("cpus:1;mem:100"), count=2, gang_id="g", gang_min=2, ports=2))
    assert sim.allocate() == []
    assert "insufficient resources (1 of 2 units placeable at once)" in sim.alloc.why_not_offered("batch")
