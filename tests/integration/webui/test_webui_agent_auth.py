"""The web UI's sandbox proxy against agents that run ``--authenticate-http``: the master presents
its ``--agent-http-credential`` (``master.auth``), so the logs pages work; without it the agent's
401 is a clear page. With ACLs, ``access_sandboxes`` decides whose sandboxes a UI user may read
(the master's proxy) and whose the agent serves (``agent/files.py``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from agent import auth as agent_auth
from agent import files
from frameworks.client.driver import SchedulerDriver
from frameworks.client.testing import SimAgent
from frameworks.client.transport import HttpTransport
from master.auth import middleware as master_auth_middleware
from master.auth import reload_auth
from master.config import MasterConfig
from master.service import MasterService
from master.webui import add_webui
from master.webui.html import path
from protocol.authn import Credentials, basic_header
from protocol.backoff import Backoff
from protocol.mesos import CommandInfo, FrameworkInfo, TaskInfo
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState

AGENT_CREDS = {"credentials": [{"principal": "agora-master", "secret": "m-secret", "kind": "operator"}]}


@attrs.define
class Setup:
    master: MasterService
    ui: TestClient[web.Request, web.Application]
    sandboxes: Path
    framework_id: str
    auth_dir: Path


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    d = tmp_path / "auth"
    d.mkdir()
    (d / "master-agent.json").write_text(json.dumps({"principal": "agora-master", "secret": "m-secret"}))
    master = MasterService(MasterConfig(
        ip="127.0.0.1", port=0, work_dir=str(tmp_path / "master"), heartbeat_interval=1.0, ping_interval=0.5,
        ping_timeout=5.0, read_timeout=5.0, agent_http_credential=str(d / "master-agent.json"),
    ))
    await master.start()
    sandboxes = tmp_path / "sandboxes"
    sandboxes.mkdir()
    # the agent's /files/* behind the agent's own --authenticate-http check
    files_app = web.Application(middlewares=[agent_auth.middleware(Credentials.parse(json.dumps(AGENT_CREDS)))])
    files.add_routes(files_app, sandboxes)
    files_site = web.AppRunner(files_app, access_log=None)
    await files_site.setup()
    await web.TCPSite(files_site, "127.0.0.1", 0).start()
    agent = SimAgent(master.url, "cpus:2;mem:1024;disk:2048", hostname="127.0.0.1",
                     port=int(files_site.addresses[0][1]))
    ui_app = web.Application(middlewares=[master_auth_middleware(master)])
    add_webui(ui_app, master)
    ui = TestClient(TestServer(ui_app, host="127.0.0.1", port=0))
    driver = SchedulerDriver(FrameworkInfo(user="alice", name="ui-auth"), HttpTransport(master.url),
                             backoff=Backoff(0.01, 0.1))
    try:
        await agent.start()
        await agent.wait_registered()
        await ui.start_server()
        async with driver:
            fid = await driver.wait_subscribed(30)
            await driver.wait_for(lambda: len(driver.offers) == 1)
            (offer,) = list(driver.offers)
            info = TaskInfo(name="t", task_id=TaskID("t1"), resources=Resources.parse("cpus:1;mem:128").to_mesos(),
                            command=CommandInfo(value="sleep 60"))
            await driver.launch(offer.offer_id, [info])
            await driver.wait_for(lambda: "t1" in driver.tasks and driver.tasks["t1"].state is TaskState.TASK_RUNNING)
            box = sandboxes / fid / "t1"
            box.mkdir(parents=True)
            (box / "stdout").write_text("hello from an authenticated agent\n")
            yield Setup(master, ui, sandboxes, fid, d)
    finally:
        await ui.close()
        await agent.stop()
        await files_site.cleanup()
        await master.stop()


async def _get(s: Setup, url: str, auth: str | None = None) -> tuple[int, str]:
    async with s.ui.get(url, headers={"Authorization": auth} if auth else {}) as r:
        return r.status, await r.text()


async def test_ui_logs_pages_work_against_an_agent_with_authenticate_http(setup: Setup) -> None:
    s = setup
    base = path("ui", "tasks", s.framework_id, "t1", "files")
    status, page = await _get(s, base + "/stdout")
    assert status == 200 and "hello from an authenticated agent" in page
    status, listing = await _get(s, base)
    assert status == 200 and "stdout" in listing
    async with s.ui.get(base + "/download", params={"path": "stdout"}) as r:
        assert r.status == 200 and await r.read() == b"hello from an authenticated agent\n"
    async with s.ui.get(base + "/read", params={"path": "stdout", "offset": "0"}) as r:
        assert r.status == 200 and (await r.json())["data"].startswith("hello")
    # a master with a wrong credential gets the agent's 401, shown as a clear page (not a 500)
    (s.auth_dir / "master-agent.json").write_text(json.dumps({"principal": "agora-master", "secret": "wrong"}))
    assert await reload_auth(s.master)
    status, page = await _get(s, base + "/stdout")
    assert status == 502 and "answered 401" in page
    # and a master with none at all
    s.master.auth = attrs.evolve(s.master.auth, agent_http_header=None)
    status, page = await _get(s, base + "/stdout")
    assert status == 502 and "answered 401" in page
    assert basic_header("agora-master", "m-secret") not in page


async def test_view_acls_filter_state_and_get_tasks_and_access_sandboxes_guards_the_ui(setup: Setup) -> None:
    """Read-only principals see only the frameworks and tasks ``view_frameworks`` / ``view_tasks``
    allow (``/state``, ``/state-summary``, GET_STATE / GET_TASKS / GET_FRAMEWORKS), and the UI's
    sandbox proxy asks ``access_sandboxes`` before it asks the agent."""
    import aiohttp

    from protocol.acls import Acls

    s = setup
    creds = {"credentials": [{"principal": "alice-ui", "secret": "a"}, {"principal": "bob-ui", "secret": "b"},
                             {"principal": "ops", "secret": "o"}]}
    rule = {"principals": {"values": ["alice-ui"]}, "users": {"values": ["alice"]}}
    ops = {"principals": {"values": ["ops"]}, "users": {"type": "ANY"}}
    acls = {"view_frameworks": [rule, ops], "view_tasks": [rule, ops], "access_sandboxes": [rule]}
    # authentication turned on in the running master (the task was launched before)
    s.master.auth = attrs.evolve(s.master.auth, credentials=Credentials.parse(json.dumps(creds)), http_readonly=True,
                                 http_readwrite=True, acls=Acls.parse(json.dumps(acls), default_permissive=False))
    alice, bob, op = basic_header("alice-ui", "a"), basic_header("bob-ui", "b"), basic_header("ops", "o")
    async with aiohttp.ClientSession() as http:
        async def state(auth: str) -> dict[str, Any]:
            async with http.get(s.master.url + "/state", headers={"Authorization": auth}) as r:
                assert r.status == 200
                return dict(await r.json())

        async def v1(auth: str, call: str) -> dict[str, Any]:
            async with http.post(s.master.url + "/api/v1", json={"type": call},
                                 headers={"Authorization": auth, "Accept": "application/json"}) as r:
                assert r.status == 200, await r.text()
                return dict(await r.json())

        mine = await state(alice)
        assert [f["id"] for f in mine["frameworks"]] == [s.framework_id]
        assert [t["id"] for t in mine["frameworks"][0]["tasks"]] == ["t1"]
        assert (await state(bob))["frameworks"] == [] and len((await state(op))["frameworks"]) == 1
        async with http.get(s.master.url + "/state-summary", headers={"Authorization": bob}) as r:
            assert (await r.json())["frameworks"] == []
        assert len((await v1(alice, "GET_TASKS"))["get_tasks"]["tasks"]) == 1
        assert (await v1(bob, "GET_TASKS"))["get_tasks"].get("tasks", []) == []
        got = (await v1(bob, "GET_STATE"))["get_state"]
        assert got["get_frameworks"].get("frameworks", []) == [] and got["get_tasks"].get("tasks", []) == []
        assert len((await v1(op, "GET_FRAMEWORKS"))["get_frameworks"]["frameworks"]) == 1
    base = path("ui", "tasks", s.framework_id, "t1", "files")
    status, page = await _get(s, base + "/stdout", alice)
    assert status == 200 and "hello from an authenticated agent" in page
    for who in (bob, op):  # ops may view everything but access_sandboxes names only alice-ui
        status, page = await _get(s, base + "/stdout", who)
        assert status == 403 and "access_sandboxes denied" in page
        async with s.ui.get(base + "/download", params={"path": "stdout"}, headers={"Authorization": who}) as r:
            assert r.status == 403
