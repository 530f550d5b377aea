"""mTLS with ``--authenticate-agents``: an agent's client certificate names its principal, and the
agent id <-> principal binding (registry ``agent_principals``) holds per certificate, so one
agent's certificate cannot re-register another agent's id under a different credential or
certificate."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from frameworks.cli.certs import ClusterCerts, make_cluster_certs
from master.service import MasterService
from master.testing_agent import FakeAgent
from protocol import tls
from protocol.authn import basic_header

from .conftest import tls_master_config

PRINCIPALS = ("agent-a", "agent-b")


@pytest.fixture(scope="module")
def named(tmp_path_factory: pytest.TempPathFactory) -> ClusterCerts:
    return make_cluster_certs(tmp_path_factory.mktemp("named"), agent_principals=PRINCIPALS)


def auth_files(d: Path) -> dict[str, object]:
    d.mkdir(parents=True, exist_ok=True)
    (d / "credentials.json").write_text(json.dumps({"credentials": [
        {"principal": "agent-a", "secret": "a-secret", "kind": "agent"},
        {"principal": "shared", "secret": "shared-secret", "kind": "agent"},
    ]}))
    (d / "acls.json").write_text(json.dumps({"register_agents": [
        {"principals": {"values": [*PRINCIPALS, "shared"]}, "agents": {"type": "ANY"}}]}))
    return dict(credentials=str(d / "credentials.json"), acls=str(d / "acls.json"), authenticate_agents=True)


@pytest.fixture
async def master(tmp_path: Path, named: ClusterCerts) -> AsyncIterator[MasterService]:
    cfg = tls_master_config(tmp_path / "master", named, **auth_files(tmp_path / "auth"))
    svc = MasterService(cfg)
    await svc.start()
    try:
        yield svc
    finally:
        await svc.stop()


def agent_with_cert(master: MasterService, c: ClusterCerts, index: int, authorization: str | None = None) -> FakeAgent:
    cert, key = c.per_agent[index]
    agent = FakeAgent(master.url, authorization=authorization)
    ctx = tls.client_context(c.ca, cert, key)
    agent._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx))  # the agent's mTLS session
    return agent


async def test_one_agents_certificate_cannot_reregister_another_agents_id(master: MasterService, named: ClusterCerts) -> None:
    a = agent_with_cert(master, named, 0)
    b = agent_with_cert(master, named, 1)
    try:
        aid = await a.connect()  # no Authorization header: the certificate is the credential
        assert master.state.agent_principals[aid] == "agent-a"
        b.agent_id = aid  # agent-b's (valid) certificate claims agent-a's id
        with pytest.raises(ConnectionError):
            await b.connect()
        assert master.state.unauthorized == 1 and master.state.agents[aid].reachable
        b.agent_id = None  # its own new id is fine
        bid = await b.connect()
        assert bid != aid and master.state.agent_principals[bid] == "agent-b"
        await a.disconnect()  # agent-a itself re-registers its id over its certificate
        assert await a.connect() == aid
    finally:
        await a.close()
        await b.close()


async def test_a_header_must_name_the_same_principal_as_the_certificate(master: MasterService, named: ClusterCerts) -> None:
    # a secret good for another principal does not let agent-b's certificate speak for it
    shared = agent_with_cert(master, named, 1, basic_header("shared", "shared-secret"))
    wrong = agent_with_cert(master, named, 0, basic_header("agent-a", "not-the-secret"))
    agrees = agent_with_cert(master, named, 0, basic_header("agent-a", "a-secret"))
    try:
        for agent in (shared, wrong):
            with pytest.raises(aiohttp.WSServerHandshakeError) as e:
                await agent.connect()
            assert e.value.status == 401
        assert master.auth_failures == {"agent": 2} and not master.state.agents
        aid = await agrees.connect()  # header and certificate agree
        assert master.state.agent_principals[aid] == "agent-a"
    finally:
        for agent in (shared, wrong, agrees):
            await agent.close()


def test_make_cluster_certs_names_each_agent(named: ClusterCerts) -> None:
    import ssl

    from protocol.authn import certificate_names

    for (cert, _key), principal in zip(named.per_agent, PRINCIPALS, strict=True):
        decoded = ssl._ssl._test_decode_cert(str(cert))  # type: ignore[attr-defined]
        assert certificate_names(decoded)[0] == principal
