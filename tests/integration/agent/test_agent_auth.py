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

from agent.config import AgentConfig
from agent.recovery import StartupError
from agent.service import AgentService
from master.config import MasterConfig
from master.service import MasterService
from protocol.authn import basic_header, bearer_header

CREDS = {
    "credentials": [{"principal": "ag", "secret": "ag-secret", "kind": "agent"}, {"principal": "ops", "secret": "ops-secret"}],
    "tokens": [{"principal": "ag", "token": "ag-token", "kind": "agent"}],
}
ACLS = {"register_agents": [{"principals": {"values": ["ag"]}, "agents": {"type": "ANY"}}]}


@pytest.fixture
async def master(tmp_path: Path) -> AsyncIterator[MasterService]:
    (tmp_path / "creds.json").write_text(json.dumps(CREDS))
    (tmp_path / "acls.json").write_text(json.dumps(ACLS))
    svc = MasterService(MasterConfig(
        port=0, work_dir=str(tmp_path / "master"), ping_interval=0.5, credentials=str(tmp_path / "creds.json"),
        acls=str(tmp_path / "acls.json"), authenticate_agents=True,
    ))
    await svc.start()
    try:
        yield svc
    finally:
        await svc.stop()


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
