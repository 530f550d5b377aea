"""Mesos' master endpoints on a real in-process master, each compared key by key with Mesos'
documented shape (``mesos_shapes``): /state's accounting (unreachable agents apart, a deactivated
agent registered but inactive, unset fields left out), /slaves, /frameworks, /tasks with its
paging, /roles, /flags, /weights, /quota, /teardown, /reserve, /unreserve, the master's log under
/files and /redirect."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from master.main import add_log_file
from master.mesos_endpoints import LOG_FILE
from master.service import MasterService
from master.testing import task
from master.testing_agent import FakeAgent
from protocol import codec, mesos
from protocol.resources import Resources

from ..cluster import master_config
from . import mesos_shapes as ms
from .test_native_msgpack import MsgpackScheduler

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
async def fast_master(tmp_path: Path) -> AsyncIterator[MasterService]:
    svc = MasterService(master_config(tmp_path / "m", ping_interval=0.1, ping_timeout=0.5, log_dir=str(tmp_path / "logs")))
    handler = add_log_file(str(tmp_path / "logs"))
    await svc.start()
    try:
        yield svc
    finally:
        await svc.stop()
        logging.getLogger().removeHandler(handler)
        handler.close()


async def get(s: aiohttp.ClientSession, url: str) -> Any:
    async with s.get(url) as r:
        assert r.status == 200, (url, r.status, await r.text())
        return await r.json(content_type=None)


async def test_state_accounting_and_shapes(fast_master: MasterService) -> None:
    svc = fast_master
    a1 = FakeAgent(svc.url, "cpus:4;mem:4096;disk:100;ports:[31000-31009]", hostname="h1")
    a2 = FakeAgent(svc.url, "cpus:2;mem:1024", hostname="h2")
    aid1, aid2 = await a1.connect(), await a2.connect()
    async with aiohttp.ClientSession() as s:
        sched = MsgpackScheduler(svc.url, s)
        try:
            info = mesos.FrameworkInfo(
                user="u", name="shapes", roles=("*",), principal="ops",
                capabilities=(mesos.Capability(mesos.CapabilityType.MULTI_ROLE),),
                labels=mesos.Labels((mesos.Label("team", "ml"),)),
            )
            fid = await sched.subscribe(info)
            offers = (await sched.next(mesos.EventType.OFFERS)).offers
            assert offers is not None
            offer = next(o for o in offers.offers if o.agent_id.value == aid1)
            tasks = tuple(task(f"t{i}", cmd="sleep 100", agent_id=offer.agent_id,
                               labels=mesos.Labels((mesos.Label("i", str(i)),))) for i in range(3))
            launch = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=tasks))
            assert await sched.call(mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,), (launch,))) == 202
            await a1.wait_for(lambda: len(a1.tasks) == 3)

            state = await get(s, svc.url + "/state")
            ms.check_state(state)
            assert state["activated_slaves"] == 2 and state["deactivated_slaves"] == 0
            assert state["unreachable_slaves"] == 0 and state["unreachable_agents"] == []
            assert "pid" not in state["frameworks"][0] and "reregistered_time" not in state["slaves"][0]
            assert state["frameworks"][0]["roles"] == ["*"] and state["frameworks"][0]["principal"] == "ops"
            assert state["frameworks"][0]["labels"] == [{"key": "team", "value": "ml"}]
            (t0,) = [t for t in state["frameworks"][0]["tasks"] if t["id"] == "t0"]
            assert t0["labels"] == [{"key": "i", "value": "0"}]
            assert state["log_dir"] == svc.config.log_dir and state["flags"]["agent_ping_timeout"] == "0.5"

            # an unreachable agent is kept apart: counted, not listed, not counted as deactivated
            a2.fail_pings = True

            await svc.wait_until(lambda: svc.state.agents[aid2].phase.value == "UNREACHABLE")
            state = await get(s, svc.url + "/state")
            ms.check_state(state)
            assert [a["id"] for a in state["slaves"]] == [aid1]
            assert state["activated_slaves"] == 1 and state["deactivated_slaves"] == 0
            assert [a["id"] for a in state["unreachable_agents"]] == [aid2]
            snap = await get(s, svc.url + "/metrics/snapshot")
            assert (snap["master/slaves_active"], snap["master/slaves_inactive"], snap["master/slaves_unreachable"]) == (1, 0, 1)

            # a deactivated agent is registered but inactive
            async with s.post(svc.url + "/api/v1", json={"type": "DEACTIVATE_AGENT",
                                                         "deactivate_agent": {"agent_id": {"value": aid1}}}) as r:
                assert r.status == 200
            state = await get(s, svc.url + "/state")
            ms.check_state(state)
            (agent,) = state["slaves"]
            assert agent["active"] is False and agent["deactivated"] is True
            assert state["activated_slaves"] == 0 and state["deactivated_slaves"] == 1

            # /slaves (registered and recovered, with the full resource lists; ?slave_id=)
            for prefix in ("", "/master"):
                slaves = await get(s, svc.url + prefix + "/slaves")
                ms.check(slaves, ms.SLAVES, "/slaves")
                (one,) = slaves["slaves"]
                ms.check(one, ms.AGENT_FULL, "/slaves slaves[]")
                assert {r["name"] for r in one["unreserved_resources_full"]} >= {"cpus", "mem", "ports"}
            assert (await get(s, svc.url + f"/slaves?slave_id={aid1}"))["slaves"][0]["id"] == aid1
            assert (await get(s, svc.url + "/slaves?slave_id=nope"))["slaves"] == []

            # /frameworks and ?framework_id=
            for prefix in ("", "/master"):
                fws = await get(s, svc.url + prefix + "/frameworks")
                ms.check(fws, ms.FRAMEWORKS, "/frameworks")
                (fw,) = fws["frameworks"]
                ms.check_framework(fw)
            assert (await get(s, svc.url + f"/frameworks?framework_id={fid}"))["frameworks"][0]["id"] == fid
            assert (await get(s, svc.url + "/frameworks?framework_id=nope"))["frameworks"] == []

            # /tasks: newest first by default, ?order=asc, ?limit=&offset=, ?framework_id=, ?task_id=
            every = await get(s, svc.url + "/tasks")
            ms.check(every, ms.TASKS, "/tasks")
            for t in every["tasks"]:
                ms.check_task(t)
            times = [t["statuses"][0]["timestamp"] for t in every["tasks"]]
            assert times == sorted(times, reverse=True) and len(times) == 3
            asc = await get(s, svc.url + "/tasks?order=asc")
            assert [t["id"] for t in asc["tasks"]] == [t["id"] for t in reversed(every["tasks"])]
            page = await get(s, svc.url + "/tasks?limit=1&offset=1")
            assert [t["id"] for t in page["tasks"]] == [every["tasks"][1]["id"]]
            assert len((await get(s, svc.url + f"/tasks?framework_id={fid}"))["tasks"]) == 3
            assert [t["id"] for t in (await get(s, svc.url + "/tasks?task_id=t2"))["tasks"]] == ["t2"]
            assert (await get(s, svc.url + "/tasks?framework_id=nope"))["tasks"] == []
            async with s.get(svc.url + "/tasks?limit=x") as r:
                assert r.status == 400
            # limit=-1 is "all" (Mesos reads it unsigned; the Mesos CLI sends it), and every
            # endpoint is served with a trailing slash as libprocess serves it
            assert len((await get(s, svc.url + "/tasks?limit=-1&order=asc"))["tasks"]) == 3
            assert (await get(s, svc.url + "/master/frameworks/"))["frameworks"][0]["id"] == fid
            assert len((await get(s, svc.url + "/master/tasks/"))["tasks"]) == 3

            # /roles, /flags
            roles = await get(s, svc.url + "/roles")
            ms.check(roles, ms.ROLES, "/roles")
            (star,) = [r for r in roles["roles"] if r["name"] == "*"]
            ms.check(star, ms.ROLE, "role")
            assert star["frameworks"] == [fid] and star["resources"]["cpus"] == pytest.approx(0.3)
            flags = await get(s, svc.url + "/flags")
            ms.check(flags, ms.FLAGS, "/flags")
            assert flags["flags"]["port"] == str(svc.port) and all(isinstance(v, str) for v in flags["flags"].values())
        finally:
            await sched.close()
            await a1.close()
            await a2.close()


async def test_weights_quota_reserve_and_teardown(fast_master: MasterService) -> None:
    svc = fast_master
    agent = FakeAgent(svc.url, "cpus:4;mem:1024")
    aid = await agent.connect()
    async with aiohttp.ClientSession() as s:
        sched = MsgpackScheduler(svc.url, s)
        try:
            # /weights: PUT an array of WeightInfo, GET it back
            async with s.put(svc.url + "/weights", data=json.dumps([{"role": "eng", "weight": 2.5}])) as r:
                assert r.status == 200, await r.text()
            weights = await get(s, svc.url + "/weights")
            for w in weights:
                ms.check(w, ms.WEIGHT, "weight")
            assert weights == [{"weight": 2.5, "role": "eng"}]
            async with s.put(svc.url + "/weights", data="{}") as r:
                assert r.status == 400
            async with s.post(svc.url + "/weights", data="[]") as r:
                assert r.status == 405
            # /quota: POST a QuotaRequest, GET QuotaStatus, DELETE /quota/<role>
            req = {"role": "eng", "guarantee": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}}]}
            async with s.post(svc.url + "/quota", data=json.dumps(req)) as r:
                assert r.status == 200, await r.text()
            status = await get(s, svc.url + "/quota")
            ms.check(status, ms.QUOTA_STATUS, "/quota")
            assert [i["role"] for i in status["infos"]] == ["eng"]
            roles = {r["name"]: r for r in (await get(s, svc.url + "/roles"))["roles"]}
            ms.check(roles["eng"], ms.ROLE, "role")
            ms.check(roles["eng"]["quota"], ms.ROLE_QUOTA, "role quota")
            assert roles["eng"]["weight"] == 2.5 and roles["eng"]["quota"]["guarantee"] == {"cpus": 1.0}
            async with s.delete(svc.url + "/quota/eng") as r:
                assert r.status == 200, await r.text()
            assert (await get(s, svc.url + "/quota")) == {}
            async with s.delete(svc.url + "/quota/eng") as r:
                assert r.status == 400 and "no quota" in await r.text()
            # /reserve and /unreserve (form-encoded slaveId and resources), 202 as Mesos
            want = Resources.of(cpus=1).reserve("eng", principal="ops")
            form = {"slaveId": aid, "resources": codec.encode_json(want.to_mesos()).decode()}
            async with s.post(svc.url + "/reserve", data=form) as r:
                assert r.status == 202, await r.text()
            slave = (await get(s, svc.url + "/slaves"))["slaves"][0]
            assert slave["reserved_resources"]["eng"]["cpus"] == 1.0
            assert slave["reserved_resources_full"]["eng"][0]["name"] == "cpus"
            async with s.post(svc.url + "/unreserve", data=form) as r:
                assert r.status == 202, await r.text()
            assert (await get(s, svc.url + "/slaves"))["slaves"][0]["reserved_resources"] == {}
            async with s.post(svc.url + "/reserve", data={"resources": "[]"}) as r:
                assert r.status == 400 and "slaveId" in await r.text()
            async with s.post(svc.url + "/reserve", data={"slaveId": "nope", "resources": "[]"}) as r:
                assert r.status == 400 and "No agent found" in await r.text()
            async with s.post(svc.url + "/reserve", data={"slaveId": aid, "resources": "{"}) as r:
                assert r.status == 400 and "resources" in await r.text()
            # /teardown (form-encoded frameworkId)
            fid = await sched.subscribe(mesos.FrameworkInfo(user="u", name="tear-me"))
            async with s.post(svc.url + "/teardown", data="", headers=FORM) as r:
                assert r.status == 400 and "frameworkId" in await r.text()
            async with s.post(svc.url + "/teardown", data={"frameworkId": "nope"}) as r:
                assert r.status == 400 and "No framework found" in await r.text()
            async with s.post(svc.url + "/master/teardown", data={"frameworkId": fid}) as r:
                assert r.status == 200, await r.text()
            await svc.wait_until(lambda: fid not in svc.state.frameworks)
            fws = await get(s, svc.url + "/frameworks")
            assert fws["frameworks"] == [] and [f["id"] for f in fws["completed_frameworks"]] == [fid]
        finally:
            await sched.close()
            await agent.close()


async def test_master_log_files_and_redirect(fast_master: MasterService, tmp_path: Path) -> None:
    svc = fast_master
    logging.getLogger("agora.test").warning("a line for /master/log")
    async with aiohttp.ClientSession() as s:
        debug = await get(s, svc.url + "/files/debug")
        assert debug == {"/master/log": str(tmp_path / "logs" / LOG_FILE)}
        (info,) = await get(s, svc.url + "/files/browse?path=/master/log")
        ms.check(info, ms.FILE_INFO, "FileInfo")
        end = await get(s, svc.url + "/files/read?path=/master/log&offset=-1")
        ms.check(end, ms.FILE_READ, "/files/read")
        assert end["data"] == "" and end["offset"] == info["size"] > 0
        read = await get(s, svc.url + "/files/read?path=/master/log&offset=0")
        assert "a line for /master/log" in read["data"] and read["offset"] == 0
        async with s.get(svc.url + "/files/download?path=/master/log") as r:
            assert r.status == 200 and b"a line for /master/log" in await r.read()
        for bad, code in (("/files/read?path=/etc/passwd", 404), ("/files/read", 400)):
            async with s.get(svc.url + bad) as r:
                assert r.status == code, bad
        async with s.get(svc.url + "/redirect", allow_redirects=False) as r:
            assert r.status == 307 and r.headers["Location"] == f"//{svc.advertised_host}:{svc.port}"

        # the same through the v1 operator API: LIST_FILES, READ_FILE (data base64, as Mesos)
        async def v1(body: dict[str, Any]) -> tuple[int, Any]:
            async with s.post(svc.url + "/api/v1", data=json.dumps(body),
                              headers={"Content-Type": "application/json", "Accept": "application/json"}) as r:
                text = await r.text()
                return r.status, (json.loads(text) if r.status == 200 and text else text)

        status, listed = await v1({"type": "LIST_FILES", "list_files": {"path": "/master/log"}})
        (fi,) = listed["list_files"]["file_infos"]
        assert status == 200 and fi["path"] == "/master/log" and fi["size"] > 0
        ms.check(fi, ms.shape("path nlink size mtime mode uid gid"), "v1 FileInfo")
        _, got = await v1({"type": "READ_FILE", "read_file": {"path": "/master/log", "offset": 0}})
        assert b"a line for /master/log" in base64.b64decode(got["read_file"]["data"])
        assert got["read_file"]["size"] >= len(base64.b64decode(got["read_file"]["data"]))
        assert (await v1({"type": "READ_FILE", "read_file": {"path": "/etc/passwd", "offset": 0}}))[0] == 404
        # GET_OPERATIONS: none pending (operations are applied when accepted)
        assert (await v1({"type": "GET_OPERATIONS"}))[1] == {"type": "GET_OPERATIONS", "get_operations": {}}
        # SET_LOGGING_LEVEL for a while, GET_LOGGING_LEVEL, then back
        assert (await v1({"type": "GET_LOGGING_LEVEL"}))[1]["get_logging_level"]["level"] == 0
        status, _ = await v1({"type": "SET_LOGGING_LEVEL",
                              "set_logging_level": {"level": 1, "duration": {"nanoseconds": 200_000_000}}})
        assert status == 200
        assert (await v1({"type": "GET_LOGGING_LEVEL"}))[1]["get_logging_level"]["level"] == 1
        revert = svc.operator_api._logging._revert  # the level goes back after its duration
        assert revert is not None and 0 < revert.when() - asyncio.get_running_loop().time() <= 0.2
        revert.cancel()
        svc.operator_api._logging._back()  # (what the timer runs)
        assert (await v1({"type": "GET_LOGGING_LEVEL"}))[1]["get_logging_level"]["level"] == 0
        # what this master does not do is named
        status, text = await v1({"type": "MARK_AGENT_GONE", "mark_agent_gone": {"agent_id": {"value": "a"}}})
        assert status == 400 and text == "Operator call MARK_AGENT_GONE is not supported by this master"


async def test_master_log_without_log_dir_is_404(master: MasterService) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.get(master.url + "/files/read?path=/master/log") as r:
            assert r.status == 404 and "--log-dir" in await r.text()
        assert await get(s, master.url + "/files/debug") == {}
        state = await get(s, master.url + "/state")
        assert "log_dir" not in state
