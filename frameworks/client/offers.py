"""The framework-side offer cache, aware of Agora's REUSABLE_OFFERS leases.

Vocabulary: an *offer* is a lease on part of one agent. With ``REUSABLE_OFFERS`` the lease
survives ACCEPT: the unused remainder stays under the same offer id, and when a task launched
from it ends the master grows the offer back by sending an OFFERS event that repeats the known
offer id with the offer's new resources. Without the capability (classic Mesos) an ACCEPT or
DECLINE consumes the whole offer.

Rules the cache keeps:

* an OFFERS event with a new id adds an offer; with a known id it *replaces* that offer's
  resources (the master is authoritative) — local claims not yet sent stay on top of it;
* RESCIND (or an expiry we are told of) removes the offer and voids its claims;
* ``take()`` claims resources locally so two launches planned in the same tick never over-claim
  one offer; a claim is then ``commit``-ted (sent in an ACCEPT: a reusable offer keeps the rest,
  a classic offer is gone) or ``release``-d (plan abandoned);
* what an ACCEPT took out of a lease stays deducted until the master's update reflects it: a
  regrowth the master decided before applying our ACCEPT (crossing it on the wire) would
  otherwise hand the launched resources out a second time. ``commit`` may be given the claims of
  one ACCEPT only (the master answers each ACCEPT with one remainder update).

Pure: no I/O, time is an argument.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

import attrs

from protocol.resources import Resources, attributes_from_mesos

if TYPE_CHECKING:
    from protocol.mesos import Offer

__pure__ = True


_MAX_GONE = 100_000  # remembered ended offer ids (offer ids are never reused)


class OfferCacheError(ValueError):
    """A bad request to the cache (unknown offer, claim that does not fit, stale claim)."""


class UnknownOffer(OfferCacheError):
    pass


class InsufficientResources(OfferCacheError):
    pass


@attrs.frozen
class Claim:
    """Resources reserved locally on one offer, not yet sent to the master."""

    claim_id: int
    offer_id: str
    agent_id: str
    resources: Resources


@attrs.define
class CachedOffer:
    offer_id: str
    agent_id: str
    hostname: str
    resources: Resources
    attributes: Mapping[str, str | float]
    first_seen: float
    updated_at: float
    framework_id: str | None = None
    role: str | None = None  # the role the offer is allocated to (Offer.allocation_info)
    claims: dict[int, Resources] = attrs.field(factory=dict)
    generation: int = 0  # bumped on every replacement by the master
    # reusable leases: the master's last word, and what our ACCEPTs since took out of it (one
    # entry per ACCEPT, oldest first, with the time it was sent) until the master reflects them
    master: Resources = attrs.field(default=None)
    inflight: list[tuple[Resources, float, int]] = attrs.field(factory=list)  # (taken, sent at, ticket)
    _claimed: Resources = attrs.field(factory=Resources.empty, init=False)

    def __attrs_post_init__(self) -> None:
        if self.master is None:
            self.master = self.resources

    def _recompute(self) -> None:
        self.resources = self.master - Resources.sum(e[0] for e in self.inflight) if self.inflight else self.master

    @property
    def claimed(self) -> Resources:
        return self._claimed

    def add_claim(self, cid: int, r: Resources) -> None:
        self.claims[cid] = r
        self._claimed = self._claimed + r

    def drop_claim(self, cid: int) -> None:
        r = self.claims.pop(cid, None)
        if r is not None:
            # exact for scalars; ranges/sets of distinct claims never overlap (each was taken from
            # what the others left), so subtracting one leaves the others intact
            self._claimed = self._claimed - r if self.claims else Resources.empty()

    @property
    def available(self) -> Resources:
        """What can still be claimed: the offer's resources minus local claims."""
        if not self.claims:
            return self.resources
        return self.resources - self.claimed

    def age(self, now: float) -> float:
        return max(0.0, now - self.first_seen)

    def idle_for(self, now: float) -> float:
        return max(0.0, now - self.updated_at)


@attrs.frozen
class OfferChange:
    """What an OFFERS event did to one offer (``grown``/``shrunk`` for a known reusable offer)."""

    offer_id: str
    new: bool
    before: Resources
    after: Resources

    @property
    def grown(self) -> Resources:
        return self.after - self.before

    @property
    def shrunk(self) -> Resources:
        return self.before - self.after


class OfferCache:
    """Offers currently held, keyed by offer id (see the module docstring)."""

    def __init__(self, reusable: bool = True, inflight_ttl: float = 2.0) -> None:
        self.reusable = reusable
        self.inflight_ttl = inflight_ttl
        self._tickets = itertools.count(1)
        # ids of offers that ended here (declined, rescinded, consumed): an OFFERS update for one
        # of them that was on the wire when it ended must not bring it back as a zombie
        self._gone: dict[str, None] = {}
        self.last_tickets: dict[str, int] = {}  # offer id -> ticket of the last commit() on it
        self._offers: dict[str, CachedOffer] = {}
        # agent id -> its HTTP endpoint from the offers' URL (sandbox files); outlives the offers
        self.agent_urls: dict[str, str] = {}
        self._claim_ids = itertools.count(1)
        self._claim_offer: dict[int, str] = {}

    # --- reads -------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._offers)

    def __contains__(self, offer_id: object) -> bool:
        return offer_id in self._offers

    def __iter__(self) -> Iterator[CachedOffer]:
        return iter(list(self._offers.values()))

    def get(self, offer_id: str) -> CachedOffer:
        try:
            return self._offers[offer_id]
        except KeyError:
            raise UnknownOffer(f"unknown offer {offer_id!r}") from None

    def offer_ids(self) -> list[str]:
        return list(self._offers)

    def on_agent(self, agent_id: str) -> list[CachedOffer]:
        return [o for o in self._offers.values() if o.agent_id == agent_id]

    def total(self) -> Resources:
        return Resources.sum(o.resources for o in self._offers.values())

    def available(self) -> Resources:
        return Resources.sum(o.available for o in self._offers.values())

    # --- master events ------------------------------------------------------------------------

    def put(
        self,
        offer_id: str,
        agent_id: str,
        hostname: str,
        resources: Resources,
        now: float,
        attributes: Mapping[str, str | float] | None = None,
        framework_id: str | None = None,
        role: str | None = None,
    ) -> OfferChange | None:
        """Add a new offer or replace a known one's resources (reusable regrowth/shrink). An
        update for an offer that already ended here is ignored (returns None)."""
        cur = self._offers.get(offer_id)
        if cur is None and offer_id in self._gone:
            return None
        if cur is None:
            self._offers[offer_id] = CachedOffer(
                offer_id=offer_id,
                agent_id=agent_id,
                hostname=hostname,
                resources=resources,
                attributes=dict(attributes or {}),
                first_seen=now,
                updated_at=now,
                framework_id=framework_id,
                role=role,
            )
            return OfferChange(offer_id, True, Resources.empty(), resources)
        if cur.agent_id != agent_id:
            raise OfferCacheError(
                f"offer {offer_id!r} moved from agent {cur.agent_id!r} to {agent_id!r}; offers are per agent"
            )
        before = cur.resources
        if cur.inflight:
            # An update that no longer contains the master's previous value reflects our oldest
            # ACCEPT (the master answers each ACCEPT on a lease with one update of its remainder);
            # one that still contains it is a regrowth decided before that ACCEPT was applied, so
            # what we launched since stays deducted (no over-claim across the race).
            if not resources.contains(cur.master):
                cur.inflight.pop(0)
            cutoff = now - self.inflight_ttl
            cur.inflight = [e for e in cur.inflight if e[1] >= cutoff]
        cur.master = resources
        cur._recompute()
        cur.updated_at = now
        cur.generation += 1
        if attributes is not None:
            cur.attributes = dict(attributes)
        if role is not None:
            cur.role = role
        self._shrink_claims(cur)
        return OfferChange(offer_id, False, before, cur.resources)

    def add_offers(self, offers: Iterable[Offer], now: float) -> list[OfferChange]:
        """Apply an OFFERS event's offers (``protocol.mesos.Offer``)."""
        out: list[OfferChange] = []
        for o in offers:
            if o.url is not None and o.url.address.port:
                host = o.url.address.ip or o.url.address.hostname or o.hostname
                self.agent_urls[o.agent_id.value] = f"{o.url.scheme or 'http'}://{host}:{o.url.address.port}"
            change = (
                self.put(
                    offer_id=o.id.value,
                    agent_id=o.agent_id.value,
                    hostname=o.hostname,
                    resources=Resources.from_mesos(o.resources),
                    now=now,
                    attributes=attributes_from_mesos(o.attributes),
                    framework_id=o.framework_id.value if o.framework_id is not None else None,
                    role=o.allocation_info.role if o.allocation_info is not None else None,
                )
            )
            if change is not None:
                out.append(change)
        return out

    def rescind(self, offer_id: str) -> CachedOffer | None:
        """Remove an offer (RESCIND, expiry, or our own DECLINE); its claims become void."""
        cur = self._offers.pop(offer_id, None)
        if cur is not None:
            for cid in cur.claims:
                self._claim_offer.pop(cid, None)
        self._gone[offer_id] = None
        while len(self._gone) > _MAX_GONE:
            del self._gone[next(iter(self._gone))]
        return cur

    def remove_agent(self, agent_id: str) -> list[str]:
        gone = [o.offer_id for o in self._offers.values() if o.agent_id == agent_id]
        for oid in gone:
            self.rescind(oid)
        return gone

    def clear(self) -> None:
        """Forget every offer (offers do not survive a re-subscription)."""
        for oid in list(self._offers):
            self.rescind(oid)
        self._claim_offer.clear()

    # --- local bookkeeping ---------------------------------------------------------------------

    def take(self, offer_id: str, resources: Resources) -> Claim:
        """Claim ``resources`` (concrete entries of the offer, e.g. from ``placement.pick``)."""
        cur = self.get(offer_id)
        if not cur.available.contains(resources):
            raise InsufficientResources(
                f"offer {offer_id!r} has {cur.available} available, cannot take {resources}"
            )
        cid = next(self._claim_ids)
        cur.add_claim(cid, resources)
        self._claim_offer[cid] = offer_id
        return Claim(cid, offer_id, cur.agent_id, resources)

    def release(self, claim: Claim) -> None:
        """Give back a claim that will not be launched. Unknown/void claims are ignored."""
        oid = self._claim_offer.pop(claim.claim_id, None)
        if oid is not None and oid in self._offers:
            self._offers[oid].drop_claim(claim.claim_id)

    def commit(self, claims: Iterable[Claim], now: float) -> list[str]:
        """The claims were sent in one ACCEPT per offer. A reusable offer keeps its remainder (minus
        what was launched); a classic offer is consumed. Returns the offer ids removed."""
        removed: list[str] = []
        sent: dict[str, list[Resources]] = {}
        for claim in claims:
            oid = self._claim_offer.pop(claim.claim_id, None)
            if oid is None:
                raise OfferCacheError(f"claim {claim.claim_id} on offer {claim.offer_id!r} is void or used")
            cur = self._offers.get(oid)
            if cur is None:
                continue
            cur.drop_claim(claim.claim_id)
            sent.setdefault(oid, []).append(claim.resources)
        for oid, parts in sent.items():
            cur = self._offers[oid]
            if self.reusable:
                ticket = next(self._tickets)
                cur.inflight.append((Resources.sum(parts), now, ticket))
                self.last_tickets[oid] = ticket
                cur._recompute()
                cur.updated_at = now
            else:
                removed.append(oid)
        for oid in removed:
            self.rescind(oid)
        return removed

    def accept_failed(self, offer_id: str, ticket: int) -> None:
        """The master refused the ACCEPT ``ticket`` on this lease whole (invalid offers): it will
        send no remainder for it, so stop deducting what it would have launched."""
        cur = self._offers.get(offer_id)
        if cur is None:
            return
        kept = [e for e in cur.inflight if e[2] != ticket]
        if len(kept) != len(cur.inflight):
            cur.inflight = kept
            cur._recompute()

    def claims_on(self, offer_id: str) -> list[Claim]:
        cur = self.get(offer_id)
        return [Claim(cid, offer_id, cur.agent_id, r) for cid, r in cur.claims.items()]

    def idle(self, now: float, older_than: float) -> list[CachedOffer]:
        """Offers with nothing claimed, unchanged for at least ``older_than`` seconds."""
        return [o for o in self._offers.values() if not o.claims and o.idle_for(now) >= older_than]

    def _shrink_claims(self, cur: CachedOffer) -> None:
        """After the master shrank an offer, drop the newest claims that no longer fit."""
        while cur.claims and not cur.resources.contains(cur.claimed):
            cid = max(cur.claims)
            cur.drop_claim(cid)
            self._claim_offer.pop(cid, None)
