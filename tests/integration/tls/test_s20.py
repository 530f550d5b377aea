"""With TLS on, a plaintext client and a client certificate from a foreign CA
are refused and nothing is processed; with mTLS an agent without a client certificate is refused;
the CLI works with ``--ca`` and fails with a clear certificate error without it."""

from __future__ import annotations

import ssl
from pathlib import Path

import aiohttp
import pytest

from master.service import MasterService
from protocol import agent_channel as ac
from protocol import codec, tls
from protocol.mesos import Call, FrameworkInfo

from .conftest import Certs, agent_process, run_cli

SUBSCRIBE = codec.encode_json(Call.make_subscribe(FrameworkInfo(user="u", name="s20")))
HEADERS = {"Content-Type": codec.JSON, "Accept": codec.JSON}


def nothing_processed(master: MasterService) -> bool:
    """No framework, no agent, no message read (not even a malformed one)."""
    return (
        not master.state.frameworks
        and not master.state.agents
        and master.counters.get("invalid_messages_total", 0) == 0
    )


async def test_plaintext_client_is_refused_and_nothing_is_processed(master: MasterService) -> None:
    plain = master.url.replace("https://", "http://")
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ClientError):
            async with http.post(plain + "/api/v1/scheduler", data=SUBSCRIBE, headers=HEADERS) as r:
                await r.read()
        with pytest.raises(aiohttp.ClientError):  # an agent trying ws:// (no downgrade either)
            await http.ws_connect(plain.replace("http://", "ws://") + ac.PATH)
        for path in ("/health", "/state"):
            with pytest.raises(aiohttp.ClientError):
                async with http.get(plain + path) as r:
                    await r.read()
    assert nothing_processed(master)
    guard = master.guard
    assert guard is not None
    # no connection got past the handshake (so no HTTP request was ever parsed), and the failed
    # handshakes do not hold connection slots (they would, forever, without the guard's handshake
    # timeout): every one is counted out within read_timeout
    await guard.wait_until(lambda: guard.active == 0 and guard.handshake_failures >= 4, within=10)
    assert guard.connections == 0 and guard.timeouts == 0


async def test_client_certificate_from_a_foreign_ca_is_refused(master: MasterService, certs: Certs) -> None:
    ctx = tls.client_context(certs.cluster.ca, certs.foreign_cert, certs.foreign_key)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as http:
        with pytest.raises((aiohttp.ClientError, ssl.SSLError)):
            await http.ws_connect(master.url + ac.PATH)
        with pytest.raises((aiohttp.ClientError, ssl.SSLError)):
            async with http.post(master.url + "/api/v1/scheduler", data=SUBSCRIBE, headers=HEADERS) as r:
                await r.read()
    assert nothing_processed(master)


async def test_a_server_from_a_foreign_ca_is_refused_by_the_client(master: MasterService, certs: Certs) -> None:
    """The other direction (spoofed master): a client pinning another CA does not talk to it."""
    ctx = tls.client_context(certs.foreign_ca)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as http:
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            async with http.get(master.url + "/health") as r:
                await r.read()
    assert nothing_processed(master)


async def test_agent_without_client_certificate_is_refused_with_mtls(master: MasterService, certs: Certs) -> None:
    ctx = tls.client_context(certs.cluster.ca)  # trusts the master, presents no certificate
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as exc:
            await http.ws_connect(master.url + ac.PATH)
        assert exc.value.status == 403
        assert nothing_processed(master)
        # mTLS is for agents: a scheduler without a client certificate may still subscribe
        async with http.post(master.url + "/api/v1/scheduler", data=SUBSCRIBE, headers=HEADERS) as r:
            assert r.status == 200
            r.close()
    await master.wait_until(lambda: len(master.state.frameworks) == 1, 10)
    assert not master.state.agents


async def test_real_agent_without_client_certificate_never_registers(
    master: MasterService, certs: Certs, tmp_path: Path
) -> None:
    guard = master.guard
    assert guard is not None
    async with agent_process(master, tmp_path / "agent", "--master-ca", str(certs.cluster.ca)):
        # its channel gets the 403 before the upgrade, again on every retry, and never registers
        await guard.wait_until(lambda: master.counters.get("tls_client_cert_required_total", 0) >= 3, within=30)
        assert not master.state.agents
    assert nothing_processed(master)


async def test_cli_with_ca_works_and_without_fails_with_a_certificate_error(
    master: MasterService, certs: Certs
) -> None:
    code, out, err = await run_cli("--ca", str(certs.cluster.ca), "agents", "--master", master.url, "--json")
    assert code == 0, err
    assert out.strip().startswith("[") or out.strip().startswith("{")
    code, out, err = await run_cli("agents", "--master", master.url)
    assert code != 0
    assert "TLS certificate is not trusted" in err and "--ca FILE or AGORA_CA" in err, err
    assert "Traceback" not in err
    code, out, err = await run_cli("--ca", str(certs.foreign_ca), "agents", "--master", master.url)
    assert code != 0 and "not the one that signed it" in err, err
    code, out, err = await run_cli("--ca", "/nonexistent/ca.pem", "agents", "--master", master.url)
    assert code != 0 and "/nonexistent/ca.pem" in err, err
