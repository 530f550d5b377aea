"""A native msgpack scheduler (minimal, written here) against a real in-process master and the
in-test fake agent: subscribe, offers, launch, acks, kill, reconcile, teardown."""

from __future__ import annotations

import asyncio

import aiohttp

from master.service import MasterService
from master.testing_agent import FakeAgent
from protocol import codec, mesos, recordio
from protocol.resources import Resources
from protocol.task_states import TaskState

ET = mesos.EventType
MSGPACK = codec.MSGPACK


class MsgpackScheduler:
    def __init__(self, url: str, session: aiohttp.ClientSession) -> None:
        self.url = url
        self.session = session
        self.events: asyncio.Queue[mesos.Event] = asyncio.Queue()
        self.backlog: list[mesos.Event] = []
        self.stream_id = ""
        self.framework_id: mesos.FrameworkID | None = None
        self._resp: aiohttp.ClientResponse | None = None
        self._reader: asyncio.Task[None] | None = None

    async def subscribe(self, info: mesos.FrameworkInfo) -> str:
        body = codec.encode_msgpack(mesos.Call.make_subscribe(info))
        self._resp = await self.session.post(
            self.url + "/api/v1/scheduler", data=body, headers={"Content-Type": MSGPACK, "Accept": MSGPACK}
        )
        assert self._resp.status == 200, await self._resp.text()
        assert self._resp.headers["Content-Type"] == MSGPACK
        self.stream_id = self._resp.headers["Mesos-Stream-Id"]
        self._reader = asyncio.get_running_loop().create_task(self._read())
        ev = await self.next(ET.SUBSCRIBED)
        assert ev.subscribed is not None
        self.framework_id = ev.subscribed.framework_id
        return self.framework_id.value

    async def _read(self) -> None:
        assert self._resp is not None
        dec = recordio.RecordIODecoder()
        try:
            async for chunk in self._resp.content.iter_any():
                for rec in dec.feed(chunk):
                    await self.events.put(codec.decode_msgpack(mesos.Event, rec))
        except aiohttp.ClientPayloadError:
            return  # the master went away (kill -9)

    async def next(self, *types: ET, within: float = 10.0) -> mesos.Event:
        """The next event of one of ``types``; others are kept for later calls (not lost)."""
        for i, ev in enumerate(self.backlog):
            if ev.type in types:
                del self.backlog[i]
                return ev
        async with asyncio.timeout(within):
            while True:
                ev = await self.events.get()
                if ev.type in types:
                    return ev
                if ev.type is not ET.HEARTBEAT:
                    self.backlog.append(ev)

    async def call(self, call: mesos.Call) -> int:
        async with self.session.post(
            self.url + "/api/v1/scheduler",
            data=codec.encode_msgpack(call),
            headers={"Content-Type": MSGPACK, "Mesos-Stream-Id": self.stream_id},
        ) as r:
            return r.status

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._resp is not None:
            self._resp.close()


async def test_native_msgpack_scheduler_end_to_end(master: MasterService) -> None:
    agent = FakeAgent(master.url, "cpus:2;mem:2048")
    await agent.connect()
    try:
        await _scenario(master, agent)
    finally:
        await agent.close()


async def _scenario(master: MasterService, agent: FakeAgent) -> None:
    async with aiohttp.ClientSession() as session:
        s = MsgpackScheduler(master.url, session)
        info = mesos.FrameworkInfo(
            user="nobody",
            name="native",
            roles=("*",),
            capabilities=(mesos.Capability(mesos.CapabilityType.MULTI_ROLE),),
        )
        fid = await s.subscribe(info)
        F = mesos.FrameworkID(fid)
        hb = await s.next(ET.HEARTBEAT)
        assert hb.type is ET.HEARTBEAT
        offers_ev = await s.next(ET.OFFERS)
        assert offers_ev.offers is not None
        (offer,) = offers_ev.offers.offers
        tasks = tuple(
            mesos.TaskInfo(
                name=f"t{i}",
                task_id=mesos.TaskID(f"t{i}"),
                agent_id=offer.agent_id,
                resources=Resources.of(cpus=0.5, mem=64).to_mesos(),
                command=mesos.CommandInfo(value="sleep 100" if i == 2 else "echo hi"),
            )
            for i in range(3)
        )
        op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=tasks))
        assert (
            await s.call(mesos.Call.make_accept(F, (offer.id,), (op,), mesos.Filters(refuse_seconds=1)))
            == 202
        )
        # updates carry uuid + agent_id; acknowledge each one (explicit acks)
        finished: set[str] = set()
        running: set[str] = set()
        async with asyncio.timeout(15):
            while len(finished) < 2 or "t2" not in running:
                ev = await s.next(ET.UPDATE)
                assert ev.update is not None
                st = ev.update.status
                assert st.uuid is not None and st.agent_id == offer.agent_id
                assert await s.call(mesos.Call.make_acknowledge(F, st)) == 202
                if st.state is TaskState.TASK_FINISHED:
                    finished.add(st.task_id.value)
                if st.state is TaskState.TASK_RUNNING:
                    running.add(st.task_id.value)
        # kill the sleeper
        assert await s.call(mesos.Call.make_kill(F, mesos.TaskID("t2"))) == 202
        while True:
            ev = await s.next(ET.UPDATE)
            assert ev.update is not None
            st = ev.update.status
            if st.uuid:
                await s.call(mesos.Call.make_acknowledge(F, st))
            if st.task_id.value == "t2" and st.state is TaskState.TASK_KILLED:
                break
        # reconcile explicitly: t0 finished, unknown -> LOST
        assert (
            await s.call(
                mesos.Call.make_reconcile(
                    F, (mesos.ReconcileTask(mesos.TaskID("t0")), mesos.ReconcileTask(mesos.TaskID("ghost")))
                )
            )
            == 202
        )
        got: dict[str, mesos.TaskStatus] = {}
        while len(got) < 2:
            ev = await s.next(ET.UPDATE)
            assert ev.update is not None
            got[ev.update.status.task_id.value] = ev.update.status
        assert got["t0"].state is TaskState.TASK_FINISHED and got["t0"].uuid is None
        assert got["ghost"].state is TaskState.TASK_LOST
        # metrics
        async with session.get(master.url + "/metrics/snapshot") as r:
            snap = await r.json()
        assert snap["master/tasks_finished"] == 2 and snap["master/tasks_killed"] == 1
        assert snap["master/slaves_active"] == 1 and snap["master/frameworks_active"] == 1
        # teardown ends the stream
        assert await s.call(mesos.Call.make_teardown(F)) == 202
        assert s._reader is not None
        await asyncio.wait_for(s._reader, 5)
        async with session.get(master.url + "/state") as r:
            state = await r.json()
        assert state["frameworks"] == []
        assert [f["id"] for f in state["completed_frameworks"]] == [fid]
        await s.close()
