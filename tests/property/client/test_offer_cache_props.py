"""Offer cache invariants under random event sequences: claims never exceed an offer."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from frameworks.client.offers import Claim, InsufficientResources, OfferCache, OfferCacheError
from frameworks.client.placement import Ask, first_fit
from protocol.resources import Resources

ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "take", "commit", "release", "rescind", "place"]),
        st.sampled_from(["o1", "o2", "o3"]),
        st.integers(min_value=0, max_value=8),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(ops, st.booleans())
def test_claims_never_exceed_offers(seq: list[tuple[str, str, int]], reusable: bool) -> None:
    c = OfferCache(reusable=reusable)
    claims: list[Claim] = []
    now = 0.0
    for op, oid, n in seq:
        now += 1
        try:
            if op == "put":
                c.put(oid, "agent-" + oid, "h", Resources.of(cpus=n, mem=n * 100), now=now)
            elif op == "take":
                claims.append(c.take(oid, Resources.of(cpus=n / 2)))
            elif op == "commit" and claims:
                c.commit([claims.pop(n % len(claims))], now=now)
            elif op == "release" and claims:
                c.release(claims.pop(n % len(claims)))
            elif op == "rescind":
                c.rescind(oid)
            elif op == "place":
                p = first_fit(list(c), Ask(Resources.of(cpus=n / 4)))
                if p is not None:
                    claims.append(c.take(p.offer_id, p.resources))
        except (InsufficientResources, OfferCacheError):
            pass
        for o in c:
            assert o.resources.contains(o.claimed)
            assert o.available + o.claimed == o.resources
