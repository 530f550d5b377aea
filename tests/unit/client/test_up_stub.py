"""`agora up`'s process orchestration with stub master/agent processes (no real cluster): start,
wait until every agent is listed in /state, stop everything; failures stop what was started."""

from __future__ import annotations

import sys
from pathlib import Path

import psutil
import pytest

from frameworks.cli import up
from frameworks.cli.common import CliError, free_port

STUB = r'''
import http.server, json, os, signal, sys, time
role = sys.argv[1]
args = dict(zip(sys.argv[2::2], sys.argv[3::2]))
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
if role == "master":
    reg = os.path.join(args["--work-dir"], "agents")
    os.makedirs(reg, exist_ok=True)
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"slaves": [{"id": n, "active": True} for n in sorted(os.listdir(reg))],
                               "frameworks": [], "flags": {"work_dir": args["--work-dir"]}}).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body)
        def log_message(self, *a): pass
    http.server.HTTPServer(("127.0.0.1", int(args["--port"])), H).serve_forever()
elif role == "agent":
    wd = args["--work-dir"]
    if "crash" in args.get("--resources", ""):
        sys.exit(7)
    reg = os.path.join(os.path.dirname(wd), "master", "agents")
    while not os.path.isdir(reg):
        time.sleep(0.01)
    open(os.path.join(reg, os.path.basename(wd)), "w").close()
    time.sleep(600)
'''


@pytest.fixture
def stubbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stub = tmp_path / "stub.py"
    stub.write_text(STUB)

    def command_for(script: str, module: str) -> list[str]:
        return [sys.executable, str(stub), "master" if "master" in script else "agent"]

    monkeypatch.setattr(up, "command_for", command_for)


def _gone(pids: list[int]) -> bool:
    return all(not psutil.pid_exists(p) or psutil.Process(p).status() == psutil.STATUS_ZOMBIE for p in pids)


def test_start_cluster_waits_for_agents_and_stops_cleanly(stubbed: None, tmp_path: Path) -> None:
    lines: list[str] = []
    cluster = up.start_cluster(3, tmp_path / "c", port=free_port(), with_batch=False,
                               resources="cpus:1;mem:256", ready_timeout=30, echo=lines.append)
    pids = [p.pid for p in cluster.processes]
    try:
        assert len(pids) == 4 and not cluster.dead()
        assert cluster.master_url.startswith("http://127.0.0.1:")
        assert any(line.startswith("agent-2") for line in lines)
    finally:
        cluster.stop(grace=5)
    assert _gone(pids)


def test_failed_agent_stops_everything_with_a_clear_error(stubbed: None, tmp_path: Path) -> None:
    with pytest.raises(CliError, match="agent-0 exited with code 7"):
        up.start_cluster(1, tmp_path / "c", port=free_port(), with_batch=False, resources="cpus:1;crash:1",
                         ready_timeout=30)
    assert _ours(tmp_path) == []


def test_demo_hooks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import types

    calls: list[tuple[str, str | None]] = []
    ok = types.ModuleType("frameworks.batch.demo")

    def run_demo(master_url: str, batch_url: str | None, echo: object = print) -> bool:
        calls.append((master_url, batch_url))
        return True

    ok.run_demo = run_demo  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "frameworks.batch.demo", ok)
    monkeypatch.setitem(sys.modules, "frameworks.elastic.demo", None)  # not importable
    cluster = up.LocalCluster(master_url="http://m:1", work_dir=tmp_path, batch_url="http://b:2")
    out: list[str] = []
    assert up._run_demos(cluster, out.append)
    assert calls == [("http://m:1", "http://b:2")]

    bad = types.ModuleType("frameworks.batch.demo")
    bad.run_demo = lambda m, b: (_ for _ in ()).throw(RuntimeError("boom"))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "frameworks.batch.demo", bad)
    assert not up._run_demos(cluster, out.append)
    assert any("boom" in line for line in out)


def _ours(tmp_path: Path) -> list[str]:
    """The live processes this test started: descendants of this process whose command line names
    the test's directory (the stubs run ``tmp_path/stub.py`` with work dirs under it). Other
    children of the test process (clusters of other tests still stopping) are not this test's."""
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and str(tmp_path) in " ".join(p.cmdline()):
                out.append(f"{p.pid} {' '.join(p.cmdline())}")
        except psutil.Error:
            pass
    return out


def _interrupt_on_first_idle_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C as soon as `agora up` is idle (its first wait in the keep-running loop)."""
    import os
    import signal
    import types

    def sleep(_s: float) -> None:
        os.kill(os.getpid(), signal.SIGINT)

    import time

    monkeypatch.setattr(up, "time", types.SimpleNamespace(sleep=sleep, monotonic=time.monotonic))


def test_up_command_ctrl_c_stops_everything(stubbed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    _interrupt_on_first_idle_sleep(monkeypatch)
    res = CliRunner().invoke(
        up.up,
        ["--agents", "2", "--port", str(free_port()), "--work-dir", str(tmp_path / "c"), "--no-batch",
         "--no-elastic", "--resources", "cpus:1;mem:256"],
    )
    assert res.exit_code == 0, res.output
    assert "Agora is up: 2 agent(s) registered." in res.output and "stopped." in res.output
    assert _ours(tmp_path) == []


@pytest.mark.parametrize("succeeds", [True, False])
def test_up_demo_exit_code(stubbed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, succeeds: bool) -> None:
    import types

    from click.testing import CliRunner

    demo = types.ModuleType("frameworks.batch.demo")
    demo.run_demo = lambda master_url, batch_url: succeeds  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "frameworks.batch.demo", demo)
    monkeypatch.setitem(sys.modules, "frameworks.elastic.demo", None)
    res = CliRunner().invoke(
        up.up,
        ["--agents", "1", "--port", str(free_port()), "--work-dir", str(tmp_path / "c"), "--no-batch",
         "--no-elastic", "--resources", "cpus:1;mem:256", "--demo"],
    )
    assert res.exit_code == (0 if succeeds else 1), res.output
    assert _ours(tmp_path) == []


def test_bad_resources_are_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(CliError, match="bad --resources"):
        up.start_cluster(1, tmp_path / "c", port=free_port(), with_batch=False, resources="cpus:lots")
    assert _ours(tmp_path) == []


def test_master_and_agent_opts_are_passed_through(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from click.testing import CliRunner

    seen: dict[str, object] = {}

    def fake_start(*args: object, **kw: object) -> up.LocalCluster:
        seen.update(kw)
        raise CliError("stop here")

    monkeypatch.setattr(up, "start_cluster", fake_start)
    res = CliRunner().invoke(
        up.up,
        ["--work-dir", str(tmp_path), "--master-opt", "--heartbeat-interval 5",
         "--agent-opt", "--resource-estimator fixed --oversubscribed cpus:2"],
    )
    assert res.exit_code == 1 and "stop here" in res.output
    assert seen["master_args"] == ("--heartbeat-interval", "5")
    assert seen["agent_args"] == ("--resource-estimator", "fixed", "--oversubscribed", "cpus:2")
