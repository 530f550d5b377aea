"""The framework host with a minimal framework on it, against the client library's in-memory fake
master: the API it serves (and publishes as webui_url), the effects it carries to the master,
and a loop that survives a failing round."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from frameworks.client.demand import Demand
from frameworks.client.driver import SchedulerDriver
from frameworks.client.fake import FakeMaster
from frameworks.kit.effects import DeclareDemand, Decline, Kill, Persist, Revive, Suppress
from frameworks.kit.host import BASE_CAPABILITIES, FrameworkHost, FrameworkLogic
from protocol.acls import Action
from protocol.authn import basic_header
from protocol.lifecycle import Service
from protocol.mesos import CallType, Offer, TaskStatus
from protocol.resources import Resources


class Echo(Service):
    """A framework whose core is a list: each round carries out the effects queued for it. It
    holds the host and gives it its logic (``FrameworkLogic``)."""

    name = "echo"

    def __init__(self, master: FakeMaster, work_dir: Path, credentials: Path | None = None) -> None:
        super().__init__()
        self.host = FrameworkHost(
            self, self, "127.0.0.1:1", framework_name="echo", roles=("*", "gpu"), credentials=credentials
        )
        self.fake = master
        self.queued: list[object] = []
        self.not_master: list[object] = []
        self.fail_next = False
        self.held: list[str] = []
        self.rounds = 0
        self.done = asyncio.Event()
        self.failed_round = asyncio.Event()
        self.fail_write = False
        self.written: list[list[int]] = []
        self.durable: set[int] = set()
        self.updates: list[str] = []
        self.subscribed_as: list[str] = []

    async def _start(self) -> None:
        await self.host.serve([web.get("/api/v1/ping", self._ping)])
        driver = self.host.connect(None, transport=self.fake.transport())
        await driver.start()
        self.spawn(self.host.run_rounds(), name="echo-loop")

    async def _stop(self) -> None:
        if self.host.driver is not None:
            await self.host.driver.stop()
        await self.host.close_api()

    async def _ping(self, request: web.Request) -> web.Response:
        owner = request.query.get("owner")
        if owner is not None and (problem := self.host.forbidden(request, owner, Action.MANAGE_JOBS, "cancel")):
            return web.json_response({"error": problem}, status=403)
        return web.json_response({"pong": True})

    # FrameworkLogic

    def on_subscribed(self, driver: SchedulerDriver, framework_id: str) -> None:
        self.subscribed_as.append(framework_id)

    def on_offers(self, offers: list[Offer]) -> None:
        self.held += [o.id.value for o in offers]
        self.host.poke()

    def on_rescinded(self, offer_id: str) -> None:
        self.held.remove(offer_id)

    def on_update(self, status: TaskStatus) -> None:
        self.updates.append(status.task_id.value)

    def next_round_in(self) -> float | None:
        return None

    async def on_round(self) -> None:
        self.rounds += 1
        if self.fail_next:
            self.fail_next = False
            self.failed_round.set()
            raise RuntimeError("a bug in a round")
        effects, self.queued = self.queued, []
        for e in effects:
            if not await self.host.call_master(e):
                self.not_master.append(e)
        self.done.set()

    async def write_jobs(self, job_ids: list[int]) -> None:
        if self.fail_write:
            self.fail_write = False
            raise OSError("disk full")
        self.written.append(job_ids)

    def jobs_written(self, job_ids: list[int]) -> None:
        self.durable.update(job_ids)


@pytest.fixture
async def echo(tmp_path: Path) -> AsyncIterator[tuple[FakeMaster, Echo]]:
    master = FakeMaster()
    svc = Echo(master, tmp_path)
    async with svc:
        assert svc.host.driver is not None
        await svc.host.driver.wait_subscribed(5)
        yield master, svc


async def run(svc: Echo, *effects: object) -> None:
    svc.done.clear()
    svc.queued += effects
    svc.host.poke()
    await asyncio.wait_for(svc.done.wait(), 5)


async def test_serves_its_routes_and_subscribes_with_its_api_address(echo: tuple[FakeMaster, Echo]) -> None:
    master, svc = echo
    assert svc.host.port > 0 and svc.host.url == f"http://127.0.0.1:{svc.host.port}"
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{svc.host.url}/api/v1/ping") as resp:
            assert resp.status == 200 and await resp.json() == {"pong": True}
        async with http.get(f"{svc.host.url}/nothing") as resp:
            assert resp.status == 404
    info = master.framework().info
    assert info.name == "echo" and info.webui_url == svc.host.url and info.roles == ("*", "gpu")
    assert tuple(c.type for c in info.capabilities) == BASE_CAPABILITIES
    assert svc.host.master_ui() == "http://127.0.0.1:1"


async def test_master_effects_are_calls_to_the_master_and_others_are_left_to_the_framework(
    echo: tuple[FakeMaster, Echo],
) -> None:
    master, svc = echo
    master.add_agent("cpus:2;mem:1024")
    await master.wait_for(lambda: svc.held)
    demand = (("job-1", Demand(shape=Resources.of(cpus=1.0), count=1)),)
    kinds = (CallType.SUPPRESS, CallType.REVIVE, CallType.REQUEST, CallType.KILL)
    before = {kind: len(master.calls_of(kind)) for kind in kinds}
    await run(svc, Decline((svc.held[0],), 5.0), Suppress(), Revive(), DeclareDemand(demand),
              Kill("t-1", None, "why"), Persist((1,)))  # fmt: skip
    assert [c.decline.offer_ids[0].value for c in master.calls_of(CallType.DECLINE)] == [svc.held[0]]
    assert {kind: len(master.calls_of(kind)) - before[kind] for kind in kinds} == dict.fromkeys(kinds, 1)
    assert svc.host.driver is not None and svc.host.driver.demands.get("job-1") == demand[0][1]
    assert master.calls_of(CallType.KILL)[0].kill.task_id.value == "t-1"
    assert svc.not_master == [Persist((1,))]


async def test_a_failing_round_is_logged_and_the_loop_goes_on(
    echo: tuple[FakeMaster, Echo], caplog: pytest.LogCaptureFixture
) -> None:
    master, svc = echo
    svc.fail_next = True
    svc.host.poke()
    await asyncio.wait_for(svc.failed_round.wait(), 5)
    await run(svc, Revive())  # the failed round took nothing; the next carries the effect out
    assert "echo: scheduling round failed" in caplog.text
    assert len(master.calls_of(CallType.REVIVE)) == 1


def test_reload_without_files_keeps_the_open_api(tmp_path: Path) -> None:
    svc = Echo(FakeMaster(), tmp_path)
    assert svc.host.reload() is True and svc.host.auth.enabled is False


async def test_every_route_is_behind_the_api_authentication_and_reload_keeps_a_good_set(
    tmp_path: Path,
) -> None:
    creds = tmp_path / "credentials.json"
    creds.write_text(json.dumps({"credentials": [{"principal": "alice", "secret": "alice-pw"}]}))
    svc = Echo(FakeMaster(), tmp_path, credentials=creds)
    async with svc, aiohttp.ClientSession() as http:
        ping = f"{svc.host.url}/api/v1/ping"
        async with http.get(ping) as resp:
            assert resp.status == 401 and "WWW-Authenticate" in resp.headers
        alice = {"Authorization": basic_header("alice", "alice-pw")}
        async with http.get(ping, headers=alice) as resp:
            assert resp.status == 200
        async with http.get(ping, params={"owner": "alice"}, headers=alice) as resp:
            assert resp.status == 200  # its own job
        async with http.get(ping, params={"owner": "bob"}, headers=alice) as resp:
            assert resp.status == 403  # another's, and no ACL lets it (default deny)
        creds.write_text('{"credentials": 5}')
        assert svc.host.reload() is False
        async with http.get(ping, headers=alice) as resp:
            assert resp.status == 200  # the previous set stands


async def test_the_store_writes_changed_jobs_together_and_a_failed_write_loses_none(tmp_path: Path) -> None:
    svc = Echo(FakeMaster(), tmp_path)
    svc.host.dirty.update({3, 1})
    svc.fail_write = True
    with pytest.raises(OSError):
        await svc.host.flush()
    assert svc.written == [] and svc.host.dirty == {1, 3} and not svc.durable  # still to be written
    svc.host.dirty.add(2)
    await svc.host.flush()
    await svc.host.flush()  # nothing changed since: no write
    assert svc.written == [[1, 2, 3]] and svc.durable == {1, 2, 3} and not svc.host.dirty


async def test_the_drivers_callbacks_reach_the_framework_through_its_logic(echo: tuple[FakeMaster, Echo]) -> None:
    master, svc = echo
    logic: FrameworkLogic = svc  # what the host is given: the protocol, not a subclass
    assert svc.host.logic is logic and not isinstance(svc, FrameworkHost)
    fid = master.framework().framework_id
    assert svc.subscribed_as == [fid]
    master.add_agent("cpus:2;mem:1024")
    await master.wait_for(lambda: svc.held)
    offer_id = svc.held[0]
    master.rescind(offer_id)
    await master.wait_for(lambda: offer_id not in svc.held)


async def test_an_error_event_from_the_master_stops_the_service_that_holds_the_host(tmp_path: Path) -> None:
    master = FakeMaster()
    svc = Echo(master, tmp_path)
    async with svc:
        assert svc.host.driver is not None
        await svc.host.driver.wait_subscribed(5)
        master.send_error(master.framework().framework_id, "framework removed")
        await asyncio.wait_for(svc.wait_stopped(), 5)
        assert svc.failed is not None and "ended the subscription: framework removed" in str(svc.failed)
