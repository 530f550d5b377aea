"""``protocol.tls``: server and client contexts (TLS 1.2+, pinning, mTLS) and the errors a wrong
file gives (each names the file and its flag)."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from frameworks.cli.certs import LocalCA, make_cluster_certs
from protocol import tls
from protocol.authn import certificate_names


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("certs")
    cc = make_cluster_certs(d)
    foreign = LocalCA.create("foreign CA")
    fc, fk = foreign.issue("intruder").write_pem(d / "foreign.pem", d / "foreign-key.pem")
    return {
        "ca": cc.ca, "cert": cc.master_cert, "key": cc.master_key, "agent": cc.agent_cert,
        "agent_key": cc.agent_key, "foreign_ca": foreign.write_ca(d / "foreign-ca.pem"),
        "foreign": fc, "foreign_key": fk,
    }


def test_server_context_is_tls12_plus_and_asks_for_client_certs_only_with_a_ca(certs: dict[str, Path]) -> None:
    ctx = tls.server_context(certs["cert"], certs["key"])
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert ctx.verify_mode == ssl.CERT_NONE
    mtls = tls.server_context(certs["cert"], certs["key"], certs["ca"])
    assert mtls.verify_mode == ssl.CERT_OPTIONAL


def test_client_context_pins_the_ca_and_checks_hostnames(certs: dict[str, Path]) -> None:
    ctx = tls.client_context(certs["ca"])
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert [c["subject"] for c in ctx.get_ca_certs()] == [
        ((("organizationName", "agora"),), (("commonName", "agora local CA"),))
    ]


def test_missing_file_names_the_file_and_flag(tmp_path: Path, certs: dict[str, Path]) -> None:
    with pytest.raises(tls.TlsError, match=r"--tls-cert .*nope\.pem: no such file"):
        tls.server_context(tmp_path / "nope.pem", certs["key"])
    with pytest.raises(tls.TlsError, match=r"--master-ca .*gone\.pem: no such file"):
        tls.client_context(tmp_path / "gone.pem", ca_flag="--master-ca")


def test_unreadable_directory_and_non_pem_files(tmp_path: Path, certs: dict[str, Path]) -> None:
    with pytest.raises(tls.TlsError, match="is a directory"):
        tls.client_context(tmp_path)
    junk = tmp_path / "junk.pem"
    junk.write_text("hello")
    with pytest.raises(tls.TlsError, match=r"junk\.pem: not a PEM file"):
        tls.server_context(certs["cert"], junk)
    secret = tmp_path / "secret.pem"
    secret.write_text("-----BEGIN CERTIFICATE-----\n")
    secret.chmod(0)
    try:
        readable = secret.open("rb")  # root reads anything: then the file is malformed instead
        readable.close()
        with pytest.raises(tls.TlsError, match=r"secret\.pem"):
            tls.client_context(secret)
    except PermissionError:
        with pytest.raises(tls.TlsError, match=r"secret\.pem: cannot read it"):
            tls.client_context(secret)


def test_malformed_pem_and_mismatched_key(tmp_path: Path, certs: dict[str, Path]) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    with pytest.raises(tls.TlsError, match=r"--ca .*bad\.pem: not a CA certificate"):
        tls.client_context(bad)
    with pytest.raises(tls.TlsError, match="the key does not match the certificate"):
        tls.server_context(certs["cert"], certs["agent_key"])


def test_client_cert_needs_its_key(certs: dict[str, Path]) -> None:
    with pytest.raises(tls.TlsError, match="go together"):
        tls.client_context(certs["ca"], cert=certs["agent"])


def test_certificate_common_name_and_is_https() -> None:
    cert = {"subject": ((("organizationName", "agora"),), (("commonName", "agent-7"),))}
    assert certificate_names(cert) == ("agent-7",)
    assert certificate_names(None) == ()
    assert tls.is_https("HTTPS://m:5050") and tls.is_https("wss://m") and not tls.is_https("http://m")


async def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> dict[str, object] | None:
    """Open one loopback TLS connection; the client certificate the server saw (None: none)."""
    seen: asyncio.Future[dict[str, object] | None] = asyncio.get_running_loop().create_future()

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not seen.done():
            seen.set_result(tls.peer_certificate(writer.transport))
        writer.close()

    srv = await asyncio.start_server(on_conn, "127.0.0.1", 0, ssl=server)
    port = srv.sockets[0].getsockname()[1]
    try:
        _, w = await asyncio.open_connection("127.0.0.1", port, ssl=client)
        w.close()
        async with asyncio.timeout(5):
            return await seen
    finally:
        srv.close()
        await srv.wait_closed()


async def test_handshake_pinned_ca_and_mtls(certs: dict[str, Path]) -> None:
    server = tls.server_context(certs["cert"], certs["key"], certs["ca"])
    assert await _handshake(server, tls.client_context(certs["ca"])) is None  # no client cert
    got = await _handshake(server, tls.client_context(certs["ca"], certs["agent"], certs["agent_key"]))
    assert certificate_names(got)[0] == "agora-agent"


async def test_foreign_ca_fails_both_ways(certs: dict[str, Path]) -> None:
    server = tls.server_context(certs["cert"], certs["key"], certs["ca"])
    with pytest.raises(ssl.SSLCertVerificationError):  # the server is not from the pinned CA
        await _handshake(server, tls.client_context(certs["foreign_ca"]))


async def test_client_cert_from_a_foreign_ca_never_reaches_the_server(certs: dict[str, Path]) -> None:
    server = tls.server_context(certs["cert"], certs["key"], certs["ca"])
    client = tls.client_context(certs["ca"], certs["foreign"], certs["foreign_key"])
    connected = asyncio.Event()

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()
        writer.close()

    srv = await asyncio.start_server(on_conn, "127.0.0.1", 0, ssl=server)
    port = srv.sockets[0].getsockname()[1]
    try:
        # TLS 1.3: the client finishes its side first; the server's "unknown ca" alert arrives
        # on the first read
        reader, w = await asyncio.open_connection("127.0.0.1", port, ssl=client)
        try:
            async with asyncio.timeout(5):
                data = await reader.read()
        except (ssl.SSLError, ConnectionError):
            data = b""
        assert data == b""  # closed (or an alert) without a byte of application data
        w.close()
        assert not connected.is_set()
    finally:
        srv.close()
        await srv.wait_closed()


def test_passphrase_protected_key_is_refused_not_prompted(tmp_path: Path, certs: dict[str, Path]) -> None:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(certs["key"].read_bytes(), password=None)
    locked = tmp_path / "locked-key.pem"
    locked.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    ))
    with pytest.raises(tls.TlsError, match=r"--tls-key .*locked-key\.pem: the key is passphrase-protected"):
        tls.server_context(certs["cert"], locked)
