"""An offer's lifecycle (``master.allocator.state.OFFER``): outstanding in the book, then it ends
exactly once, as ACCEPTED, DECLINED, REJECTED or RESCINDED, by the rule that took it out."""

from __future__ import annotations

import pytest

from master.allocator.events import AgentRemoved
from master.allocator.state import OFFER, OfferPhase, OfferState
from protocol.transitions import IllegalMove

from .conftest import Sim

P = OfferPhase


def book(sim: Sim, oid: str) -> OfferState:
    return sim.alloc._l.offers[oid]


def one_offer(sim: Sim, *, reusable: bool = False) -> OfferState:
    sim.agent("a1").cpus(4).mem(1000).add()
    fw = sim.framework("f1")
    (fw.reusable() if reusable else fw).add()
    sim.allocate()
    (o,) = sim.offers("f1")
    st = book(sim, o.offer_id)
    assert st.phase is P.OUTSTANDING
    return st


def test_the_table() -> None:
    assert [p for p in P if OFFER.terminal(p)] == [P.ACCEPTED, P.DECLINED, P.REJECTED, P.RESCINDED]
    assert OFFER.move(P.OUTSTANDING, P.ACCEPTED) is P.ACCEPTED
    with pytest.raises(IllegalMove, match="illegal offer transition ACCEPTED -> RESCINDED"):
        OFFER.move(P.ACCEPTED, P.RESCINDED)


def test_accepted(sim: Sim) -> None:
    st = one_offer(sim)
    sim.accept("f1", st.offer_id, sim.launch("t1", "cpus:1;mem:100"))
    assert st.phase is P.ACCEPTED and st.offer_id not in sim.alloc._l.offers


def test_a_lease_stays_outstanding_after_an_accept(sim: Sim) -> None:
    st = one_offer(sim, reusable=True)
    sim.accept("f1", st.offer_id, sim.launch("t1", "cpus:1;mem:100"))
    assert st.phase is P.OUTSTANDING and sim.alloc._l.offers[st.offer_id] is st


def test_declined(sim: Sim) -> None:
    st = one_offer(sim)
    sim.decline("f1", st.offer_id)
    assert st.phase is P.DECLINED


def test_rejected(sim: Sim) -> None:
    st = one_offer(sim)
    result = sim.accept("f1", st.offer_id, sim.launch("t1", "cpus:99;mem:100"))
    assert type(result).__name__ == "Rejected"
    assert st.phase is P.REJECTED


def test_rescinded(sim: Sim) -> None:
    st = one_offer(sim)
    sim.handle(AgentRemoved("a1"))
    assert st.phase is P.RESCINDED


def test_an_offer_ends_once(sim: Sim) -> None:
    st = one_offer(sim)
    sim.decline("f1", st.offer_id)
    with pytest.raises(IllegalMove):
        sim.alloc._l.offer_drop(st)
