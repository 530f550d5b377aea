"""Making, growing and taking back offers (shared by every allocation stage)."""

from __future__ import annotations

from master.allocator.decisions import Decision, OfferCreated, OfferRescinded, OfferUpdated
from master.allocator.ledger import Ledger
from master.allocator.state import EMPTY, AgentState, DemandState, FrameworkState, OfferState
from protocol.resources import Resources

__pure__ = True


def give(
    ledger: Ledger,
    fw: FrameworkState,
    role: str,
    agent: AgentState,
    regular: Resources,
    revocable: Resources,
    now: float,
    reason: str,
    demand: DemandState | None = None,
    units: int = 0,
    scalars: dict[str, float] | None = None,
) -> Decision:
    """Offer ``regular`` (+ flat ``revocable``) on ``agent`` to ``fw`` in ``role``: a lease of a
    REUSABLE_OFFERS framework grows (same offer id); otherwise a new offer is created."""
    if not fw.reusable and not revocable and demand is None and regular:
        return OfferCreated(
            ledger.create_classic(fw, role, agent, regular, scalars if scalars is not None else regular.scalars(), now),
            reason,
        )
    lease = ledger.lease_of(fw, role, agent.agent_id) if fw.reusable else None
    o = lease if lease is not None else ledger.new_offer(fw, role, agent, now)
    ledger.offer_grow(o, regular, revocable, now, scalars)
    if demand is not None and units > 0:
        if o.demand_units is None:
            o.demand_units = {}
        o.demand_units[demand.seq] = o.demand_units.get(demand.seq, 0) + units
        demand.in_offers += units
    if lease is not None:
        return OfferUpdated(ledger.snapshot(o), reason)
    return OfferCreated(ledger.snapshot(o), reason)


def take_back(
    ledger: Ledger, o: OfferState, reason: str, *, regular: bool = True, revocable: bool = True
) -> Decision | None:
    """Take back an offer's idle part (its regular and/or revocable resources). A lease with
    running tasks, or an offer keeping the other part, stays (``OfferUpdated``); any other offer
    is removed (``OfferRescinded``). None when there was nothing to take."""
    give_back_regular = o.regular if regular else EMPTY
    give_back_revocable = o.revocable if revocable else EMPTY
    if not give_back_regular and not give_back_revocable:
        return None
    rest = (not regular and bool(o.regular)) or (not revocable and bool(o.revocable))
    if rest or (o.reusable and o.tasks):
        ledger.offer_shrink(o, give_back_regular, give_back_revocable)
        return OfferUpdated(ledger.snapshot(o), reason)
    ledger.offer_drop(o)
    return OfferRescinded(o.offer_id, o.framework_id, o.agent_id, reason)
