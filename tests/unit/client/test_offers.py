"""Offer cache: reusable leases, replacement by known id, rescind, local claims."""

from __future__ import annotations

import pytest

from frameworks.client.offers import InsufficientResources, OfferCache, OfferCacheError, UnknownOffer
from protocol.resources import Resources

R = Resources.of


def test_new_offer_then_known_id_replaces_resources() -> None:
    c = OfferCache(reusable=True)
    ch = c.put("o1", "a1", "h1", R(cpus=4, mem=1024), now=1.0)
    assert ch is not None and ch.new and ch.after == R(cpus=4, mem=1024)
    ch2 = c.put("o1", "a1", "h1", R(cpus=2, mem=512), now=2.0)
    assert ch2 is not None and not ch2.new and ch2.shrunk == R(cpus=2, mem=512)
    assert c.get("o1").resources == R(cpus=2, mem=512)
    assert c.get("o1").first_seen == 1.0 and c.get("o1").updated_at == 2.0
    assert len(c) == 1


def test_take_prevents_over_claim_in_one_tick() -> None:
    c = OfferCache()
    c.put("o1", "a1", "h1", R(cpus=2, mem=256), now=0)
    c.take("o1", R(cpus=1, mem=128))
    c.take("o1", R(cpus=1, mem=128))
    with pytest.raises(InsufficientResources):
        c.take("o1", R(cpus=0.5))
    assert c.available() == Resources.empty()


def test_reusable_commit_keeps_remainder_and_regrows() -> None:
    c = OfferCache(reusable=True)
    c.put("o1", "a1", "h1", R(cpus=2, mem=256), now=0)
    claim = c.take("o1", R(cpus=1, mem=128))
    assert c.commit([claim], now=1) == []
    assert c.get("o1").resources == R(cpus=1, mem=128)
    # the master answers the ACCEPT with the lease's remainder ...
    c.put("o1", "a1", "h1", R(cpus=1, mem=128), now=1.5)
    assert c.get("o1").resources == R(cpus=1, mem=128) and not c.get("o1").inflight
    # ... and when the task ended repeats the offer id with the grown resources
    ch = c.put("o1", "a1", "h1", R(cpus=2, mem=256), now=2)
    assert ch is not None and ch.grown == R(cpus=1, mem=128)


def test_regrowth_crossing_an_accept_does_not_hand_out_resources_twice() -> None:
    c = OfferCache(reusable=True)
    c.put("o1", "a1", "h1", R(cpus=3), now=0)
    c.commit([c.take("o1", R(cpus=2))], now=1)  # ACCEPT on the wire: 1 cpu left
    # a task from before ended; the master decided this regrowth before applying our ACCEPT
    c.put("o1", "a1", "h1", R(cpus=4), now=1.1)
    assert c.get("o1").available == R(cpus=2)  # not 4: the 2 cpus launched are still out
    # now the remainder update for our ACCEPT arrives
    c.put("o1", "a1", "h1", R(cpus=2), now=1.2)
    assert c.get("o1").available == R(cpus=2) and not c.get("o1").inflight


def test_inflight_deduction_expires_if_the_master_never_reflects_it() -> None:
    c = OfferCache(reusable=True, inflight_ttl=2.0)
    c.put("o1", "a1", "h1", R(cpus=2), now=0)
    c.commit([c.take("o1", R(cpus=1))], now=1)  # an ACCEPT the master rejected whole
    c.put("o1", "a1", "h1", R(cpus=2), now=2)
    assert c.get("o1").available == R(cpus=1)
    c.put("o1", "a1", "h1", R(cpus=2), now=10)
    assert c.get("o1").available == R(cpus=2)


def test_classic_commit_consumes_offer() -> None:
    c = OfferCache(reusable=False)
    c.put("o1", "a1", "h1", R(cpus=2), now=0)
    claim = c.take("o1", R(cpus=1))
    assert c.commit([claim], now=1) == ["o1"]
    assert "o1" not in c


def test_rescind_voids_claims_and_release_is_idempotent() -> None:
    c = OfferCache()
    c.put("o1", "a1", "h1", R(cpus=2), now=0)
    claim = c.take("o1", R(cpus=1))
    assert c.rescind("o1") is not None
    assert c.rescind("o1") is None
    c.release(claim)
    with pytest.raises(OfferCacheError):
        c.commit([claim], now=1)
    with pytest.raises(UnknownOffer):
        c.take("o1", R(cpus=1))


def test_shrink_by_master_drops_claims_that_no_longer_fit() -> None:
    c = OfferCache()
    c.put("o1", "a1", "h1", R(cpus=4), now=0)
    c.take("o1", R(cpus=1))
    c.take("o1", R(cpus=2))
    c.put("o1", "a1", "h1", R(cpus=2), now=1)
    assert c.get("o1").claimed == R(cpus=1)
    assert c.get("o1").available == R(cpus=1)


def test_offer_cannot_move_agents_and_remove_agent() -> None:
    c = OfferCache()
    c.put("o1", "a1", "h1", R(cpus=1), now=0)
    c.put("o2", "a2", "h2", R(cpus=1), now=0)
    with pytest.raises(OfferCacheError):
        c.put("o1", "a2", "h2", R(cpus=1), now=1)
    assert c.remove_agent("a1") == ["o1"]
    assert c.offer_ids() == ["o2"]


def test_idle_offers() -> None:
    c = OfferCache()
    c.put("o1", "a1", "h1", R(cpus=1), now=0)
    c.put("o2", "a2", "h2", R(cpus=1), now=5)
    c.take("o2", R(cpus=1))
    assert [o.offer_id for o in c.idle(now=10, older_than=6)] == ["o1"]
    assert c.get("o1").age(10) == 10


def test_a_refused_accept_stops_being_deducted() -> None:
    c = OfferCache(reusable=True)
    c.put("o1", "a1", "h1", R(cpus=4), now=0)
    c.commit([c.take("o1", R(cpus=1))], now=1)
    first = c.last_tickets["o1"]
    c.commit([c.take("o1", R(cpus=2))], now=1)
    assert c.get("o1").available == R(cpus=1)
    c.accept_failed("o1", first)
    assert c.get("o1").available == R(cpus=2)
    c.accept_failed("o1", first)  # idempotent
    c.accept_failed("gone", 99)
    assert c.get("o1").available == R(cpus=2)


def test_an_update_for_an_ended_offer_does_not_bring_it_back() -> None:
    c = OfferCache(reusable=True)
    c.put("o1", "a1", "h1", R(cpus=2), now=0)
    c.rescind("o1")  # our DECLINE (or a RESCIND) ended it ...
    # ... while a regrowth of it was already on the wire
    assert c.put("o1", "a1", "h1", R(cpus=3), now=1) is None
    assert "o1" not in c and len(c) == 0
    c.put("o2", "a1", "h1", R(cpus=1), now=1)
    c.clear()  # a re-subscription ends every offer of the old one
    assert c.put("o2", "a1", "h1", R(cpus=1), now=2) is None
