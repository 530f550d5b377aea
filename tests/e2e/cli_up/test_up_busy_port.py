"""`agora up` on a port another master already holds: it fails at once, names the port and
``--port 0``, starts nothing of its own, and registers nothing with the other master (real
``agora-master`` processes on loopback)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from frameworks.cli import up
from frameworks.cli.common import (
    REPO_ROOT,
    CliError,
    ManagedProcess,
    child_env,
    command_for,
    free_port,
    master_state,
    start_process,
    stop_process,
    wait_until,
)

pytestmark = pytest.mark.slow

AGORA = [sys.executable, "-c", "from frameworks.cli.main import main; main()"]


@pytest.fixture
def other_master(tmp_path: Path) -> Iterator[tuple[int, ManagedProcess]]:
    """Someone else's master, already serving on a port."""
    port = free_port()
    proc = start_process(
        "other-master",
        [*command_for("agora-master", "master.main"), "--ip", "127.0.0.1", "--port", str(port),
         "--work-dir", str(tmp_path / "other")],
        log_path=tmp_path / "other.log",
    )
    try:
        wait_until(lambda: bool(master_state(f"http://127.0.0.1:{port}")), 60, "the other master", procs=[proc])
        yield port, proc
    finally:
        stop_process(proc)


def _nothing_registered(port: int) -> None:
    state = master_state(f"http://127.0.0.1:{port}")
    assert state["slaves"] == [] and state["frameworks"] == []


def test_up_on_a_busy_port_fails_at_once_naming_the_port(
    other_master: tuple[int, ManagedProcess], tmp_path: Path
) -> None:
    port, proc = other_master
    res = subprocess.run(
        [*AGORA, "up", "--agents", "1", "--port", str(port), "--work-dir", str(tmp_path / "mine"),
         "--resources", "cpus:1;mem:256;disk:1024"],
        capture_output=True, text=True, env=child_env(), cwd=REPO_ROOT, timeout=60,
    )
    assert res.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in res.stderr
    assert "--port 0" in res.stderr
    assert "Agora is up" not in res.stdout and "Traceback" not in res.stderr
    assert not (tmp_path / "mine").exists()  # nothing of its own was started
    _nothing_registered(port)
    assert proc.alive()


def test_a_master_that_answers_for_another_is_refused(
    other_master: tuple[int, ManagedProcess], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The port looked free when checked, but another master took it first (a race): the master
    answering is not the one started, so up stops before any agent or framework starts."""
    port, _ = other_master
    monkeypatch.setattr(up, "port_free", lambda _host, _port: True)
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(CliError) as err:
        up.start_cluster(1, tmp_path / "mine", port, resources="cpus:1;mem:256;disk:1024", ready_timeout=60)
    assert f"port {port}" in str(err.value) and "--port 0" in str(err.value)
    assert not (tmp_path / "mine" / "logs" / "agent-0.log").exists()  # no agent was started
    _nothing_registered(port)
    left = {p.pid for p in psutil.Process().children(recursive=True)} - children_before
    assert not left  # our own master is gone again


def test_port_free_sees_a_listening_socket(other_master: tuple[int, ManagedProcess]) -> None:
    port, proc = other_master
    assert not up.port_free("127.0.0.1", port)
    assert up.listens_on(proc.pid, port)
    assert up.port_free("127.0.0.1", free_port())
