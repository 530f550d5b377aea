"""UPDATE_FRAMEWORK applied without re-subscribing (pymesos 0.3.15, unchanged, sends it through its
own connection), and what this master does not do answered 400 with the reason instead of being
accepted and ignored: operation feedback, persistent volumes (offer constraints and offer filters: test_offer_constraints.py)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import aiohttp

from master.service import MasterService
from master.testing_agent import FakeAgent

try:
    from pymesos import MesosSchedulerDriver, Scheduler
except ImportError as e:  # pragma: no cover - a missing client is a failure, never a skip
    raise ImportError(
        "pymesos 0.3.15 is required for the compatibility tests: run scripts/install-compat-clients"
    ) from e

from ...raw_chunks import RawChunkStream

JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


class Sched(Scheduler):
    def __init__(self) -> None:
        self.fid: str | None = None
        self.registered_ev = threading.Event()
        self.offer_roles: list[str] = []
        self.offered_b = threading.Event()

    def registered(self, driver: Any, framework_id: Any, master_info: Any) -> None:
        self.fid = framework_id["value"]
        self.registered_ev.set()

    def resourceOffers(self, driver: Any, offers: list[Any]) -> None:
        for o in offers:
            role = o.get("allocation_info", {}).get("role", "")
            self.offer_roles.append(role)
            if role == "b":
                self.offered_b.set()
            driver.declineOffer(o["id"], filters={"refuse_seconds": 0.1})


async def state_framework(master: MasterService, fid: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as s, s.get(master.url + "/frameworks", params={"framework_id": fid}) as r:
        (fw,) = (await r.json())["frameworks"]
        return fw  # type: ignore[no-any-return]


async def test_update_framework_through_pymesos(master: MasterService) -> None:
    agent = FakeAgent(master.url, "cpus:4;mem:4096")
    await agent.connect()
    sched = Sched()
    info = {"user": "nobody", "name": "before", "roles": ["a"], "capabilities": [{"type": "MULTI_ROLE"}]}
    driver = MesosSchedulerDriver(sched, info, f"127.0.0.1:{master.port}", use_addict=False)
    await asyncio.to_thread(driver.start)  # blocking HTTP: never on the loop thread
    try:
        assert await asyncio.to_thread(sched.registered_ev.wait, 20)
        assert sched.fid is not None
        fw = await state_framework(master, sched.fid)
        assert (fw["name"], fw["roles"]) == ("before", ["a"])
        new = {**info, "id": {"value": sched.fid}, "name": "after", "roles": ["a", "b"]}
        call = {"type": "UPDATE_FRAMEWORK", "framework_id": {"value": sched.fid},
                "update_framework": {"framework_info": new, "suppressed_roles": ["a"]}}
        await asyncio.to_thread(driver._send, call)  # pymesos' own connection and stream id
        fw = await state_framework(master, sched.fid)
        assert (fw["name"], fw["roles"]) == ("after", ["a", "b"])
        assert master.state.frameworks[sched.fid].connected  # the same subscription
        # the new role gets offers; the suppressed one gets none after the update
        assert await asyncio.to_thread(sched.offered_b.wait, 20)
        # a field Mesos does not let UPDATE_FRAMEWORK change is refused, nothing applied
        bad = {**call, "update_framework": {"framework_info": {**new, "user": "root", "name": "again"}}}
        try:
            await asyncio.to_thread(driver._send, bad)
            raise AssertionError("UPDATE_FRAMEWORK changing the user was accepted")
        except RuntimeError as e:
            assert "400" in str(e) and "Updating 'FrameworkInfo.user' is unsupported" in str(e)
        assert (await state_framework(master, sched.fid))["name"] == "after"
    finally:
        await asyncio.to_thread(driver.stop)
        await asyncio.to_thread(driver.join)
        await agent.close()


async def test_what_is_not_supported_is_refused(master: MasterService) -> None:
    agent = FakeAgent(master.url, "cpus:4;mem:4096")
    await agent.connect()
    raw = RawChunkStream(master.url)
    url = master.url + "/api/v1/scheduler"
    try:
        async with aiohttp.ClientSession() as s:
            # offer filters Mesos refuses: an ERROR event with the reason, no subscription
            sub = {"type": "SUBSCRIBE", "subscribe": {"framework_info": {
                "user": "nobody", "name": "x", "offer_filters": {"*": {"min_allocatable_resources": {
                    "quantities": [{"quantities": {}}]}}}}}}
            bad = RawChunkStream(master.url)
            try:
                await bad.post("/api/v1/scheduler", json.dumps(sub).encode(), JSON_HEADERS)
                assert json.loads(await bad.record()) == {"type": "ERROR", "error": {"message": (
                    "'FrameworkInfo.offer_filters': Resource quantities must contain at least one quantity")}}
            finally:
                await bad.close()
            ok = {"type": "SUBSCRIBE", "subscribe": {"framework_info": {"user": "nobody", "name": "x"}}}
            await raw.post("/api/v1/scheduler", json.dumps(ok).encode(), JSON_HEADERS)
            sid = raw.headers["mesos-stream-id"]
            fid = json.loads(await raw.record())["subscribed"]["framework_id"]
            headers = {"Content-Type": "application/json", "Mesos-Stream-Id": sid}
            offer = None
            async with asyncio.timeout(10):
                while offer is None:
                    ev = json.loads(await raw.record())
                    if ev["type"] == "OFFERS":
                        offer = ev["offers"]["offers"][0]
            volume = {"name": "disk", "type": "SCALAR", "scalar": {"value": 10},
                      "disk": {"persistence": {"id": "v1"}, "volume": {"container_path": "data", "mode": "RW"}}}
            calls = [
                ({"type": "RECONCILE_OPERATIONS", "framework_id": fid, "reconcile_operations": {"operations": []}},
                 "Call RECONCILE_OPERATIONS is not supported: this master keeps no offer operation statuses "
                 "(operation feedback is not supported)"),
                ({"type": "ACCEPT", "framework_id": fid, "accept": {"offer_ids": [offer["id"]], "operations": [
                    {"type": "CREATE", "create": {"volumes": [volume]}}]}},
                 "ACCEPT: operation 0 (CREATE): persistent volumes are not supported by this master"),
                ({"type": "ACCEPT", "framework_id": fid, "accept": {"offer_ids": [offer["id"]], "operations": [
                    {"type": "RESERVE", "id": {"value": "op1"}, "reserve": {"resources": []}}]}},
                 "ACCEPT: operation 0 has an 'id': operation feedback is not supported by this master (leave 'id' out)"),
            ]
            for call, why in calls:
                async with s.post(url, data=json.dumps(call), headers=headers) as r:
                    assert (r.status, await r.text()) == (400, why), call["type"]
            # the offer is untouched by the refused ACCEPTs
            assert offer["id"]["value"] in {o.offer_id for o in master.allocator.outstanding_offers()}
    finally:
        await raw.close()
        await agent.close()
