"""An empty REQUEST withdraws a framework's demand: it is offered resources as in Mesos again
(regression: the client library sends the standing demand, possibly empty, on every subscribe)."""

from __future__ import annotations


def test_empty_request_keeps_classic_offers(sim):  # type: ignore[no-untyped-def]
    sim.agent("a1").cpus(4).mem(1024).add()
    sim.framework("f1").add()
    sim.demand("f1")
    (first,) = sim.created(sim.allocate())
    sim.decline("f1", first.offer_id, refuse=1)
    assert sim.created(sim.advance(0.5)) == []
    (again,) = sim.created(sim.advance(1.0))
    assert again.resources == first.resources


def test_withdrawing_demand_returns_to_classic_offers(sim):  # type: ignore[no-untyped-def]
    from master.allocator.events import Demand

    sim.agent("a1").cpus(4).mem(1024).add()
    sim.framework("f1").add()
    sim.demand("f1", Demand(sim.R("cpus:1;mem:64"), count=1))
    (shaped,) = sim.created(sim.allocate())
    assert shaped.resources == sim.R("cpus:1;mem:64")
    sim.decline("f1", shaped.offer_id, refuse=0)
    sim.demand("f1")  # the framework has nothing left to ask for
    offers = sim.created(sim.advance(0.1))
    assert [o.resources for o in offers] == [sim.R("cpus:4;mem:1024")]
