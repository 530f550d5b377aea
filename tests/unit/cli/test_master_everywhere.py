"""``--master`` is accepted on every command that talks to a master, both as the group's option
(``agora job --master X list``) and as the subcommand's (``agora job list --master X``), the
innermost winning; checked on the help of every command and against a canned master whose
``/state`` names the batch and elastic services (tests/unit/cli/stub_server.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from frameworks.cli.common import free_port
from frameworks.cli.main import COMMANDS, cli

from .stub_server import stub_server

NO_MASTER = {"up", "config"}  # up starts a master (--port); config only writes the settings file


class _Stub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    addr = ""

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, data: Any) -> None:
        body = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/state"):
            url = f"http://{_Stub.addr}"
            self._answer({"slaves": [], "frameworks": [
                {"id": "fb", "name": "agora-batch", "webui_url": url, "active": True, "tasks": []},
                {"id": "fe", "name": "agora-elastic", "webui_url": url, "active": True, "tasks": []},
            ]})
        elif self.path.startswith("/api/v1/jobs"):
            self._answer({"jobs": []})
        elif self.path.startswith("/api/v1/offers"):
            self._answer({"offers": []})
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._answer({"type": "GET_AGENTS", "get_agents": {"agents": []}})


@pytest.fixture
def master(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("AGORA_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("AGORA_MASTER", f"127.0.0.1:{free_port()}")  # nothing there: only --master works
    for var in ("AGORA_BATCH", "AGORA_ELASTIC"):
        monkeypatch.delenv(var, raising=False)
    with stub_server(_Stub) as addr:
        _Stub.addr = addr
        yield addr


def _agora(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _commands() -> list[tuple[str, ...]]:
    """Every command path, groups and their subcommands (``("job",)``, ``("job", "list")``...)."""
    ctx = click.Context(cli)
    out: list[tuple[str, ...]] = []
    for name in sorted(set(COMMANDS) - NO_MASTER):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        out.append((name,))
        if isinstance(cmd, click.Group):
            out += [(name, sub) for sub in cmd.list_commands(ctx)]
    return out


@pytest.mark.parametrize("path", _commands(), ids=" ".join)
def test_every_command_and_group_takes_master(path: tuple[str, ...]) -> None:
    r = _agora(*path, "--help")
    assert r.exit_code == 0, r.output
    assert "--master" in r.output and "zk://" in r.output, path


@pytest.mark.parametrize(
    "group, sub, rows",
    [("job", "list", "ID"), ("elastic", "list", "ID"), ("agent", "list", "Agents"), ("task", "list", "Tasks")],
)
def test_master_works_before_and_after_the_subcommand(master: str, group: str, sub: str, rows: str) -> None:
    for argv in ((group, "--master", master, sub), (group, sub, "--master", master)):
        r = _agora(*argv)
        assert r.exit_code == 0, (argv, r.output)
        assert rows in r.output, (argv, r.output)
    # the innermost wins: the subcommand's good address over the group's dead one
    dead = f"127.0.0.1:{free_port()}"
    r = _agora(group, "--master", dead, sub, "--master", master)
    assert r.exit_code == 0, r.output
    r = _agora(group, "--master", master, sub, "--master", dead)
    assert r.exit_code == 1 and f"cannot reach the master at http://{dead}" in r.output


@pytest.mark.parametrize("cmd", ["agents", "frameworks", "tasks", "offers"])
def test_cluster_views_take_master(master: str, cmd: str) -> None:
    r = _agora(cmd, "--master", master, "--json")
    assert r.exit_code == 0, r.output
    assert isinstance(json.loads(r.output), list)


def _all_commands() -> list[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(cli)
    out: list[tuple[tuple[str, ...], click.Command]] = []
    for name in sorted(COMMANDS):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        out.append(((name,), cmd))
        if isinstance(cmd, click.Group):
            for sub in cmd.list_commands(ctx):
                sc = cmd.get_command(ctx, sub)
                assert sc is not None
                out.append(((name, sub), sc))
    return out


def test_every_option_has_help_and_no_help_shows_rst_quotes() -> None:
    for path, cmd in _all_commands():
        text = _agora(*path, "--help").output
        assert "``" not in text, (path, text)
        bare = [p.opts[0] for p in cmd.params if isinstance(p, click.Option) and not p.hidden and not p.help]
        assert not bare, (path, bare)
