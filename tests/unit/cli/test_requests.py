"""Every ``agora`` request goes one way (``common.open_url``): the bearer token, the cluster CA and
one error for an untrusted certificate, whichever command makes it -- the master's API, a framework
service (``elastic submit`` posts TOML), the operator event stream, an agent's sandbox."""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner

from frameworks.cli import task as tk
from frameworks.cli.certs import make_cluster_certs
from frameworks.cli.common import set_ca, set_token
from frameworks.cli.main import cli

from .stub_server import stub_server


@attrs.define
class Server:
    url: str
    requests: list[dict[str, Any]]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    requests: list[dict[str, Any]] = []

    def _answer(self, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        _Handler.requests.append({"method": "GET", "path": self.path, "auth": self.headers.get("Authorization")})
        self._answer(json.dumps({"data": "hello\n", "offset": 0}).encode())

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        _Handler.requests.append(
            {"method": "POST", "path": self.path, "auth": self.headers.get("Authorization"),
             "ctype": self.headers.get("Content-Type"), "body": body.decode(), "host": self.headers.get("Host")}
        )
        if self.path == "/api/v1":  # the operator API: SUBSCRIBE answers an empty stream
            self._answer(b"")
        else:
            self._answer(json.dumps({"id": 7}).encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(autouse=True)
def _clean_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for var in ("AGORA_CA", "AGORA_TOKEN", "AGORA_MASTER", "AGORA_ELASTIC"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AGORA_CONFIG", str(tmp_path / "none.toml"))
    yield
    set_ca(None)  # the CLI group keeps --ca/--token in module state
    set_token(None)


def _serve(context: ssl.SSLContext | None = None) -> Iterator[Server]:
    _Handler.requests = []
    with stub_server(_Handler, context) as addr:
        yield Server(f"{'https' if context else 'http'}://{addr}", _Handler.requests)


@pytest.fixture
def server() -> Iterator[Server]:
    yield from _serve()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return make_cluster_certs(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def tls_server(certs: Any) -> Iterator[Server]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(certs.master_cert), str(certs.master_key))
    yield from _serve(ctx)


def test_elastic_submit_presents_the_token_like_every_other_command(server: Server, tmp_path: Path) -> None:
    spec = tmp_path / "job.toml"
    spec.write_text('name = "x"\n')
    res = CliRunner().invoke(cli, ["--token", "T0K", "elastic", "--elastic", server.url, "submit", str(spec)])
    assert res.exit_code == 0, res.output
    (req,) = server.requests
    assert req["ctype"] == "application/toml" and req["auth"] == "Bearer T0K"


def test_events_presents_the_token(server: Server) -> None:
    res = CliRunner().invoke(cli, ["--token", "T0K", "events", "--master", server.url])
    assert "closed the event stream" in res.output  # the canned stream is empty
    assert [r["auth"] for r in server.requests] == ["Bearer T0K"]


def test_the_agent_files_read_presents_the_token(server: Server) -> None:
    set_token("T0K")
    assert tk.files_read(server.url, "f/t/stdout", 0) == ("hello\n", 0)
    assert server.requests[0]["auth"] == "Bearer T0K"


@pytest.mark.parametrize(
    "args",
    [["events"], ["agents"], ["task", "show", "t1"]],
    ids=["events", "agents", "task"],
)
def test_an_untrusted_master_certificate_says_to_give_the_ca(tls_server: Server, args: list[str]) -> None:
    res = CliRunner().invoke(cli, [*args, "--master", tls_server.url])
    assert res.exit_code == 1
    assert "its TLS certificate is not trusted" in res.output
    assert "give the cluster CA with --ca FILE or AGORA_CA" in res.output


def test_events_reach_an_https_master_with_the_ca(tls_server: Server, certs: Any) -> None:
    res = CliRunner().invoke(cli, ["--ca", str(certs.ca), "events", "--master", tls_server.url.removeprefix("https://")])
    assert "closed the event stream" in res.output  # reached it, over https (host:port + CA)
    assert [r["path"] for r in tls_server.requests] == ["/api/v1"]


def test_the_agent_scheme_comes_from_its_capabilities_not_from_the_cli_ca() -> None:
    """A cluster whose master is https (the CLI has a CA) may run plaintext agents, and an agent with
    ``--tls-cert`` says ``HTTPS``: the CLI builds what the master's offers and web UI build."""
    set_ca("/some/ca.pem")
    state = {
        "slaves": [
            {"id": "plain", "hostname": "h0", "port": 5051, "capabilities": ["MULTI_ROLE"]},
            {"id": "tls", "hostname": "h1", "port": 5051, "capabilities": ["HTTPS"]},
            {"id": "old", "hostname": "h2", "port": 5051},
        ]
    }
    assert tk.agent_url(state, "plain") == "http://h0:5051"
    assert tk.agent_url(state, "tls") == "https://h1:5051"
    assert tk.agent_url(state, "old") == "http://h2:5051"


class _Standby(BaseHTTPRequestHandler):
    """A standby master: every call gets Mesos' 307 to the leader (scheme-relative)."""

    protocol_version = "HTTP/1.0"
    leader = ""

    def _redirect(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(307)
        self.send_header("Location", f"//{_Standby.leader}{self.path}")
        self.end_headers()

    do_GET = do_POST = _redirect

    def log_message(self, *args: object) -> None:
        pass


def test_a_post_to_a_standby_master_is_re_sent_to_the_leader(server: Server) -> None:
    """urllib follows a 307 only for GET; ``agora events`` (and drain, submit...) POST to a
    standby's address must reach the leader with the same body and token."""
    _Standby.leader = server.url.removeprefix("http://")
    with stub_server(_Standby) as standby:
        res = CliRunner().invoke(cli, ["--token", "T0K", "events", "--master", standby])
        assert "closed the event stream" in res.output  # the leader's (empty) stream was read
        res = CliRunner().invoke(cli, ["agents", "--master", standby, "--json"])  # a GET, urllib's own
    post, get, usage = server.requests
    assert (post["method"], post["path"], post["auth"], json.loads(post["body"])) == (
        "POST", "/api/v1", "Bearer T0K", {"type": "SUBSCRIBE"}
    )
    assert post["host"] == _Standby.leader  # not the standby's Host header carried over
    assert (get["method"], get["path"]) == ("GET", "/state")
    # agents' revocable use (GET_AGENTS), a POST too
    assert (usage["method"], usage["path"], json.loads(usage["body"])) == ("POST", "/api/v1", {"type": "GET_AGENTS"})


class _Cluster(BaseHTTPRequestHandler):
    """A master's ``/state`` (task t1 running for two reads, then finished) and its agent's
    ``/files/read`` (one line of stdout), on one port."""

    protocol_version = "HTTP/1.0"
    port = 0
    state_reads = 0

    def do_GET(self) -> None:
        if self.path.startswith("/state"):
            _Cluster.state_reads += 1
            state = "TASK_RUNNING" if _Cluster.state_reads <= 2 else "TASK_FINISHED"
            task = {"id": "t1", "state": state, "slave_id": "A1", "framework_id": "F1"}
            body = {"slaves": [{"id": "A1", "hostname": "127.0.0.1", "port": _Cluster.port}],
                    "frameworks": [{"id": "F1", "name": "fw", "tasks": [task], "completed_tasks": []}]}
        else:
            offset = int(self.path.split("offset=")[1].split("&")[0])
            body = {"data": "hello\n" if offset == 0 else "", "offset": offset}
        raw = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        pass


def test_following_a_task_of_a_zk_master_asks_zookeeper_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``task logs -f`` polls the master until the task ends; a zk:// master is resolved once per
    command (as ``job`` does), not with a ZooKeeper session every poll."""
    import protocol.detector

    lookups: list[str] = []
    monkeypatch.setattr(tk, "POLL", 0.01)
    with stub_server(_Cluster) as addr:
        _Cluster.port, _Cluster.state_reads = int(addr.rsplit(":", 1)[1]), 0

        def resolve_once(url: str, timeout: float = 10.0) -> str:
            lookups.append(url)
            return addr

        monkeypatch.setattr(protocol.detector, "resolve_once", resolve_once)
        res = CliRunner().invoke(cli, ["task", "logs", "t1", "-f", "--master", "zk://127.0.0.1:2181/agora"])
    assert res.exit_code == 0, res.output
    assert res.output == "hello\n"
    assert _Cluster.state_reads >= 3  # it polled until the task ended
    assert lookups == ["zk://127.0.0.1:2181/agora"]
