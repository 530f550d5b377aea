"""`agora up` end to end: real master, agents (and the batch framework when present) as
processes; `agora agents --json` lists them; Ctrl-C (SIGINT) stops everything, no orphans."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from frameworks.cli.common import REPO_ROOT, child_env, free_port, wait_until

pytestmark = pytest.mark.slow

AGORA = [sys.executable, "-c", "from frameworks.cli.main import main; main()"]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_up_lists_agents_and_ctrl_c_stops_everything(tmp_path: Path) -> None:
    port = free_port()
    out = tmp_path / "up.out"
    with open(out, "wb") as sink:
        up = subprocess.Popen(
            [
                *AGORA,
                "up",
                "--agents",
                "2",
                "--port",
                str(port),
                "--work-dir",
                str(tmp_path / "cluster"),
                "--resources",
                "cpus:1;mem:512;disk:1024",
                "--timeout",
                "90",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=child_env(),
            cwd=REPO_ROOT,
        )
    pids: set[int] = set()
    try:
        wait_until(
            lambda: "Agora is up" in out.read_text(), 100, "agora up to report the cluster up", interval=0.1
        )
        assert up.poll() is None, out.read_text()
        pids = {c.pid for c in psutil.Process(up.pid).children(recursive=True)}
        assert len(pids) >= 3  # master + 2 agents (+ batch, + task processes)

        res = subprocess.run(
            [*AGORA, "agents", "--json", "--master", f"127.0.0.1:{port}"],
            capture_output=True,
            env=child_env(),
            cwd=REPO_ROOT,
            timeout=60,
        )
        assert res.returncode == 0, res.stderr.decode()
        agents = json.loads(res.stdout)
        assert len(agents) == 2 and all(a["active"] for a in agents)
        assert all(a["resources"]["cpus"] == 1 for a in agents)

        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=60) == 0, out.read_text()
        text = out.read_text()
        assert "stopped." in text and "Traceback" not in text
        left = [p for p in pids if _alive(p)]
        assert not left, f"processes left behind: {left}"
    finally:
        if up.poll() is None:
            try:
                pids |= {c.pid for c in psutil.Process(up.pid).children(recursive=True)}
            except psutil.NoSuchProcess:
                pass
            up.send_signal(signal.SIGINT)
            try:
                up.wait(30)
            except subprocess.TimeoutExpired:
                up.kill()
                up.wait(10)
        for p in pids:
            if _alive(p):
                psutil.Process(p).kill()
