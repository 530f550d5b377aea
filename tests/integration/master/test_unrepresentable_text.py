"""Text that cannot round-trip never gets past decoding (a 400 in Mesos' wording, on every
endpoint and in both codecs), so one bad call cannot blind an agent's channel for every other
framework, stop the master through a registry write or leave a stream without SUBSCRIBED; and a
message that still cannot be encoded is that message's error, not its writer's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import msgpack

from master.agent_channel import AgentConn
from master.registry import Registry, storable
from master.registry_ops import QuotaSet, WeightSet
from master.service import MasterService
from master.testing_agent import FakeAgent
from protocol import agent_channel as ac
from protocol import codec, mesos
from protocol.resources import Resources
from protocol.task_states import TaskState

from .test_native_msgpack import MsgpackScheduler

ET = mesos.EventType
SURROGATE = "\\ud800"  # JSON text for a lone UTF-16 surrogate (legal JSON, no Unicode string)
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


def _info(name: str) -> mesos.FrameworkInfo:
    return mesos.FrameworkInfo(user="nobody", name=name, roles=("*",),
                               capabilities=(mesos.Capability(type=mesos.CapabilityType.MULTI_ROLE),))


def _task(tid: str, offer: mesos.Offer, cmd: str) -> mesos.TaskInfo:
    return mesos.TaskInfo(name=tid, task_id=mesos.TaskID(tid), agent_id=offer.agent_id,
                          resources=Resources.of(cpus=0.1, mem=16).to_mesos(), command=mesos.CommandInfo(value=cmd))


async def _offer(s: MsgpackScheduler) -> mesos.Offer:
    ev = await s.next(ET.OFFERS)
    assert ev.offers is not None
    return ev.offers.offers[0]


async def test_accept_with_a_lone_surrogate_is_400_and_the_agent_keeps_its_channel(master: MasterService) -> None:
    agent = FakeAgent(master.url, "cpus:4;mem:4096")
    await agent.connect()
    async with aiohttp.ClientSession() as http:
        bad_fw, good_fw = MsgpackScheduler(master.url, http), MsgpackScheduler(master.url, http)
        try:
            fid = await bad_fw.subscribe(_info("bad"))
            offer = await _offer(bad_fw)
            call = mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,),
                                          (mesos.Operation.make_launch(_task("t-bad", offer, "PLACEHOLDER")),))
            body = codec.encode_json(call).replace(b"PLACEHOLDER", SURROGATE.encode())
            async with http.post(master.url + "/api/v1/scheduler", data=body,
                                 headers={**JSON_HEADERS, "Mesos-Stream-Id": bad_fw.stream_id}) as r:
                assert r.status == 400
                text = await r.text()
            assert text.startswith("Failed to parse body into JSON: accept.operations[0].launch.task_infos[0]"
                                   ".command.value: lone UTF-16 surrogate \\ud800"), text
            # another framework's launch on the same agent still gets there at once
            await bad_fw.call(mesos.Call.make_decline(mesos.FrameworkID(fid), (offer.id,)))
            gid = await good_fw.subscribe(_info("good"))
            offer = await _offer(good_fw)
            launch = mesos.Call.make_accept(mesos.FrameworkID(gid), (offer.id,),
                                            (mesos.Operation.make_launch(_task("t-good", offer, "true")),))
            assert await good_fw.call(launch) == 202
            await agent.wait_for(lambda: agent.state_of(gid, "t-good") is TaskState.TASK_FINISHED, within=5)
            assert not agent.closed.is_set() and "t-bad" not in {t for _, t in agent.tasks}
            assert master.counters["errors_total"] == 0
        finally:
            await bad_fw.close()
            await good_fw.close()
            await agent.close()


def test_a_message_that_cannot_be_encoded_is_dropped_alone_by_the_agent_writer() -> None:
    conn = AgentConn(1, None, epoch=3, max_frame=1 << 20)  # type: ignore[arg-type]
    bad = ac.KillTask(framework_id=mesos.FrameworkID("f"), task_id=mesos.TaskID("t\ud800"))
    good = [ac.Ping(seq=1), ac.Ping(seq=2)]
    frames = conn._frames([good[0], bad, good[1]])
    got = [b for f in frames for b in ac.decode_frame(f)[1]]
    assert got == good and conn.encode_errors == 1


async def _operator(http: aiohttp.ClientSession, url: str, body: bytes, ctype: str = "application/json") -> tuple[int, str]:
    async with http.post(url + "/api/v1", data=body, headers={"Content-Type": ctype}) as r:
        return r.status, await r.text()


def _role_call(kind: str, role: str) -> dict[str, Any]:
    match kind:
        case "UPDATE_QUOTA":
            return {"type": kind, "update_quota": {"quota_configs": [{"role": role, "guarantees": {"cpus": {"value": 1}}}]}}
        case "REMOVE_QUOTA":
            return {"type": kind, "remove_quota": {"role": role}}
        case "UPDATE_WEIGHTS":
            return {"type": kind, "update_weights": {"weight_infos": [{"role": role, "weight": 2.0}]}}
    raise AssertionError(kind)


async def test_operator_calls_with_text_that_cannot_round_trip_are_400_and_the_master_lives(master: MasterService) -> None:
    agent = FakeAgent(master.url)
    await agent.connect()
    try:
        async with aiohttp.ClientSession() as http:
            for kind in ("UPDATE_QUOTA", "REMOVE_QUOTA", "UPDATE_WEIGHTS"):
                body = json.dumps(_role_call(kind, "PLACEHOLDER")).replace("PLACEHOLDER", SURROGATE).encode()
                st, text = await _operator(http, master.url, body)
                assert st == 400 and text.startswith("Failed to parse body into JSON: "), (kind, st, text)
                assert "lone UTF-16 surrogate" in text
            drain = json.dumps({"type": "DRAIN_AGENT", "drain_agent": {"agent_id": {"value": "PLACEHOLDER"}}})
            st, text = await _operator(http, master.url, drain.replace("PLACEHOLDER", SURROGATE).encode())
            assert st == 400 and text.startswith("Failed to parse body into JSON: drain_agent.agent_id.value"), text
            # NUL and over-long ids: Mesos' validateID wording, in both codecs
            for value, why in (("a\x00b", "'a\\x00b' contains invalid characters"),
                               ("x" * 256, "ID must not be greater than 255 characters")):
                call = {"type": "DRAIN_AGENT", "drain_agent": {"agent_id": {"value": value}}}
                st, text = await _operator(http, master.url, json.dumps(call).encode())
                assert (st, text) == (400, f"Failed to convert JSON into master::Call protobuf: drain_agent.agent_id.value: {why}")
                st, text = await _operator(http, master.url, msgpack.packb(call), "application/x-msgpack")
                assert (st, text) == (400, f"Failed to decode msgpack into master::Call: drain_agent.agent_id.value: {why}")
            # a SUBSCRIBE with such a role is refused before any stream opens
            sub = codec.encode_json(mesos.Call.make_subscribe(_info("x"))).replace(b'"roles":["*"]', b'"roles":["\\udc00"]')
            async with http.post(master.url + "/api/v1/scheduler", data=sub, headers=JSON_HEADERS) as r:
                assert r.status == 400 and (await r.text()).startswith("Failed to parse body into JSON: subscribe.framework_info.roles[0]")
            # the master is still up, still writes its registry and still serves the agent
            st, _ = await _operator(http, master.url, json.dumps(_role_call("UPDATE_WEIGHTS", "eng")).encode())
            assert st == 200 and master.running and master.failed is None
            async with http.get(master.url + "/health") as r:
                assert r.status == 200
        assert not agent.closed.is_set()
    finally:
        await agent.close()


async def test_the_registry_stores_text_that_is_not_unicode_escaped_instead_of_failing(tmp_path: Path) -> None:
    reg = await Registry.open(tmp_path)
    try:
        assert storable(WeightSet(role="eng", weight=1.0)) == WeightSet(role="eng", weight=1.0)
        # one bad op in a coalesced batch: the batch (and the master) goes on
        await reg.apply([WeightSet(role="eng", weight=2.0), QuotaSet(role="x\ud800", guarantee="cpus:1", limit=None)])
        snap = reg.read()
        assert {w.role: w.weight for w in snap.weights} == {"eng": 2.0}
        assert [q.role for q in snap.quotas] == ["x\\ud800"]
    finally:
        await reg.close()


def test_an_event_that_cannot_be_encoded_costs_the_stream_only_that_event() -> None:
    from agent.channel import _frames
    from master.http_api import EventStream

    stream = EventStream("s1", codec.MSGPACK, heartbeat=1.0, extra_heartbeat=False, max_queue=10)
    bad = mesos.Event(type=ET.ERROR, error=mesos.Error(message="\ud800"))
    assert stream._record(bad) == b"" and stream.encode_errors == 1
    assert stream._record(mesos.Event.make_heartbeat())
    # the agent's side of the channel: the other messages of the batch still go out
    msgs = [ac.envelope(ac.Pong(seq=1)), ac.envelope(ac.Unregister(reason="\ud800")), ac.envelope(ac.Pong(seq=2))]
    got = [m.body() for f in _frames(msgs) for m in codec.decode_msgpack(ac.Frame, f).messages]
    assert got == [ac.Pong(seq=1), ac.Pong(seq=2)]
