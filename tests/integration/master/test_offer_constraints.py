"""Mesos 1.11's offer constraints end to end: a real master and two real agents (in-process) with
different attributes; a framework subscribed through pymesos 0.3.15 (unchanged) gets offers from
both, then only from the agents its constraints admit once UPDATE_FRAMEWORK sets them (the same
subscription), and from the other agent when an update changes them (offer filters, the
framework's own minimum per role, likewise); a SUBSCRIBE with
constraints (raw HTTP: pymesos sends none) is offered only matching agents; constraints the
allocator cannot evaluate refuse the call with Mesos' words."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agent.isolation import remove_agent_cgroups
from agent.service import AgentService
from master.service import MasterService

from ...raw_chunks import RawChunkStream
from ..cluster import agent_config, running_master

try:
    from pymesos import MesosSchedulerDriver, Scheduler
except ImportError as e:  # pragma: no cover - a missing client is a failure, never a skip
    raise ImportError(
        "pymesos 0.3.15 is required for the compatibility tests: run scripts/install-compat-clients"
    ) from e

JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


def rack_is(value: str) -> dict[str, Any]:
    return {"selector": {"attribute_name": "rack"}, "predicate": {"text_equals": {"value": value}}}


def constraints(role: str, *groups: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role_constraints": {role: {"groups": [{"attribute_constraints": g} for g in groups]}}}


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[MasterService, list[AgentService]]]:
    """A master and two agents, racks r1 and r2 (registering while the test starts)."""
    async with running_master(tmp_path / "master") as master:
        agents: list[AgentService] = []
        try:
            for rack in ("r1", "r2"):
                a = AgentService(agent_config(master, tmp_path / rack, attributes=f"rack:{rack};slots:4"))
                await a.start()
                agents.append(a)
            yield master, agents
        finally:
            for a in agents:
                await a.stop()
                await asyncio.to_thread(remove_agent_cgroups, a.config.work_dir)


class Sched(Scheduler):
    """Declines every offer at once (a short filter, so both agents keep coming back) and
    records (offer number, agent id) of each."""

    def __init__(self) -> None:
        self.fid: str | None = None
        self.registered_ev = threading.Event()
        self.cond = threading.Condition()
        self.offers: list[tuple[int, str]] = []

    def registered(self, driver: Any, framework_id: Any, master_info: Any) -> None:
        self.fid = framework_id["value"]
        self.registered_ev.set()

    def resourceOffers(self, driver: Any, offers: list[Any]) -> None:
        with self.cond:
            for o in offers:
                self.offers.append((int(o["id"]["value"].rsplit("-O", 1)[1]), o["agent_id"]["value"]))
            self.cond.notify_all()
        for o in offers:
            driver.declineOffer(o["id"], filters={"refuse_seconds": 0.05})

    def wait(self, seq: int, n: int, distinct: int, within: float) -> set[str]:
        """The agents of the offers made after offer number ``seq``, once there are ``n`` offers
        from at least ``distinct`` agents."""

        def since() -> list[str]:
            return [a for k, a in self.offers if k > seq]

        with self.cond:
            ok = self.cond.wait_for(lambda: len(since()) >= n and len(set(since())) >= distinct, within)
            assert ok, f"offers after {seq}: {since()}"
            return set(since())


async def offered(sched: Sched, seq: int, n: int, distinct: int = 1, within: float = 20.0) -> set[str]:
    return await asyncio.to_thread(sched.wait, seq, n, distinct, within)


def offer_seq(master: MasterService) -> int:
    return master.allocator.ledger._offer_seq  # offers made so far (their ids count up)


async def test_update_framework_sets_and_changes_offer_constraints_through_pymesos(cluster: Any) -> None:
    master, agents = cluster
    sched = Sched()
    info = {"user": "nobody", "name": "constrained", "roles": ["web"], "capabilities": [{"type": "MULTI_ROLE"}]}
    driver = MesosSchedulerDriver(sched, info, f"127.0.0.1:{master.port}", use_addict=False)
    await asyncio.to_thread(driver.start)  # blocking HTTP: never on the loop thread
    try:
        assert await asyncio.to_thread(sched.registered_ev.wait, 20)
        assert sched.fid is not None
        # no constraints: both agents are offered (once both registered)
        both = await offered(sched, 0, 2, distinct=2)
        agent_of = {rack: str(a.agent_id) for rack, a in zip(("r1", "r2"), agents, strict=True)}
        assert both == set(agent_of.values())
        new = {**info, "id": {"value": sched.fid}}

        async def update(oc: dict[str, Any]) -> int:
            seq = offer_seq(master)
            call = {"type": "UPDATE_FRAMEWORK", "framework_id": {"value": sched.fid},
                    "update_framework": {"framework_info": new, "offer_constraints": oc}}
            await asyncio.to_thread(driver._send, call)  # pymesos' own connection and stream id
            return seq

        seq = await update(constraints("web", [rack_is("r1")]))
        assert await offered(sched, seq, 6) == {agent_of["r1"]}
        assert master.state.frameworks[sched.fid].connected  # the same subscription

        # changed: an agent satisfies one group (all its constraints): r2 with slots, or a rack r9
        seq = await update(constraints(
            "web",
            [rack_is("r2"), {"selector": {"attribute_name": "slots"}, "predicate": {"exists": {}}}],
            [rack_is("r9")],
        ))
        assert await offered(sched, seq, 6) == {agent_of["r2"]}

        # a regular expression RE2 rejects: 400 with Mesos' reason, the constraints in force stay
        bad = {"type": "UPDATE_FRAMEWORK", "framework_id": {"value": sched.fid}, "update_framework": {
            "framework_info": new, "offer_constraints": constraints("web", [
                {"selector": {"attribute_name": "rack"}, "predicate": {"text_matches": {"regex": "r(1"}}}])}}
        with pytest.raises(RuntimeError) as refused:
            await asyncio.to_thread(driver._send, bad)
        assert "400" in str(refused.value)
        assert ("Offer constraints are not valid: A role web has an invalid 'AttributeConstraint': "
                "Failed to construct regex from pattern 'r(1': missing ): r(1") in str(refused.value)
        seq = offer_seq(master)
        assert await offered(sched, seq, 4) == {agent_of["r2"]}

        # constraints dropped: every agent again
        seq = await update({})
        assert await offered(sched, seq, 2, distinct=2) == set(agent_of.values())

        # offer filters (FrameworkInfo.offer_filters): the framework's own minimum in the role
        def minimum(cpus: float) -> dict[str, Any]:
            return {"web": {"min_allocatable_resources": {"quantities": [{"quantities": {"cpus": {"value": cpus}}}]}}}

        new = {**new, "offer_filters": minimum(3)}  # more than an agent has
        await update({})
        assert master.allocator.ledger.frameworks[sched.fid].min_allocatable == {"web": ({"cpus": 3.0},)}
        new = {**new, "offer_filters": minimum(1)}
        seq = await update({})
        assert await offered(sched, seq, 2, distinct=2) == set(agent_of.values())
        new = {**new, "offer_filters": minimum(-1)}
        with pytest.raises(RuntimeError) as refused:
            await update({})
        assert ("'FrameworkInfo.offer_filters': Invalid resource quantity for 'cpus': Negative values not "
                "supported") in str(refused.value)
    finally:
        await asyncio.to_thread(driver.stop)
        await asyncio.to_thread(driver.join)


async def offers_from_both(master: MasterService, agents: list[AgentService]) -> dict[str, str]:
    """Wait until an unconstrained framework is offered both agents (both registered); rack ->
    agent id."""
    raw = RawChunkStream(master.url)
    try:
        body = {"type": "SUBSCRIBE", "subscribe": {"framework_info": {"user": "nobody", "name": "probe"}}}
        await raw.post("/api/v1/scheduler", json.dumps(body).encode(), JSON_HEADERS)
        seen: set[str] = set()
        async with asyncio.timeout(20):
            while len(seen) < 2:
                ev = json.loads(await raw.record())
                if ev["type"] == "OFFERS":
                    seen |= {o["agent_id"]["value"] for o in ev["offers"]["offers"]}
    finally:
        await raw.close()
    return {rack: str(a.agent_id) for rack, a in zip(("r1", "r2"), agents, strict=True)}


async def test_subscribe_with_offer_constraints(cluster: Any) -> None:
    master, agents = cluster
    agent_of = await offers_from_both(master, agents)
    url = "/api/v1/scheduler"
    info = {"user": "nobody", "name": "x", "roles": ["web"], "capabilities": [{"type": "MULTI_ROLE"}]}
    matches = {"selector": {"attribute_name": "rack"}, "predicate": {"text_matches": {"regex": "r[2-9]"}}}
    refusals = [
        (constraints("web", [matches]) | {"role_constraints": {"db": {"groups": []}}},
         "Offer constraints specify `role_constraints` for a role 'db' not contained in the set of roles"),
        ({"role_constraints": {"web": {"groups": []}}},
         "Offer constraints are not valid: 'OfferConstraints::role_constraints' has an empty "
         "'RoleConstraints::groups' for role web"),
        (constraints("web", [{"selector": {}, "predicate": {"exists": {}}}]),
         "Offer constraints are not valid: A role web has an invalid 'AttributeConstraint': Exactly one of "
         "'AttributeConstraint::Selector::name' or 'AttributeConstraint::Selector::pseudoattribute_type' must be set"),
    ]
    for oc, why in refusals:
        raw = RawChunkStream(master.url)
        try:
            body = {"type": "SUBSCRIBE", "subscribe": {"framework_info": info, "offer_constraints": oc}}
            await raw.post(url, json.dumps(body).encode(), JSON_HEADERS)
            assert json.loads(await raw.record()) == {"type": "ERROR", "error": {"message": why}}
        finally:
            await raw.close()
    assert [fw.info.name for fw in master.state.frameworks.values()] == ["probe"]  # none of these subscribed

    raw = RawChunkStream(master.url)
    try:
        body = {"type": "SUBSCRIBE", "subscribe": {"framework_info": info,
                                                   "offer_constraints": constraints("web", [matches])}}
        await raw.post(url, json.dumps(body).encode(), JSON_HEADERS)
        sub = json.loads(await raw.record())
        assert sub["type"] == "SUBSCRIBED"
        fid = sub["subscribed"]["framework_id"]["value"]
        async with asyncio.timeout(10):
            while True:
                ev = json.loads(await raw.record())
                if ev["type"] == "OFFERS":
                    assert {o["agent_id"]["value"] for o in ev["offers"]["offers"]} == {agent_of["r2"]}
                    break
        # nothing outstanding for the framework on the other agent; the master says why not
        assert {o.agent_id for o in master.allocator.offers_of(fid)} == {agent_of["r2"]}
        async with aiohttp.ClientSession() as s, s.get(master.url + "/state") as r:
            assert fid in {f["id"] for f in (await r.json())["frameworks"]}
    finally:
        with contextlib.suppress(Exception):
            await raw.close()
