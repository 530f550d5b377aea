"""The real agent (in-process) against the real master with authentication on: it presents its
credential (a Mesos credential file, or a bearer token) on the channel; a wrong one is refused
(401) and it never registers; with ``--authenticate-http`` its own endpoints need credentials.
(S14 at the agent -- uid 0 refused unless ``allow_root_tasks``, even when the master is
bypassed -- is ``test_agent_inprocess.py::test_task_user_rules``.)"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from agent.config import AgentConfig
from agent.recovery import StartupError
from agent.service import AgentService
from master.service import MasterService
from protocol.authn import basic_header, bearer_header

from ..cluster import running_master

CREDS = {
    "credentials": [{"principal": "ag", "secret": "ag-secret", "kind": "agent"}, {"principal": "ops", "secret": "ops-secret"}],
    "tokens": [{"principal": "ag", "token": "ag-token", "kind": "agent"}],
}
ACLS = {"register_agents": [{"principals": {"values": ["ag"]}, "agents": {"type": "ANY"}}]}


@pytest.fixture
async def master(tmp_path: Path) -> AsyncIterator[MasterService]:
    (tmp_path / "creds.json").write_text(json.dumps(CREDS))
    (tmp_path / "acls.json").write_text(json.dumps(ACLS))
    async with running_master(
        tmp_path / "master",
        credentials=str(tmp_path / "creds.json"),
        acls=str(tmp_path / "acls.json"),
        authenticate_agents=True,
    ) as svc:
        yield svc


@pytest.fixture
async def make_agent(master: MasterService, tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    agents: list[AgentService] = []

    async def make(name: str, **kw: Any) -> AgentService:
        svc = AgentService(AgentConfig(
            master=f"127.0.0.1:{master.port}", work_dir=tmp_path / name, resources="cpus:2;mem:1024;disk:100",
            reconnect_initial=0.05, reconnect_max=0.2, **kw,
        ))
        agents.append(svc)
        await svc.start()
        return svc

    try:
        yield make
    finally:
        for a in agents:
            await a.stop()


async def test_agent_registers_with_its_credential_file_or_token(
    master: MasterService, make_agent: Callable[..., Any], tmp_path: Path
) -> None:
    (tmp_path / "ag.json").write_text('{"principal": "ag", "secret": "ag-secret"}')
    a = await make_agent("a", credential=tmp_path / "ag.json")
    b = await make_agent("b", token="ag-token")
    async with asyncio.timeout(10):
        await a.channel.registered_event.wait()
        await b.channel.registered_event.wait()
    assert len(master.state.agents) == 2 and set(master.state.agent_principals.values()) == {"ag"}


async def test_agent_with_a_wrong_credential_never_registers(
    master: MasterService, make_agent: Callable[..., Any], tmp_path: Path
) -> None:
    (tmp_path / "bad.json").write_text('{"principal": "ag", "secret": "ag-secreT"}')
    a = await make_agent("a", credential=tmp_path / "bad.json")
    b = await make_agent("b")  # none at all
    await master.wait_until(lambda: master.auth_failures.get("agent", 0) >= 4)  # both keep retrying, both refused
    assert master.state.agents == {} and not a.channel.registered and not b.channel.registered
    (tmp_path / "garbage.json").write_text("{")
    with pytest.raises(StartupError):
        await make_agent("c", credential=tmp_path / "garbage.json")


async def test_agent_http_endpoints_need_credentials(
    master: MasterService, make_agent: Callable[..., Any], tmp_path: Path
) -> None:
    (tmp_path / "http.json").write_text(json.dumps(CREDS))
    a = await make_agent("a", token="ag-token", authenticate_http=True, http_credentials=tmp_path / "http.json")
    async with aiohttp.ClientSession() as s:
        async def status(path: str, auth: str | None = None) -> int:
            async with s.get(a.url + path, headers={"Authorization": auth} if auth else {}) as r:
                return r.status

        assert await status("/health") == 200
        for path in ("/state", "/metrics", "/files/browse?path=/"):
            assert await status(path) == 401
            assert await status(path, basic_header("ops", "ops-secreT")) == 401
            assert await status(path, bearer_header("ag-token")) == 401  # an agent's credential reads no agent
        assert await status("/state", basic_header("ops", "ops-secret")) == 200


async def test_agent_http_credentials_are_reread_on_reload(
    master: MasterService, make_agent: Callable[..., Any], tmp_path: Path
) -> None:
    """SIGHUP (``agent/main.py`` -> ``agent.auth.reload_all``): a removed credential is refused
    from the next request on; a file that does not parse keeps the previous set."""
    from agent import auth as agent_auth

    (tmp_path / "http.json").write_text(json.dumps(CREDS))
    a = await make_agent("a", token="ag-token", authenticate_http=True, http_credentials=tmp_path / "http.json")
    ops = basic_header("ops", "ops-secret")
    async with aiohttp.ClientSession() as s:
        async def status(auth: str | None) -> int:
            async with s.get(a.url + "/state", headers={"Authorization": auth} if auth else {}) as r:
                return r.status

        assert await status(ops) == 200
        (tmp_path / "http.json").write_text(json.dumps({"credentials": [{"principal": "ops2", "secret": "s2"}]}))
        assert await status(ops) == 200  # nothing re-read until told
        assert agent_auth.reload_all() >= 1
        assert await status(ops) == 401 and await status(basic_header("ops2", "s2")) == 200
        (tmp_path / "http.json").write_text("{")
        agent_auth.reload_all()
        assert await status(basic_header("ops2", "s2")) == 200 and await status(ops) == 401 and await status(None) == 401
        live = [h for h in agent_auth._LIVE if h.path == str(tmp_path / "http.json")]
        assert len(live) == 1 and live[0].reloads == 1 and live[0].reload_failures == 1


async def test_agent_files_follow_access_sandboxes(tmp_path: Path) -> None:
    """``--acls`` with ``access_sandboxes``: ``/files/*`` serves a principal only the sandboxes of
    tasks whose user (the task's command user, else the framework's, from the checkpoint) it may
    read; the root listing needs a rule for ANY user. Re-read on reload with the credentials."""
    from aiohttp.test_utils import TestClient, TestServer

    from agent import auth as agent_auth
    from agent import files
    from agent.checkpoint import Checkpoint, TaskRecordFile
    from protocol.mesos import CommandInfo, FrameworkInfo, TaskInfo
    from protocol.mesos_common import TaskID

    work = tmp_path / "agent"
    ckpt = Checkpoint(work, fsync=False)
    ckpt.init()
    ckpt.write_framework("f1", FrameworkInfo(user="alice", name="f"))
    ckpt.write_task(TaskRecordFile("f1", TaskInfo(name="a", task_id=TaskID("ta"), command=CommandInfo(value="true"))))
    ckpt.write_task(TaskRecordFile("f1", TaskInfo(name="r", task_id=TaskID("tr"),
                                                  command=CommandInfo(value="true", user="root"))))
    ckpt.commit()
    ckpt.close()
    for tid in ("ta", "tr"):
        (work / "sandboxes" / "f1" / tid).mkdir(parents=True)
        (work / "sandboxes" / "f1" / tid / "stdout").write_text(f"out of {tid}\n")
    (tmp_path / "http.json").write_text(json.dumps(
        {"credentials": [{"principal": "alice-ui", "secret": "a"}, {"principal": "ops", "secret": "o"}]}))
    acls = {"access_sandboxes": [{"principals": {"values": ["alice-ui"]}, "users": {"values": ["alice"]}},
                                 {"principals": {"values": ["ops"]}, "users": {"type": "ANY"}}]}
    (tmp_path / "acls.json").write_text(json.dumps(acls))
    cfg = AgentConfig(master="127.0.0.1:1", work_dir=work, authenticate_http=True,
                      http_credentials=tmp_path / "http.json", acls=tmp_path / "acls.json")
    holder = agent_auth.http_credentials(cfg)
    assert holder is not None
    app = web.Application(middlewares=[agent_auth.middleware(holder)])
    files.add_routes(app, work / "sandboxes")
    alice, ops = basic_header("alice-ui", "a"), basic_header("ops", "o")
    async with TestClient(TestServer(app, host="127.0.0.1", port=0)) as client:
        async def status(path: str, auth: str) -> int:
            async with client.get("/files/read", params={"path": path, "offset": "0"},
                                  headers={"Authorization": auth}) as r:
                return r.status

        assert await status("f1/ta/stdout", alice) == 200
        assert await status("f1/tr/stdout", alice) == 403  # runs as root (its command's user)
        assert await status(str(work / "sandboxes" / "f1" / "tr" / "stdout"), alice) == 403  # absolute path too
        assert await status("f1/ta/../tr/stdout", alice) in (403, 404)  # never served
        assert await status("f1/tr/stdout", ops) == 200
        async with client.get("/files/browse", params={"path": "f1"}, headers={"Authorization": alice}) as r:
            assert r.status == 403  # above a sandbox: no user, only ANY rules
        async with client.get("/files/browse", params={"path": "f1"}, headers={"Authorization": ops}) as r:
            assert r.status == 200
        acls["access_sandboxes"] = [{"principals": {"values": ["alice-ui"]}, "users": {"type": "ANY"}}]
        (tmp_path / "acls.json").write_text(json.dumps(acls))
        assert holder.reload()
        assert await status("f1/tr/stdout", alice) == 200 and await status("f1/tr/stdout", ops) == 403
        (tmp_path / "acls.json").write_text("{")
        assert not holder.reload()  # a bad file keeps the previous credentials and ACLs
        assert await status("f1/tr/stdout", alice) == 200 and await status("f1/tr/stdout", ops) == 403
    with pytest.raises(StartupError):
        agent_auth.http_credentials(cfg)
