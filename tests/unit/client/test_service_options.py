"""The options every framework service shares (``frameworks.client.options``): both bundled
services take the same master/TLS/auth options, bad combinations are usage errors, and an expected
start failure is one line, not a traceback."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from frameworks.batch.__main__ import main as batch_main
from frameworks.client.options import (
    MasterRefused,
    ServiceConnection,
    advertised_host,
    connection_options,
    stop_refused,
)
from frameworks.elastic.__main__ import main as elastic_main
from protocol.authn import basic_header, bearer_header
from protocol.lifecycle import Service

NO_AUTH_ENV: dict[str, str | None] = {"AGORA_PRINCIPAL": None, "AGORA_SECRET": None, "AGORA_TOKEN": None}
SHARED = {"--master", "--ca", "--tls-cert", "--tls-key", "--principal", "--secret", "--token", "--agent-http-credential",
          "--advertise-ip", "--credentials", "--acls"}


def _flags(cmd: click.Command) -> set[str]:
    return {o for p in cmd.params for o in p.opts}


def test_batch_and_elastic_take_the_same_connection_options() -> None:
    assert _flags(batch_main) >= SHARED
    assert _flags(elastic_main) >= SHARED


def test_the_options_reach_the_service_as_keyword_arguments() -> None:
    seen: list[ServiceConnection] = []

    @click.command()
    @connection_options("10.0.0.1:5050")
    @click.option("--port", default=1)
    def cmd(conn: ServiceConnection, port: int) -> None:
        seen.append(conn)

    env = {"AGORA_PRINCIPAL": "batch", "AGORA_SECRET": "s3cret"}
    result = CliRunner().invoke(cmd, ["--ca", "ca.pem", "--tls-cert", "c.pem", "--tls-key", "k.pem"], env=env)
    assert result.exit_code == 0, result.output
    (conn,) = seen
    assert conn.master == "10.0.0.1:5050"
    assert conn.service_kwargs() == {
        "ca": "ca.pem", "tls_cert": "c.pem", "tls_key": "k.pem", "principal": "batch", "secret": "s3cret", "token": None,
        "agent_http_credential": None, "credentials": None, "acls": None,
    }


@pytest.mark.parametrize(
    ("text", "header"),
    [
        ('{"principal": "batch-logs", "secret": "s"}', basic_header("batch-logs", "s")),
        ('{"principal": "batch-logs", "token": "t0k"}', bearer_header("t0k")),
        ("batch-logs s\n", basic_header("batch-logs", "s")),
    ],
)
def test_the_agent_http_credential_is_the_masters_format(tmp_path: Path, text: str, header: str) -> None:
    """--agent-http-credential FILE: what a service presents to agents run with --authenticate-http
    when it reads task logs (the master's option of that name, the agent's --credential format)."""
    (tmp_path / "cred").write_text(text)
    seen: list[ServiceConnection] = []

    @click.command()
    @connection_options()
    def cmd(conn: ServiceConnection) -> None:
        seen.append(conn)

    result = CliRunner().invoke(cmd, ["--agent-http-credential", str(tmp_path / "cred")], env=NO_AUTH_ENV)
    assert result.exit_code == 0, result.output
    (conn,) = seen
    assert conn.service_kwargs()["agent_http_credential"] == str(tmp_path / "cred")
    assert conn.agent_headers() == {"Authorization": header}
    assert ServiceConnection("m:5050").agent_headers() == {}


@pytest.mark.parametrize("service", [batch_main, elastic_main], ids=["batch", "elastic"])
def test_an_unusable_agent_credential_is_a_usage_error(service: click.Command, tmp_path: Path) -> None:
    (tmp_path / "bad").write_text("{not json")
    for path, message in ((tmp_path / "bad", "bad --agent-http-credential"),
                          (tmp_path / "missing", "cannot read --agent-http-credential")):
        result = CliRunner().invoke(service, ["--agent-http-credential", str(path)], env=NO_AUTH_ENV)
        assert result.exit_code == 2 and message in result.output, result.output


def test_a_wildcard_bind_advertises_a_name() -> None:
    assert advertised_host("0.0.0.0") == socket.gethostname() == advertised_host("::")
    assert advertised_host("0.0.0.0", "batch.example") == "batch.example"
    assert advertised_host("10.0.0.3") == "10.0.0.3"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tls-cert", "c.pem"], "--tls-cert and --tls-key go together"),
        (["--tls-key", "k.pem"], "--tls-cert and --tls-key go together"),
        (["--secret", "s"], "--secret needs --principal"),
        (["--master", "zk://127.0.0.1:2181"], "zk:// URL needs hosts and a path"),
        (["--master", "http://"], "bad master address"),
    ],
)
@pytest.mark.parametrize("service", [batch_main, elastic_main], ids=["batch", "elastic"])
def test_bad_combinations_are_usage_errors(service: click.Command, args: list[str], message: str) -> None:
    result = CliRunner().invoke(service, args, env=NO_AUTH_ENV)
    assert result.exit_code == 2
    assert message in result.output


def test_a_zk_master_is_accepted() -> None:
    conn = ServiceConnection("zk://127.0.0.1:2181,127.0.0.2:2181/agora")
    assert conn.master.startswith("zk://")


@pytest.mark.parametrize(("service", "label"), [(batch_main, "agora-batch"), (elastic_main, "agora-elastic")])
def test_an_unusable_ca_is_one_line_not_a_traceback(service: click.Command, label: str, tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n")
    result = CliRunner().invoke(
        service, ["--ca", str(bad), "--port", "0", "--work-dir", str(tmp_path / "work")],
        env=NO_AUTH_ENV,
    )
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"Error: {label}: ") and "ca.pem" in result.output
    assert result.exception is not None and isinstance(result.exception, SystemExit)


def _conn_of(args: list[str], env: dict[str, str | None]) -> ServiceConnection | str:
    seen: list[ServiceConnection] = []

    @click.command()
    @connection_options()
    def cmd(conn: ServiceConnection) -> None:
        seen.append(conn)

    result = CliRunner().invoke(cmd, args, env={**NO_AUTH_ENV, **env})
    return seen[0] if seen else result.output


def test_a_secret_given_wins_over_the_exported_operator_token() -> None:
    """``agora up --auth`` says ``export AGORA_TOKEN=<operator token>`` for the CLI; a service then
    started with its own principal and secret must not present the operator's token (the master
    would refuse a principal that is not FrameworkInfo.principal)."""
    conn = _conn_of(["--principal", "mybatch", "--secret", "s"], {"AGORA_TOKEN": "operator-token"})
    assert isinstance(conn, ServiceConnection)
    assert (conn.principal, conn.secret, conn.token) == ("mybatch", "s", None)
    conn = _conn_of(["--principal", "mybatch", "--token", "fw-token"], {"AGORA_SECRET": "old"})
    assert isinstance(conn, ServiceConnection) and (conn.secret, conn.token) == (None, "fw-token")
    out = _conn_of(["--principal", "p", "--secret", "s", "--token", "t"], {})
    assert isinstance(out, str) and "give --secret or --token, not both" in out
    out = _conn_of([], {"AGORA_PRINCIPAL": "p", "AGORA_SECRET": "s", "AGORA_TOKEN": "t"})
    assert isinstance(out, str) and "give --secret or --token, not both" in out


def test_the_transport_carries_the_masters_credential() -> None:
    """What the scheduler calls send is what other reads of the master (batch's ``/state``) send."""
    conn = ServiceConnection.of("127.0.0.1:5050", principal="batch", secret="s")
    assert conn.transport(None).authorization == basic_header("batch", "s")
    conn = ServiceConnection.of("127.0.0.1:5050", principal="batch", token="t0k")
    assert conn.transport(None).authorization == bearer_header("t0k")
    assert ServiceConnection.of("127.0.0.1:5050").transport(None).authorization is None


@pytest.mark.parametrize("service", [batch_main, elastic_main])
def test_the_service_speaks_with_its_name(service: click.Command, tmp_path: Path) -> None:
    """``--name batch-ml``: its lines (``batch-ml listening on ...``, errors) carry that name,
    not the default ``agora-batch``."""
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n")
    result = CliRunner().invoke(
        service, ["--name", "batch-ml", "--ca", str(bad), "--port", "0", "--work-dir", str(tmp_path / "work")],
        env=NO_AUTH_ENV,
    )
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: batch-ml: "), result.output


@pytest.mark.parametrize(
    ("message", "expect"),
    [
        ("subscription refused: HTTP 401: Unauthorized", "refused the subscription: HTTP 401: Unauthorized (check --principal"),
        ("subscription refused: HTTP 403: not authorized", "refused the subscription: HTTP 403: not authorized (the master's ACLs"),
        ("Framework has been removed", "ended the subscription: Framework has been removed"),
    ],
)
async def test_a_refused_or_ended_subscription_stops_the_service(message: str, expect: str) -> None:
    svc = Service()
    await svc.start()
    task = stop_refused(svc, message)
    assert task is not None and stop_refused(svc, "again") is None  # once
    await asyncio.wait_for(svc.wait_stopped(), 5)
    await task
    assert isinstance(svc.failed, MasterRefused) and expect in str(svc.failed)
