"""ACKNOWLEDGE_MANY (Agora) against a real master on loopback and the in-test fake agent: the
capability in SUBSCRIBED, good entries forwarded and bad ones ignored in one call, a malformed
entry refusing the whole call with 400, JSON and msgpack, and the rate limiter's count."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp

from master.service import MasterService
from master.testing_agent import FakeAgent
from protocol import agent_channel as ac
from protocol import codec, mesos, recordio
from protocol.resources import Resources

from ..cluster import master_config

ET = mesos.EventType


class Sched:
    """A bare scheduler: one stream, calls in a chosen media type."""

    def __init__(self, url: str, s: aiohttp.ClientSession) -> None:
        self.url = url + "/api/v1/scheduler"
        self.s = s
        self.events: asyncio.Queue[mesos.Event] = asyncio.Queue()
        self.sid = ""
        self.fid = mesos.FrameworkID("")
        self.master_info: mesos.MasterInfo | None = None
        self._reader: asyncio.Task[None] | None = None

    @asynccontextmanager
    async def subscribed(self, name: str, principal: str | None = None) -> AsyncIterator[Sched]:
        info = mesos.FrameworkInfo(user="u", name=name, principal=principal)
        body = codec.encode_msgpack(mesos.Call.make_subscribe(info))
        resp = await self.s.post(self.url, data=body, headers={"Content-Type": codec.MSGPACK, "Accept": codec.MSGPACK})
        assert resp.status == 200
        self.sid = resp.headers["Mesos-Stream-Id"]

        async def read() -> None:
            dec = recordio.RecordIODecoder()
            async for chunk in resp.content.iter_any():
                for rec in dec.feed(chunk):
                    self.events.put_nowait(codec.decode_msgpack(mesos.Event, rec))

        self._reader = asyncio.get_running_loop().create_task(read())
        try:
            ev = await self.next(ET.SUBSCRIBED)
            assert ev.subscribed is not None
            self.fid = ev.subscribed.framework_id
            self.master_info = ev.subscribed.master_info
            yield self
        finally:
            self._reader.cancel()
            resp.close()

    async def next(self, t: ET, within: float = 10.0) -> mesos.Event:
        async with asyncio.timeout(within):
            while True:
                ev = await self.events.get()
                if ev.type is t:
                    return ev

    async def call(self, call: mesos.Call, media: str = codec.MSGPACK) -> tuple[int, str]:
        async with self.s.post(
            self.url, data=codec.encode(call, media), headers={"Content-Type": media, "Mesos-Stream-Id": self.sid}
        ) as r:
            return r.status, await r.text()


def _many(fid: mesos.FrameworkID, acks: list[mesos.Acknowledge]) -> mesos.Call:
    return mesos.Call(
        type=mesos.CallType.ACKNOWLEDGE_MANY,
        framework_id=fid,
        acknowledge_many=mesos.AcknowledgeMany(acknowledgements=tuple(acks)),
    )


def _acks_received(agent: FakeAgent) -> list[tuple[str, bytes]]:
    return [(m.acknowledge.task_id.value, m.acknowledge.uuid) for m in agent.received if m.acknowledge is not None]


async def test_acknowledge_many_end_to_end(master: MasterService) -> None:
    agent = FakeAgent(master.url, "cpus:2;mem:2048")
    await agent.connect()
    try:
        async with aiohttp.ClientSession() as s, Sched(master.url, s).subscribed("many") as sch:
            assert sch.master_info is not None
            assert mesos.MasterCapability(type=mesos.MasterCapabilityType.ACKNOWLEDGE_MANY) in sch.master_info.capabilities
            offers = await sch.next(ET.OFFERS)
            assert offers.offers is not None
            (offer,) = offers.offers.offers
            tasks = tuple(
                mesos.TaskInfo(
                    name=f"t{i}",
                    task_id=mesos.TaskID(f"t{i}"),
                    resources=Resources.of(cpus=0.1, mem=16).to_mesos(),
                    command=mesos.CommandInfo(value="sleep 100"),
                )
                for i in range(3)
            )
            status, _ = await sch.call(mesos.Call.make_accept(sch.fid, (offer.id,), (mesos.Operation.make_launch(*tasks),)))
            assert status == 202
            # the fake agent sends STARTING for each task and holds RUNNING until it is acknowledged
            first = [(await sch.next(ET.UPDATE)).update for _ in range(3)]
            sts = [u.status for u in first if u is not None]
            assert len(sts) == 3 and all(st.state is mesos.TaskState.TASK_STARTING for st in sts)

            # a malformed entry (15-byte uuid): 400 naming the entry, nothing forwarded
            bad = [mesos.Acknowledge(st.agent_id, st.task_id, st.uuid) for st in sts]  # type: ignore[arg-type]
            bad[1] = mesos.Acknowledge(bad[1].agent_id, bad[1].task_id, b"x" * 15)
            status, text = await sch.call(_many(sch.fid, bad))
            assert status == 400 and "acknowledge_many.acknowledgements[1].uuid" in text
            status, text = await sch.call(_many(sch.fid, []))
            assert status == 400 and "non-empty" in text

            # good entries mixed with an unknown task and a wrong agent: 202, the good ones forwarded
            before = master.state.counters["dropped_messages"]
            good = [mesos.Acknowledge(st.agent_id, st.task_id, st.uuid) for st in sts]  # type: ignore[arg-type]
            mixed = [
                good[0],
                mesos.Acknowledge(good[0].agent_id, mesos.TaskID("ghost"), b"g" * 16),
                mesos.Acknowledge(mesos.AgentID("other-agent"), good[1].task_id, good[1].uuid),
                good[1],
            ]
            assert (await sch.call(_many(sch.fid, mixed)))[0] == 202
            # the third over JSON: the extension has a Mesos-style JSON form too
            assert (await sch.call(_many(sch.fid, [good[2]]), codec.JSON))[0] == 202
            want = [(st.task_id.value, st.uuid) for st in sts]
            await agent.wait_for(lambda: len(_acks_received(agent)) >= 3)
            assert _acks_received(agent) == want  # in order, none from the refused call
            assert master.state.counters["dropped_messages"] == before + 2
            # and the agent, released by the acks, sends the next updates
            nxt = [(await sch.next(ET.UPDATE)).update for _ in range(3)]
            assert all(u is not None and u.status.state is mesos.TaskState.TASK_RUNNING for u in nxt)
    finally:
        await agent.close()


async def test_rate_limiter_counts_a_batched_call_by_its_size(tmp_path: Path) -> None:
    svc = MasterService(master_config(tmp_path / "m", rate_limit_qps=0.001, rate_limit_burst=4.0))
    await svc.start()
    try:
        async with aiohttp.ClientSession() as s, Sched(svc.url, s).subscribed("rl", principal="p") as sch:
            ack = mesos.Acknowledge(mesos.AgentID("a"), mesos.TaskID("t"), b"u" * 16)
            # SUBSCRIBE took 1 of 4 tokens; 301 entries cost 4: refused with 429, nothing taken
            assert (await sch.call(_many(sch.fid, [ack] * 301)))[0] == 429
            # 200 entries cost 2 tokens, one more call 1: the bucket is then empty
            assert (await sch.call(_many(sch.fid, [ack] * 200)))[0] == 202
            assert (await sch.call(mesos.Call.make_revive(sch.fid)))[0] == 202
            assert (await sch.call(mesos.Call.make_revive(sch.fid)))[0] == 429
            assert svc.counters["rate_limited_total"] == 2
    finally:
        await svc.stop()


def test_agent_frame_decoding_unchanged() -> None:
    # the agent-side message the master forwards is the plain per-task ACKNOWLEDGE
    body = ac.AcknowledgeMsg(framework_id=mesos.FrameworkID("f"), task_id=mesos.TaskID("t"), uuid=b"u" * 16)
    assert codec.decode_msgpack(ac.Frame, codec.encode_msgpack(ac.frame(body))).messages[0].acknowledge == body
