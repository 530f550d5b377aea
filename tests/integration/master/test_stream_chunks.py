"""The scheduler and operator event streams read chunk by chunk from a raw socket: every HTTP
chunk holds exactly one RecordIO record, as Mesos' libprocess writes them (a client that reads one
record per chunk never falls behind), heartbeats included; a burst of events (an implicit
reconciliation of five tasks, a five-task launch) is five chunks."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from master import testing
from master.service import MasterService
from master.testing_agent import FakeAgent
from protocol import mesos

from ...raw_chunks import RawChunkStream
from .test_native_msgpack import MsgpackScheduler

JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


def subscribe_body(name: str) -> bytes:
    return json.dumps({"type": "SUBSCRIBE", "subscribe": {"framework_info": {
        "user": "nobody", "name": name, "roles": ["*"], "capabilities": [{"type": "MULTI_ROLE"}]}}}).encode()


async def next_event(raw: RawChunkStream, *types: str) -> dict[str, Any]:
    """The next event of one of ``types`` (every chunk on the way must be one record)."""
    async with asyncio.timeout(10):
        while True:
            ev: dict[str, Any] = json.loads(await raw.record())
            if ev["type"] in types:
                return ev


async def test_scheduler_stream_is_one_record_per_chunk(master: MasterService) -> None:
    agent = FakeAgent(master.url, "cpus:4;mem:4096")
    await agent.connect()
    raw = RawChunkStream(master.url)
    try:
        await raw.post("/api/v1/scheduler", subscribe_body("chunks"), JSON_HEADERS)
        assert raw.status == 200 and raw.headers["transfer-encoding"] == "chunked"
        stream_id = raw.headers["mesos-stream-id"]
        first = json.loads(await raw.record())
        assert first["type"] == "SUBSCRIBED"
        fid = first["subscribed"]["framework_id"]
        assert json.loads(await raw.record())["type"] == "HEARTBEAT"  # its own chunk, right after
        offer = (await next_event(raw, "OFFERS"))["offers"]["offers"][0]
        tasks = [{"name": f"t{i}", "task_id": {"value": f"t{i}"}, "agent_id": offer["agent_id"],
                  "command": {"value": "sleep 100"},
                  "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                                {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}}]} for i in range(5)]
        headers = {"Content-Type": "application/json", "Mesos-Stream-Id": stream_id}
        async with aiohttp.ClientSession() as s:
            accept = {"type": "ACCEPT", "framework_id": fid, "accept": {"offer_ids": [offer["id"]], "operations": [
                {"type": "LAUNCH", "launch": {"task_infos": tasks}}]}}
            async with s.post(master.url + "/api/v1/scheduler", data=json.dumps(accept), headers=headers) as r:
                assert r.status == 202
            started: set[str] = set()  # (the fake agent sends RUNNING once STARTING is acknowledged)
            while len(started) < 5:
                ev = await next_event(raw, "UPDATE")
                started.add(ev["update"]["status"]["task_id"]["value"])
            # an implicit reconciliation answers all five in one burst of events
            reconcile = {"type": "RECONCILE", "framework_id": fid, "reconcile": {"tasks": []}}
            async with s.post(master.url + "/api/v1/scheduler", data=json.dumps(reconcile), headers=headers) as r:
                assert r.status == 202
            reconciled = []
            while len(reconciled) < 5:
                ev = await next_event(raw, "UPDATE")
                if ev["update"]["status"].get("reason") == "REASON_RECONCILIATION":
                    reconciled.append(ev["update"]["status"]["task_id"]["value"])
            assert sorted(reconciled) == [f"t{i}" for i in range(5)]
            # the heartbeat after the burst is a chunk of its own too
            assert json.loads(await raw.record())["type"] == "HEARTBEAT"
    finally:
        await raw.close()
        await agent.close()


async def test_operator_stream_is_one_record_per_chunk(master: MasterService) -> None:
    raw = RawChunkStream(master.url)
    agent = FakeAgent(master.url, "cpus:4;mem:4096", hostname="h0")
    async with aiohttp.ClientSession() as session:
        sched = MsgpackScheduler(master.url, session)
        try:
            await raw.post("/api/v1", json.dumps({"type": "SUBSCRIBE"}).encode(), JSON_HEADERS)
            assert raw.status == 200 and raw.headers["transfer-encoding"] == "chunked"
            assert json.loads(await raw.record())["type"] == "SUBSCRIBED"
            await agent.connect()
            ev = await next_event(raw, "AGENT_ADDED")
            assert ev["agent_added"]["agent"]["agent_info"]["hostname"] == "h0"
            fid = await sched.subscribe(mesos.FrameworkInfo(user="nobody", name="op-chunks"))
            (offer,) = (await sched.next(mesos.EventType.OFFERS)).offers.offers  # type: ignore[union-attr]
            tasks = tuple(testing.task(f"t{i}", cmd="sleep 100", agent_id=offer.agent_id) for i in range(5))
            launch = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=tasks))
            assert await sched.call(mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,), (launch,))) == 202
            # the launch publishes five TASK_ADDED at once: five chunks
            added = [(await next_event(raw, "TASK_ADDED"))["task_added"]["task"]["task_id"]["value"] for _ in range(5)]
            assert sorted(added) == [f"t{i}" for i in range(5)]
            # heartbeats (every 1 s in these tests) come as chunks of their own
            assert (await next_event(raw, "HEARTBEAT")) == {"type": "HEARTBEAT"}
        finally:
            await sched.close()
            await raw.close()
            await agent.close()
