"""Mesos' maintenance endpoints and operator calls on a real in-process master with in-test fake
agents and a native scheduler: ``/maintenance/schedule`` (GET/POST), ``/maintenance/status``,
``/machine/down``, ``/machine/up`` and the v1 UPDATE_MAINTENANCE_SCHEDULE,
GET_MAINTENANCE_SCHEDULE, GET_MAINTENANCE_STATUS, START_MAINTENANCE, STOP_MAINTENANCE, each body
compared key by key with Mesos' shapes (``mesos_shapes``); their validation with Mesos' words;
inverse offers and their answers (also through the client library); a DOWN machine's agent shut
down and refused; the schedule and the modes kept across a master restart."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from frameworks.client.driver import Scheduler, SchedulerDriver
from frameworks.client.transport import HttpTransport
from master.service import MasterService
from master.testing import task
from master.testing_agent import FakeAgent
from protocol import codec, mesos
from protocol.task_states import TaskState

from ..cluster import master_config
from . import mesos_shapes as ms
from .test_native_msgpack import MsgpackScheduler

ET = mesos.EventType
WAIT = 30.0  # bounds on waits (a loaded CI machine), never sleeps
H1 = {"hostname": "h1", "ip": "127.0.0.1"}
H2 = {"hostname": "h2", "ip": "127.0.0.1"}
START = 1_900_000_000_000_000_000
SCHEDULE = {"windows": [
    {"machine_ids": [H1], "unavailability": {"start": {"nanoseconds": START}, "duration": {"nanoseconds": 3_600_000_000_000}}},
    {"machine_ids": [{"hostname": "h9"}], "unavailability": {"start": {"nanoseconds": START}}},
]}


@pytest.fixture
async def master(tmp_path: Path) -> AsyncIterator[MasterService]:
    svc = MasterService(master_config(tmp_path / "m", ping_interval=0.2, ping_timeout=2.0))
    await svc.start()
    try:
        yield svc
    finally:
        await svc.stop()


class Ops:
    def __init__(self, url: str, s: aiohttp.ClientSession) -> None:
        self.url, self.s = url, s

    async def req(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body) if body is not None else None
        async with self.s.request(method, self.url + path, data=data,
                                  headers={"Content-Type": "application/json"}) as r:
            text = await r.text()
            return r.status, (json.loads(text) if r.status == 200 and text else text)

    async def v1(self, body: dict[str, Any]) -> tuple[int, Any]:
        async with self.s.post(self.url + "/api/v1", data=json.dumps(body),
                               headers={"Content-Type": "application/json", "Accept": "application/json"}) as r:
            text = await r.text()
            return r.status, (json.loads(text) if r.status == 200 and text else text)


async def test_schedule_inverse_offers_down_and_up(master: MasterService) -> None:
    svc = master
    a1, a2 = FakeAgent(svc.url, "cpus:2;mem:1024", hostname="h1"), FakeAgent(svc.url, "cpus:2;mem:1024", hostname="h2")
    aid1, aid2 = await a1.connect(), await a2.connect()
    async with aiohttp.ClientSession() as s:
        op = Ops(svc.url, s)
        sched = MsgpackScheduler(svc.url, s)
        try:
            info = mesos.FrameworkInfo(user="u", name="maint", roles=("*",),
                                       capabilities=(mesos.Capability(mesos.CapabilityType.MULTI_ROLE),))
            fid = await sched.subscribe(info)
            offers = (await sched.next(ET.OFFERS)).offers
            assert offers is not None
            offer = next(o for o in offers.offers if o.agent_id.value == aid1)
            launch = mesos.Operation(type=mesos.OperationType.LAUNCH,
                                     launch=mesos.Launch(task_infos=(task("t1", cmd="sleep 100"),)))
            assert await sched.call(mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,), (launch,))) == 202
            await a1.wait_for(lambda: a1.state_of(fid, "t1") is TaskState.TASK_RUNNING, within=WAIT)

            # nothing scheduled yet: an empty schedule and status ({} as protobuf JSON)
            assert await op.req("GET", "/maintenance/schedule") == (200, {})
            assert await op.req("GET", "/master/maintenance/status") == (200, {})
            assert await op.v1({"type": "GET_MAINTENANCE_SCHEDULE"}) == (
                200, {"type": "GET_MAINTENANCE_SCHEDULE", "get_maintenance_schedule": {"schedule": {}}})

            # validation, Mesos' words, nothing changes
            dup = {"windows": [{"machine_ids": [H1, {"hostname": "H1", "ip": "127.0.0.1"}],
                                "unavailability": {"start": {"nanoseconds": 1}}}]}
            assert await op.req("POST", "/maintenance/schedule", dup) == (
                400, "Machine '{\"hostname\":\"h1\",\"ip\":\"127.0.0.1\"}' appears more than once in the schedule")
            assert await op.req("POST", "/maintenance/schedule", {"windows": [{"machine_ids": [],
                                "unavailability": {"start": {"nanoseconds": 1}}}]}) == (
                400, "List of machines in the maintenance window is empty")
            status, text = await op.req("POST", "/maintenance/schedule", [1])
            assert status == 400 and text.startswith("Failed to convert JSON into Schedule protobuf")
            assert (await op.req("DELETE", "/maintenance/schedule"))[0] == 405
            assert await op.req("POST", "/machine/down", [H1]) == (
                400, "Machine '{\"hostname\":\"h1\",\"ip\":\"127.0.0.1\"}' is not part of a maintenance schedule")
            assert await op.req("POST", "/machine/down", []) == (400, "List of machines is empty")
            assert (await op.req("GET", "/machine/down"))[0] == 405

            # the schedule: h1 DRAINING; the framework running t1 there gets an inverse offer
            assert await op.req("POST", "/maintenance/schedule", SCHEDULE) == (200, "")
            status, got = await op.req("GET", "/maintenance/schedule")
            assert status == 200 and got == SCHEDULE
            ms.check_schedule(got)
            _, v1_schedule = await op.v1({"type": "GET_MAINTENANCE_SCHEDULE"})
            assert v1_schedule == {"type": "GET_MAINTENANCE_SCHEDULE", "get_maintenance_schedule": {"schedule": SCHEDULE}}
            assert await op.v1({"type": "START_MAINTENANCE", "start_maintenance": {"machines": [{"ip": "1.2.3"}]}}) == (
                400, "Failed to parse IP address '1.2.3' of a machine: not an IPv4 address")
            assert await op.v1({"type": "STOP_MAINTENANCE"}) == (
                400, "Failed to validate master::Call: Expecting 'stop_maintenance' to be present")
            ev = await sched.next(ET.INVERSE_OFFERS, within=WAIT)
            assert ev.inverse_offers is not None
            (io,) = ev.inverse_offers.inverse_offers
            assert io.agent_id == mesos.AgentID(aid1) and io.framework_id.value == fid
            assert codec.to_builtins(io.unavailability) == SCHEDULE["windows"][0]["unavailability"]
            ms.check(codec.to_builtins(io), ms.INVERSE_OFFER, "InverseOffer")
            _, frameworks = await op.v1({"type": "GET_FRAMEWORKS"})
            (fw,) = frameworks["get_frameworks"]["frameworks"]
            assert [x["id"]["value"] for x in fw["inverse_offers"]] == [io.id.value]

            _, state = await op.req("GET", "/state")
            ms.check_state(state)
            unav = {a["id"]: a.get("unavailability") for a in state["slaves"]}
            assert unav == {aid1: SCHEDULE["windows"][0]["unavailability"], aid2: None}
            status, st = await op.req("GET", "/maintenance/status")
            ms.check_cluster_status(st)
            (h1, h9) = st["draining_machines"]
            assert h1["id"] == H1 and h9 == {"id": {"hostname": "h9"}}
            assert [(x["status"], x["framework_id"]["value"]) for x in h1["statuses"]] == [("UNKNOWN", fid)]
            assert "down_machines" not in st

            # the framework accepts: recorded, reported alike by the v1 call
            accept = mesos.Call(type=mesos.CallType.ACCEPT_INVERSE_OFFERS, framework_id=mesos.FrameworkID(fid),
                                accept_inverse_offers=mesos.AcceptInverseOffers((io.id,), mesos.Filters(3600.0)))
            assert await sched.call(accept) == 202
            await svc.wait_until(lambda: not svc.state.inverse.outstanding, within=WAIT)
            _, v1st = await op.v1({"type": "GET_MAINTENANCE_STATUS"})
            status_body = v1st["get_maintenance_status"]["status"]
            ms.check_cluster_status(status_body)
            assert [x["status"] for x in status_body["draining_machines"][0]["statuses"]] == ["ACCEPT"]
            assert (await op.req("GET", "/maintenance/status"))[1] == status_body

            # h1 down: the agent is shut down (its task killed) and removed, the task LOST
            assert await op.req("POST", "/machine/up", [H1]) == (
                400, "Machine '{\"hostname\":\"h1\",\"ip\":\"127.0.0.1\"}' is not in DOWN mode and cannot be brought up")
            assert await op.req("POST", "/master/machine/down", [H1]) == (200, "")
            await a1.closed.wait()
            assert a1.state_of(fid, "t1") is TaskState.TASK_KILLED
            seen = []
            while not seen or seen[-1] is not TaskState.TASK_LOST:
                upd = await sched.next(ET.UPDATE, within=WAIT)
                assert upd.update is not None
                seen.append(upd.update.status.state)
            assert upd.update.status.reason is mesos.Reason.REASON_AGENT_REMOVED
            _, st = await op.req("GET", "/maintenance/status")
            ms.check_cluster_status(st)
            assert st == {"draining_machines": [{"id": {"hostname": "h9"}}], "down_machines": [H1]}
            assert (await op.req("POST", "/maintenance/schedule", {}))[0] == 400  # a DOWN machine stays
            with pytest.raises(ConnectionError):
                await a1.connect()  # refused while DOWN
            _, agents = await op.v1({"type": "GET_AGENTS"})
            assert [a["agent_info"]["id"]["value"] for a in agents["get_agents"]["agents"]] == [aid2]

            # up: out of the schedule, the agent comes back
            assert await op.v1({"type": "STOP_MAINTENANCE", "stop_maintenance": {"machines": [H1]}}) == (200, "")
            assert await op.req("GET", "/maintenance/schedule") == (200, {"windows": [SCHEDULE["windows"][1]]})
            assert await a1.connect() == aid1
        finally:
            await sched.close()
            await a1.close()
            await a2.close()


async def test_the_cli_schedules_shows_downs_and_ups(master: MasterService) -> None:
    from click.testing import CliRunner

    from frameworks.cli.maintenance import maintenance

    addr = f"127.0.0.1:{master.port}"

    async def agora(*args: str) -> str:
        r = await asyncio.to_thread(CliRunner().invoke, maintenance, [*args, "--master", addr])
        assert r.exit_code == 0, r.output
        return r.output

    assert "scheduled: h1@127.0.0.1 h9" in await agora(
        "schedule", "h1@127.0.0.1", "H9", "--start", "2030-03-17T17:46:40Z", "--duration", "1h")
    await agora("schedule", "h2", "--start", "+1d")
    assert master.state.maintenance_schedule().windows[0] == mesos.MaintenanceWindow(
        (mesos.MachineID("h1", "127.0.0.1"), mesos.MachineID("h9")),
        mesos.Unavailability(mesos.TimeInfo(1_900_000_000 * 10**9), mesos.DurationInfo(3600 * 10**9)))
    await agora("down", "h9")
    got = json.loads(await agora("status", "--json"))
    assert [(r["machine"], r["mode"]) for r in got] == [("h1@127.0.0.1", "draining"), ("h2", "draining"), ("h9", "down")]
    text = await agora("status")
    assert "2030-03-17 17:46:40 UTC for 3600s" in text
    await agora("unschedule", "h2")
    await agora("up", "h9")
    assert [(r["machine"], r["mode"]) for r in json.loads(await agora("status", "--json"))] == [("h1@127.0.0.1", "draining")]
    r = await asyncio.to_thread(CliRunner().invoke, maintenance, ["up", "h1@127.0.0.1", "--master", addr])
    assert r.exit_code == 1 and "is not in DOWN mode and cannot be brought up" in r.output


async def test_the_schedule_and_modes_survive_a_master_restart(tmp_path: Path) -> None:
    cfg = master_config(tmp_path / "m")
    svc = MasterService(cfg)
    await svc.start()
    try:
        async with aiohttp.ClientSession() as s:
            op = Ops(svc.url, s)
            body = {"type": "UPDATE_MAINTENANCE_SCHEDULE", "update_maintenance_schedule": {"schedule": SCHEDULE}}
            assert await op.v1(body) == (200, "")
            assert await op.v1({"type": "START_MAINTENANCE", "start_maintenance": {"machines": [{"hostname": "h9"}]}}) == (200, "")
            _, before = await op.req("GET", "/maintenance/status")
    finally:
        await svc.stop()
    svc = MasterService(master_config(tmp_path / "m"))
    await svc.start()
    try:
        async with aiohttp.ClientSession() as s:
            op = Ops(svc.url, s)
            assert await op.req("GET", "/maintenance/schedule") == (200, SCHEDULE)
            assert await op.req("GET", "/maintenance/status") == (200, before)
            assert before == {"draining_machines": [{"id": H1}], "down_machines": [{"hostname": "h9"}]}
            with pytest.raises(ConnectionError):
                agent = FakeAgent(svc.url, hostname="h9")
                try:
                    await agent.connect()
                finally:
                    await agent.close()
    finally:
        await svc.stop()


class InverseRecorder(Scheduler):
    def __init__(self) -> None:
        self.inverse: list[mesos.InverseOffer] = []
        self.rescinded: list[str] = []

    def inverse_offers(self, driver: SchedulerDriver, inverse_offers: list[mesos.InverseOffer]) -> None:
        self.inverse.extend(inverse_offers)

    def inverse_offer_rescinded(self, driver: SchedulerDriver, inverse_offer_id: str) -> None:
        self.rescinded.append(inverse_offer_id)


async def test_the_client_library_gets_inverse_offers_and_declines_them(master: MasterService) -> None:
    svc = master
    a1 = FakeAgent(svc.url, "cpus:2;mem:1024", hostname="h1")
    aid = await a1.connect()
    rec = InverseRecorder()
    info = mesos.FrameworkInfo(user="u", name="client", roles=("*",),
                               capabilities=(mesos.Capability(mesos.CapabilityType.MULTI_ROLE),))
    async with SchedulerDriver(info, HttpTransport(svc.url), scheduler=rec) as d, aiohttp.ClientSession() as s:
        try:
            await d.wait_for(lambda: len(d.offers) > 0)
            offer = next(iter(d.offers))
            await d.launch(offer.offer_id, [task("t1", cmd="sleep 100")])
            await a1.wait_for(lambda: a1.state_of(d.framework_id or "", "t1") is TaskState.TASK_RUNNING, within=WAIT)
            op = Ops(svc.url, s)
            assert await op.req("POST", "/maintenance/schedule", SCHEDULE) == (200, "")
            await d.wait_for(lambda: rec.inverse)
            (io,) = rec.inverse
            assert io.agent_id == mesos.AgentID(aid) and io.unavailability is not None
            await d.decline_inverse_offers([io.id.value], refuse_seconds=3600.0)
            await svc.wait_until(lambda: not svc.state.inverse.outstanding, within=WAIT)
            _, st = await op.req("GET", "/maintenance/status")
            assert [x["status"] for x in st["draining_machines"][0]["statuses"]] == ["DECLINE"]
            # a new window: the answer is forgotten and the framework asked again
            moved = {"windows": [{**SCHEDULE["windows"][0], "unavailability": {"start": {"nanoseconds": START + 1}}}]}
            assert await op.req("POST", "/maintenance/schedule", moved) == (200, "")
            await d.wait_for(lambda: len(rec.inverse) == 2)
            assert rec.inverse[1].unavailability == mesos.Unavailability(mesos.TimeInfo(START + 1))
            await d.accept_inverse_offers([rec.inverse[1].id.value])
            await svc.wait_until(lambda: not svc.state.inverse.outstanding, within=WAIT)
            _, st = await op.req("GET", "/maintenance/status")
            assert [x["status"] for x in st["draining_machines"][0]["statuses"]] == ["ACCEPT"]
        finally:
            await a1.close()
