"""Offers held unused while another framework starves are taken back (pure).

The rule (``AllocatorConfig.offer_hold_bound``, default 3 s; master/README.md "Offers held
unused"): a framework *starves* when it is connected, may be offered plain resources in a role it
has not suppressed, is not filtered off every agent in that role, and holds no offer at all. While
one starves, an offer -- or a reusable lease's idle part -- of another framework that has been
unused for ``offer_hold_bound`` seconds and that the starving framework could be offered (not
reserved for another role, not filtered for it, not on a GPU agent it cannot use) is taken back
and offered again at once, by DRF, with its holder sitting out that one pass on the agent
(``Allocator._starvation_pass``): the resources go to someone else first, and come back to the
holder on the next pass if nobody takes them. Running tasks and resources in use
are never touched; with no starving framework nothing is taken back, so a lone framework keeps
its lease as long as it likes (``offer_idle_timeout`` still applies).

Demand frameworks (REQUEST) have their own rule (``demand.fairness_rescind``), and an offer
whose units a demand counts (``OfferState.demand_units``: a gang holding it toward ``gang_min``)
is never taken here: taking one of a gang's offers would leave the gang partly placed.
"""

from __future__ import annotations

from master.allocator.eligibility import STARVATION, fully_filtered, regular_eligible, why_not
from master.allocator.ledger import Ledger
from master.allocator.state import FrameworkState, OfferState

__pure__ = True


def starving(ledger: Ledger) -> list[tuple[FrameworkState, str]]:
    """``(framework, role)`` pairs that starve (see the module doc)."""
    out: list[tuple[FrameworkState, str]] = []
    for fw in ledger.frameworks.values():
        if fw.offers or not fw.active:
            continue
        for role in fw.offer_roles:
            if regular_eligible(fw, role) and not fully_filtered(ledger, fw, role):
                out.append((fw, role))
    return out


def _usable_by(ledger: Ledger, o: OfferState, hungry: list[tuple[FrameworkState, str]]) -> str | None:
    """The id of a starving framework that could be offered ``o``'s unused resources, or None."""
    agent = ledger.agents.get(o.agent_id)
    if agent is None or not agent.active:
        return None
    for fw, role in hungry:
        if fw.framework_id == o.framework_id:
            continue
        candidate = o.regular.allocatable_to(role) if agent.has_reserved else o.regular
        if why_not(STARVATION, ledger, fw, role, agent, candidate) is None:
            return fw.framework_id
    return None


def held_too_long(ledger: Ledger, now: float, bound: float) -> tuple[list[tuple[OfferState, str]], float | None]:
    """``([(offer, starving framework id)], next check)``: the offers to take back now, and when
    to look again (None: nobody starves, so nothing to watch until the next allocation pass)."""
    hungry = starving(ledger)
    if not hungry:
        return [], None
    take: list[tuple[OfferState, str]] = []
    soonest: float | None = None
    for o in ledger.offers.values():
        if not o.regular or o.idle_since is None or o.demand_units:
            continue  # (units a demand counts as placed: a gang's hold is whole or nothing)
        due = o.idle_since + bound
        if due > now:
            soonest = due if soonest is None else min(soonest, due)
            continue
        fid = _usable_by(ledger, o, hungry)
        if fid is not None:
            take.append((o, fid))
    take.sort(key=lambda pair: (pair[0].idle_since or 0.0, pair[0].offer_id))
    # starving frameworks stay hungry until something changes: look again within the bound
    return take, soonest if soonest is not None else now + bound
