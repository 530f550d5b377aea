"""The offer cache keeps each offer's allocation role and the agents' HTTP endpoints."""

from __future__ import annotations

from frameworks.client.offers import OfferCache
from protocol.mesos import URL, Address, Offer
from protocol.mesos_common import AgentID, AllocationInfo, FrameworkID, OfferID
from protocol.resources import Resources


def _offer(oid: str, role: str | None, port: int) -> Offer:
    return Offer(
        id=OfferID(oid),
        framework_id=FrameworkID("f"),
        agent_id=AgentID("a1"),
        hostname="h1",
        url=URL(scheme="http", address=Address(hostname="h1", ip="127.0.0.1", port=port)),
        resources=Resources.of(cpus=1, mem=64).to_mesos(allocation_role=role),
        allocation_info=AllocationInfo(role) if role else None,
    )


def test_role_and_agent_endpoint_are_cached() -> None:
    cache = OfferCache()
    cache.add_offers([_offer("o1", "ml", 5051)], now=0)
    assert cache.get("o1").role == "ml"
    assert cache.agent_urls == {"a1": "http://127.0.0.1:5051"}
    cache.rescind("o1")
    assert cache.agent_urls == {"a1": "http://127.0.0.1:5051"}  # still there for sandbox logs
    cache.add_offers([_offer("o2", None, 5052)], now=1)
    assert cache.get("o2").role is None
    assert cache.agent_urls["a1"] == "http://127.0.0.1:5052"
