"""Operator endpoints on a real master: /state (Mesos keys, legacy resources, old names),
/state-summary, /metrics/snapshot, /metrics (Prometheus), /api/v1/offers and the v1 operator
API; quota and weights set through it survive a restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp

from master.service import MasterService
from master.testing_agent import FakeAgent
from protocol import codec

from ..cluster import master_config
from . import mesos_shapes
from .test_native_msgpack import MsgpackScheduler


async def op(s: aiohttp.ClientSession, url: str, body: dict[str, Any], path: str = "/api/v1") -> tuple[int, Any]:
    async with s.post(url + path, data=json.dumps(body),
                      headers={"Content-Type": "application/json", "Accept": "application/json"}) as r:
        txt = await r.text()
        return r.status, (json.loads(txt) if txt and r.status == 200 else txt)


async def test_operator_endpoints(tmp_path: Path) -> None:
    from protocol import mesos

    svc = MasterService(master_config(tmp_path / "m"))
    await svc.start()
    agent = FakeAgent(svc.url, "cpus:4;mem:4096;disk:100;ports:[31000-31009]")
    await agent.connect()
    try:
        async with aiohttp.ClientSession() as s:
            sched = MsgpackScheduler(svc.url, s)
            fid = await sched.subscribe(mesos.FrameworkInfo(user="u", name="opfw"))
            await sched.next(mesos.EventType.OFFERS)
            async with s.get(svc.url + "/state") as r:
                state = await r.json()
            mesos_shapes.check_state(state)
            (slave,) = state["slaves"]
            assert slave["id"] == agent.agent_id and slave["resources"]["cpus"] == 4.0
            assert slave["resources"]["ports"] == "[31000-31009]"
            assert slave["offered_resources"]["cpus"] == 4.0 and slave["used_resources"]["cpus"] == 0.0
            (fw,) = state["frameworks"]
            assert fw["id"] == fid and fw["active"] and fw["offered_resources"]["cpus"] == 4.0
            assert fw["offers"][0]["slave_id"] == agent.agent_id
            async with s.get(svc.url + "/master/state") as r:
                assert (await r.json())["id"] == state["id"]
            async with s.get(svc.url + "/state-summary") as r:
                assert (await r.json())["slaves"][0]["id"] == agent.agent_id
            async with s.get(svc.url + "/metrics/snapshot") as r:
                snap = await r.json()
            for key in ("master/cpus_total", "master/cpus_used", "master/tasks_running", "master/tasks_finished",
                        "master/outstanding_offers", "master/cpus_revocable_total", "master/slaves_active",
                        "master/frameworks_active", "master/elected", "master/uptime_secs", "master/mem_percent"):
                assert isinstance(snap[key], (int, float)), key
            assert snap["master/cpus_total"] == 4.0 and snap["master/outstanding_offers"] == 1.0
            async with s.get(svc.url + "/metrics") as r:
                prom = await r.text()
            assert "agora_master_cpus_total 4.0" in prom
            async with s.get(svc.url + "/api/v1/offers") as r:
                (o,) = (await r.json())["offers"]
            assert o["framework_id"] == fid and o["agent_id"] == agent.agent_id and o["age_secs"] >= 0
            # v1 operator calls (also on /api/v1/operator, which pymesos posts to)
            for t in ("GET_HEALTH", "GET_VERSION", "GET_MASTER", "GET_METRICS", "GET_STATE", "GET_AGENTS",
                      "GET_FRAMEWORKS", "GET_TASKS", "GET_EXECUTORS", "GET_ROLES", "GET_WEIGHTS", "GET_QUOTA",
                      "GET_FLAGS"):
                for path in ("/api/v1", "/api/v1/operator"):
                    st, body = await op(s, svc.url, {"type": t}, path)
                    assert st == 200 and body["type"] == t, (t, body)
            st, body = await op(s, svc.url, {"type": "GET_HEALTH"})
            assert body["get_health"] == {"healthy": True}
            st, body = await op(s, svc.url, {"type": "GET_AGENTS"})
            assert body["get_agents"]["agents"][0]["agent_info"]["id"] == {"value": agent.agent_id}
            st, body = await op(s, svc.url, {"type": "GET_FRAMEWORKS"})
            assert body["get_frameworks"]["frameworks"][0]["framework_info"]["id"] == {"value": fid}
            st, body = await op(s, svc.url, {"type": "GET_STATE"})
            assert set(body["get_state"]) >= {"get_agents", "get_frameworks"}
            # quota and weights
            st, _ = await op(s, svc.url, {"type": "UPDATE_QUOTA", "update_quota": {"quota_configs": [
                {"role": "eng", "guarantees": {"cpus": {"value": 1}}, "limits": {"cpus": {"value": 2}}}]}})
            assert st == 200
            st, _ = await op(s, svc.url, {"type": "UPDATE_WEIGHTS", "update_weights": {"weight_infos": [
                {"role": "eng", "weight": 3.0}]}})
            assert st == 200
            st, txt = await op(s, svc.url, {"type": "UPDATE_QUOTA", "update_quota": {"quota_configs": [
                {"role": "eng", "guarantees": {"cpus": {"value": 5}}, "limits": {"cpus": {"value": 2}}}]}})
            assert st == 400 and "exceeds" in txt
            st, txt = await op(s, svc.url, {"type": "BOGUS"})
            assert st == 400
            async with s.get(svc.url + "/api/v1") as r:
                assert r.status == 405
            await sched.close()
    finally:
        await agent.close()
        await svc.stop()
    # restart on the same registry: quota and weights are still there
    svc2 = MasterService(master_config(tmp_path / "m"))
    await svc2.start()
    try:
        async with aiohttp.ClientSession() as s:
            st, body = await op(s, svc2.url, {"type": "GET_QUOTA"})
            (cfg,) = body["get_quota"]["status"]["configs"]
            assert cfg["role"] == "eng" and cfg["guarantees"]["cpus"]["value"] == 1.0
            st, body = await op(s, svc2.url, {"type": "GET_WEIGHTS"})
            assert body["get_weights"]["weight_infos"] == [{"weight": 3.0, "role": "eng"}]
            assert svc2.epoch == 2
            async with s.get(svc2.url + "/state") as r:
                state = await r.json()
            assert state["recovered_slaves"][0]["id"] is not None and state["slaves"] == []
    finally:
        await svc2.stop()


async def test_pymesos_operator_driver(master: MasterService) -> None:
    import asyncio

    try:
        from pymesos import MesosOperatorMasterDriver
    except ImportError as e:  # a missing client is a failure, never a skip
        raise ImportError("pymesos 0.3.15 is required: run scripts/install-compat-clients") from e

    agent = FakeAgent(master.url)
    await agent.connect()
    try:
        d = MesosOperatorMasterDriver(f"127.0.0.1:{master.port}")

        def calls() -> dict[str, Any]:
            d.updateWeights([{"role": "ops", "weight": 2.0}])
            return {
                "health": d.getHealth(),
                "version": d.getVersion(),
                "metrics": d.getMetrics(1_000_000_000),
                "state": d.getState(),
                "agents": d.getAgents(),
                "frameworks": d.getFrameworks(),
                "tasks": d.getTasks(),
                "executors": d.getExecutors(),
                "roles": d.getRoles(),
                "weights": d.getWeights(),
                "master": d.getMaster(),
            }

        try:
            got = await asyncio.to_thread(calls)
        finally:
            if d._conn is not None:  # the driver keeps one HTTPConnection open
                d._conn.close()
        assert got["health"]["get_health"]["healthy"] is True
        assert got["version"]["get_version"]["version_info"]["version"] == "1.11.0"
        assert got["agents"]["get_agents"]["agents"][0]["agent_info"]["id"]["value"] == agent.agent_id
        assert got["weights"]["get_weights"]["weight_infos"] == [{"weight": 2.0, "role": "ops"}]
        assert got["master"]["get_master"]["master_info"]["port"] == master.port
        assert any(m["name"] == "master/slaves_active" for m in got["metrics"]["get_metrics"]["metrics"])
    finally:
        await agent.close()


async def test_operator_reservations_persist(tmp_path: Path) -> None:
    from protocol.resources import Resources

    svc = MasterService(master_config(tmp_path / "m"))
    await svc.start()
    agent = FakeAgent(svc.url, "cpus:4;mem:1024")
    aid = await agent.connect()
    want = Resources.of(cpus=2).reserve("eng", principal="ops")
    body = {"type": "RESERVE_RESOURCES", "reserve_resources": {
        "agent_id": {"value": aid}, "resources": json.loads(codec.encode_json(want.to_mesos()))}}
    try:
        async with aiohttp.ClientSession() as s:
            st, _ = await op(s, svc.url, body)
            assert st == 200
            view = svc.allocator.agent_view(aid) if svc.allocator else None
            assert view is not None and view.total.reserved("eng") == want
            st, txt = await op(s, svc.url, body | {"reserve_resources": {
                "agent_id": {"value": aid},
                "resources": json.loads(codec.encode_json(Resources.of(cpus=3).reserve("eng").to_mesos()))}})
            assert st == 409 and "no free" in txt  # only 2 unreserved cpus are left
            async with s.get(svc.url + "/state") as r:
                slave = (await r.json())["slaves"][0]
            assert slave["reserved_resources"]["eng"]["cpus"] == 2.0
    finally:
        await agent.close()
        await svc.stop()
    from master.registry import FILENAME, open_sync

    conn, snap = open_sync(tmp_path / "m" / FILENAME)
    conn.close()
    assert Resources.parse(snap.agents[0].reservations) == want
    # unreserve through a new master after the agent re-registers
    svc2 = MasterService(master_config(tmp_path / "m"))
    await svc2.start()
    agent2 = FakeAgent(svc2.url, "cpus:4;mem:1024")
    agent2.agent_id = aid
    await agent2.connect()
    try:
        async with aiohttp.ClientSession() as s:
            st, _ = await op(s, svc2.url, {"type": "UNRESERVE_RESOURCES", "unreserve_resources": {
                "agent_id": {"value": aid}, "resources": json.loads(codec.encode_json(want.to_mesos()))}})
            assert st == 200
            view = svc2.allocator.agent_view(aid) if svc2.allocator else None
            assert view is not None and view.total.reserved("eng").is_empty()
    finally:
        await agent2.close()
        await svc2.stop()
