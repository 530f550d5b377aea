"""Authentication and ACLs on a real master: agents over the
real channel, schedulers over HTTP (raw JSON and pymesos 0.3.15 with principal/secret),
operators on /api/v1; and a master with authentication off behaves as before."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from master.service import MasterService
from master.testing_agent import FakeAgent
from protocol.authn import basic_header, bearer_header
from protocol.recordio import RecordIODecoder

from ..cluster import master_config
from .test_pymesos import MesosSchedulerDriver, Scheduler, _wait

CREDENTIALS = {
    "credentials": [
        {"principal": "fw", "secret": "fw-secret"},
        {"principal": "fw2", "secret": "fw2-secret"},
        {"principal": "ag", "secret": "ag-secret", "kind": "agent"},
        {"principal": "ag2", "secret": "ag2-secret", "kind": "agent"},
    ],
    "tokens": [
        {"principal": "ops", "token": "ops-token", "kind": "operator"},
        {"principal": "fw", "token": "fw-token", "kind": "framework"},
        {"principal": "fw", "token": "old-token", "expires_at": 1000.0},
    ],
}
ACLS = {
    "register_frameworks": [{"principals": {"values": ["fw", "fw2"]}, "roles": {"values": ["*", "eng"]}}],
    "run_tasks": [{"principals": {"values": ["fw", "fw2"]}, "users": {"values": ["nobody"]}}],
    "register_agents": [{"principals": {"values": ["ag", "ag2"]}, "agents": {"type": "ANY"}}],
    "teardown_frameworks": [{"principals": {"values": ["ops"]}, "framework_principals": {"type": "ANY"}}],
    "update_weights": [{"principals": {"values": ["ops"]}, "roles": {"type": "ANY"}}],
}
AG = basic_header("ag", "ag-secret")
OPS = bearer_header("ops-token")


def write_auth_files(d: Path) -> dict[str, Any]:
    d.mkdir(parents=True, exist_ok=True)
    (d / "credentials.json").write_text(json.dumps(CREDENTIALS))
    (d / "acls.json").write_text(json.dumps(ACLS))
    return dict(
        credentials=str(d / "credentials.json"), acls=str(d / "acls.json"), authenticate_frameworks=True,
        authenticate_agents=True, authenticate_http_readwrite=True, authenticate_http_readonly=True,
    )


@pytest.fixture
async def secure(tmp_path: Path) -> AsyncIterator[MasterService]:
    svc = MasterService(master_config(tmp_path / "master", **write_auth_files(tmp_path / "auth")))
    await svc.start()
    try:
        yield svc
    finally:
        await svc.stop()


async def get(url: str, auth: str | None = None) -> tuple[int, str, dict[str, str]]:
    headers = {"Authorization": auth} if auth else {}
    async with aiohttp.ClientSession() as s, s.get(url, headers=headers) as r:
        return r.status, await r.text(), dict(r.headers)


async def subscribe(url: str, info: dict[str, Any], auth: str | None) -> tuple[int, list[dict[str, Any]], str]:
    """POST SUBSCRIBE (JSON); the status and the events up to the first non-SUBSCRIBED one or
    the stream's end (or the body, for an error answer)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if auth:
        headers["Authorization"] = auth
    body = {"type": "SUBSCRIBE", "subscribe": {"framework_info": info}}
    if "id" in info:
        body["framework_id"] = info["id"]
    async with aiohttp.ClientSession() as s, s.post(url + "/api/v1/scheduler", json=body, headers=headers) as r:
        if r.status != 200:
            return r.status, [], (await r.text()) + "|" + r.headers.get("WWW-Authenticate", "")
        dec = RecordIODecoder()
        out: list[dict[str, Any]] = []
        async with asyncio.timeout(10):
            async for chunk in r.content.iter_any():
                for rec in dec.feed(chunk):
                    ev = json.loads(rec)
                    out.append(ev)
                    if ev["type"] == "HEARTBEAT" or ev["type"] == "ERROR":
                        return 200, out, r.headers.get("Mesos-Stream-Id", "")
        return 200, out, r.headers.get("Mesos-Stream-Id", "")


def info(principal: str | None = "fw", roles: tuple[str, ...] = ("*",), **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"user": "nobody", "name": "auth-test", "roles": list(roles),
                           "capabilities": [{"type": "MULTI_ROLE"}], **kw}
    if principal is not None:
        out["principal"] = principal
    return out


async def test_s10_s19_agents_and_frameworks_without_valid_credentials_get_401(secure: MasterService) -> None:
    for auth in (None, basic_header("ag", "ag-secreT"), bearer_header("ops-token")):
        agent = FakeAgent(secure.url, authorization=auth)
        with pytest.raises(aiohttp.WSServerHandshakeError) as e:
            await agent.connect()
        assert e.value.status == 401
        await agent.close()
    # a valid credential that register_agents does not list: authenticated, then refused
    agent = FakeAgent(secure.url, authorization=basic_header("fw", "fw-secret"))
    with pytest.raises(ConnectionError):
        await agent.connect()
    await agent.close()
    assert secure.state.agents == {} and secure.state.unauthorized == 1
    for auth in (None, basic_header("fw", "fw-secreT"), basic_header("fw", "fw-secret" + "x"), bearer_header("fw-tokeN"),
                 bearer_header("old-token"), bearer_header("ag-secret"), basic_header("ag", "ag-secret"), "Basic ####"):
        status, _, text = await subscribe(secure.url, info(), auth)
        assert status == 401, (auth, status)
        assert text.endswith('Basic realm="agora", Bearer realm="agora"')
    assert secure.state.frameworks == {}
    status, body, _ = await get(secure.url + "/metrics/snapshot", OPS)
    snap = json.loads(body)
    assert status == 200 and snap["master/auth_failures_total/agent"] == 3
    assert snap["master/auth_failures_total/framework"] == 8 and snap["master/auth_failures_total"] == 11
    assert snap["master/authorization_failures_total"] == 1
    status, prom, _ = await get(secure.url + "/metrics", OPS)
    assert 'agora_auth_failures_total{kind="agent"} 3.0' in prom
    # read-only views need credentials too (any kind); /version and /health stay open
    assert (await get(secure.url + "/state"))[0] == 401
    assert (await get(secure.url + "/state", basic_header("fw", "fw-secret")))[0] == 200
    assert (await get(secure.url + "/version"))[0] == 200 and (await get(secure.url + "/health"))[0] == 200


async def test_s11_agent_id_taken_by_another_credential_is_refused_across_a_restart(tmp_path: Path) -> None:
    cfg = master_config(tmp_path / "master", **write_auth_files(tmp_path / "auth"))
    svc = MasterService(cfg)
    await svc.start()
    real = FakeAgent(svc.url, authorization=AG)
    thief = FakeAgent(svc.url, authorization=basic_header("ag2", "ag2-secret"))
    try:
        aid = await real.connect()
        thief.agent_id = aid
        with pytest.raises(ConnectionError):
            await thief.connect()
        assert svc.state.agents[aid].conn_id is not None and svc.state.agents[aid].reachable
        assert svc.state.unauthorized == 1
        await real.close()
        await thief.close()
        await svc.stop()
        svc = MasterService(cfg.replace(port=0))
        await svc.start()
        thief = FakeAgent(svc.url, authorization=basic_header("ag2", "ag2-secret"))
        thief.agent_id = aid
        with pytest.raises(ConnectionError):
            await thief.connect()
        real = FakeAgent(svc.url, authorization=AG)
        real.agent_id = aid
        assert await real.connect() == aid
    finally:
        await real.close()
        await thief.close()
        await svc.stop()


async def test_s12_s13_roles_and_principals(secure: MasterService) -> None:
    agent = FakeAgent(secure.url, authorization=AG)
    try:
        await agent.connect()
        fw = basic_header("fw", "fw-secret")
        status, evs, _ = await subscribe(secure.url, info(roles=("ops",)), fw)
        assert status == 200 and evs[0]["type"] == "ERROR"
        assert "not authorized for role 'ops'" in evs[0]["error"]["message"]
        status, evs, _ = await subscribe(secure.url, info(principal="fw2"), fw)
        assert evs[0]["type"] == "ERROR" and "does not match" in evs[0]["error"]["message"]
        status, evs, _ = await subscribe(secure.url, info(principal=None), fw)
        assert evs[0]["type"] == "ERROR"
        assert secure.state.frameworks == {}
        # a good subscription (Bearer works as well as Basic), then fw2 tries to take it over
        status, evs, _ = await subscribe(secure.url, info(roles=("eng",), failover_timeout=60.0), bearer_header("fw-token"))
        assert evs[0]["type"] == "SUBSCRIBED"
        fid = evs[0]["subscribed"]["framework_id"]
        status, evs, _ = await subscribe(
            secure.url, info(principal="fw2", id=fid, failover_timeout=60.0), basic_header("fw2", "fw2-secret")
        )
        assert evs[0]["type"] == "ERROR" and "changed" in evs[0]["error"]["message"]
        assert secure.state.frameworks[fid["value"]].principal == "fw"
    finally:
        await agent.close()


class AuthSched(Scheduler):
    def __init__(self) -> None:
        import threading

        self.states: dict[str, tuple[str, str | None]] = {}
        self.done = threading.Event()
        self.launched = False

    def resourceOffers(self, driver: Any, offers: list[Any]) -> None:
        for offer in offers:
            if self.launched:
                driver.declineOffer(offer["id"], filters={"refuse_seconds": 60})
                continue
            self.launched = True
            res = [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                   {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}}]
            tasks = [
                {"task_id": {"value": tid}, "agent_id": offer["agent_id"], "name": tid, "resources": res,
                 "command": {"value": "echo hi", **({"user": user} if user else {})}}
                for tid, user in (("plain", None), ("as-root", "root"), ("as-other", "daemon"))
            ]
            driver.launchTasks(offer["id"], tasks)

    def statusUpdate(self, driver: Any, update: dict[str, Any]) -> None:
        st = update["state"]
        self.states[update["task_id"]["value"]] = (st, update.get("reason"))
        if len(self.states) == 3 and all(s in ("TASK_FINISHED", "TASK_ERROR") for s, _ in self.states.values()):
            self.done.set()


async def test_s14_pymesos_with_principal_and_secret(secure: MasterService) -> None:
    agent = FakeAgent(secure.url, authorization=AG)
    try:
        await agent.connect()
        sched = AuthSched()
        framework = {"user": "nobody", "name": "pymesos-auth", "hostname": "localhost", "principal": "fw"}
        driver = MesosSchedulerDriver(sched, framework, f"127.0.0.1:{secure.port}", use_addict=False,
                                      principal="fw", secret="fw-secret")
        await asyncio.to_thread(driver.start)
        try:
            await _wait(sched.done, "the three tasks end", 30)
        finally:
            await asyncio.to_thread(driver.stop)
            await asyncio.to_thread(driver.join)
        assert sched.states["plain"][0] == "TASK_FINISHED"  # ACCEPT and ACKNOWLEDGE carried Basic auth
        assert sched.states["as-root"] == ("TASK_ERROR", "REASON_TASK_UNAUTHORIZED")
        assert sched.states["as-other"] == ("TASK_ERROR", "REASON_TASK_UNAUTHORIZED")
        assert {t.info.task_id.value for t in agent.tasks.values()} == {"plain"}
    finally:
        await agent.close()


async def test_s17_operator_teardown_needs_the_acl_and_calls_need_the_owner(secure: MasterService) -> None:
    status, evs, sid = await subscribe(secure.url, info(failover_timeout=60.0), basic_header("fw", "fw-secret"))
    fid = evs[0]["subscribed"]["framework_id"]["value"]
    teardown = {"type": "TEARDOWN", "teardown": {"framework_id": {"value": fid}}}
    async with aiohttp.ClientSession() as s:
        async def op(body: dict[str, Any], auth: str | None) -> tuple[int, str]:
            headers = {"Authorization": auth} if auth else {}
            async with s.post(secure.url + "/api/v1", json=body, headers=headers) as r:
                return r.status, await r.text()

        assert (await op(teardown, None))[0] == 401
        status, text = await op(teardown, basic_header("fw2", "fw2-secret"))
        assert status == 403 and "teardown_frameworks" in text
        weights = {"type": "UPDATE_WEIGHTS", "update_weights": {"weight_infos": [{"role": "eng", "weight": 2.0}]}}
        assert (await op(weights, basic_header("fw", "fw-secret")))[0] == 403
        assert (await op(weights, OPS))[0] == 200
        assert (await op({"type": "GET_HEALTH"}, OPS))[0] == 200
        # framework fw2 calls for fw's framework (its own valid credential, fw's stream id)
        call = {"type": "TEARDOWN", "framework_id": {"value": fid}}
        headers = {"Content-Type": "application/json", "Mesos-Stream-Id": sid,
                   "Authorization": basic_header("fw2", "fw2-secret")}
        async with s.post(secure.url + "/api/v1/scheduler", json=call, headers=headers) as r:
            assert r.status == 403
        assert secure.state.frameworks[fid].phase.name != "REMOVED"
        assert (await op(teardown, OPS))[0] == 200
        await secure.wait_until(lambda: fid not in secure.state.frameworks)


async def test_auth_off_changes_nothing(master: MasterService) -> None:
    """Without the flags nothing is checked: no credentials anywhere, a stray header ignored."""
    agent = FakeAgent(master.url)
    try:
        await agent.connect()
        status, evs, _ = await subscribe(master.url, info(principal=None, roles=("any-role",)), None)
        assert status == 200 and evs[0]["type"] == "SUBSCRIBED"
        status, evs, _ = await subscribe(master.url, info(principal="x"), basic_header("nobody", "wrong"))
        assert status == 200 and evs[0]["type"] == "SUBSCRIBED"
        assert (await get(master.url + "/state"))[0] == 200
        assert master.auth_failures == {} and master.state.unauthorized == 0
        assert master.state.agent_principals == {}
        snap = json.loads((await get(master.url + "/metrics/snapshot"))[1])
        assert snap["master/auth_failures_total"] == 0
    finally:
        await agent.close()


async def test_native_client_with_principal_and_secret_or_token(secure: MasterService) -> None:
    from frameworks.client.transport import CallRejected, HttpTransport
    from protocol import mesos

    def sub(principal: str | None) -> mesos.Call:
        return mesos.Call(type=mesos.CallType.SUBSCRIBE, subscribe=mesos.Subscribe(
            framework_info=mesos.FrameworkInfo(user="nobody", name="native", principal=principal)))

    for transport in (HttpTransport(secure.url, principal="fw", secret="fw-secret"),
                      HttpTransport(secure.url, principal="fw", token="fw-token")):
        try:
            stream = await transport.subscribe(sub("fw"))
            events = aiter(stream)
            first = await anext(events)
            assert first.type is mesos.EventType.SUBSCRIBED and first.subscribed is not None
            fid = first.subscribed.framework_id
            await transport.send(mesos.Call.make_revive(fid), stream.stream_id)  # 202 with Basic / Bearer
            await stream.close()
        finally:
            await transport.close()
    bad = HttpTransport(secure.url, principal="fw", secret="fw-secreT")
    try:
        with pytest.raises(CallRejected) as e:
            await bad.subscribe(sub("fw"))
        assert e.value.status == 401
    finally:
        await bad.close()


async def test_cli_presents_its_token(secure: MasterService) -> None:
    """``agora --token`` / ``AGORA_TOKEN`` reaches the master on plain calls and the event stream."""
    from click.testing import CliRunner, Result

    from frameworks.cli.main import cli

    def run(*args: str, token: str | None = None) -> Result:
        env = {"AGORA_MASTER": secure.url, "AGORA_TOKEN": token or "", "AGORA_CONFIG": "/nonexistent/agora.toml"}
        return CliRunner().invoke(cli, list(args), env=env)

    denied = await asyncio.to_thread(run, "agents", "--json")
    assert denied.exit_code != 0 and "requires authentication" in denied.output, denied.output
    ok = await asyncio.to_thread(run, "agents", "--json", token="ops-token")
    assert ok.exit_code == 0, ok.output
    ev = await asyncio.to_thread(run, "--token", "ops-token", "events", "--json", "--count", "1")
    assert ev.exit_code == 0 and "SUBSCRIBED" in ev.output, ev.output
