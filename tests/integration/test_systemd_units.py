"""The unit files and config files shipped in ``scripts/systemd/``: ``systemd-analyze verify``
accepts every unit with no warning (the ExecStart paths pointed at this checkout's virtualenv,
as an install into /opt/agora/.venv has them), the agent's unit delegates its cgroup and stops
only the agent, and each shipped config file is read by the real command it is for into the
settings it says (a key that is not a flag would stop the start)."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.main import config_from
from agent.main import main as agent_main
from frameworks.batch.__main__ import load_config
from frameworks.batch.__main__ import main as batch_main
from frameworks.elastic.__main__ import main as elastic_main
from master.config import load as master_load

UNITS = Path(__file__).resolve().parents[2] / "scripts" / "systemd"
NAMES = ("agora-master", "agora-agent", "agora-batch", "agora-elastic")


def unit(name: str) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.optionxform = str  # type: ignore[assignment,method-assign]
    cp.read_string((UNITS / f"{name}.service").read_text())
    return cp


def test_systemd_analyze_verifies_every_unit(tmp_path: Path) -> None:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed here (scripts/install-systemd-analyze installs it)")
    venv = Path(sys.prefix)
    for name in NAMES:
        text = (UNITS / f"{name}.service").read_text().replace("/opt/agora/.venv", str(venv))
        (tmp_path / f"{name}.service").write_text(text)
    r = subprocess.run([tool, "verify", *(str(tmp_path / f"{n}.service") for n in NAMES)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert [ln for ln in r.stderr.splitlines() if ".service" in ln] == []  # no unknown key, no bad value


def test_the_agent_unit_delegates_its_cgroup_and_stops_only_the_agent() -> None:
    svc = unit("agora-agent")["Service"]
    assert svc["Delegate"] == "yes" and svc["KillMode"] == "process" and svc["KillSignal"] == "SIGTERM"
    assert svc["User"] == "root"
    for name in NAMES:
        s = unit(name)["Service"]
        config = f"/etc/agora/{name.removeprefix('agora-')}.toml"
        assert s["ExecStart"].endswith(f"--config {config}"), name
        assert (UNITS / Path(config).name).is_file(), name
        assert s["Restart"] == "always", name
        assert unit(name)["Install"]["WantedBy"] == "multi-user.target"


def test_the_shipped_config_files_are_read_by_their_commands() -> None:
    m = master_load(UNITS / "master.toml")
    assert (m.ip, m.port, m.work_dir) == ("10.0.0.1", 5050, "/var/lib/agora/master")

    ctx = agent_main.make_context("agora-agent", ["--config", str(UNITS / "agent.toml")])
    a = config_from(dict(ctx.params))
    assert (a.master, a.host, a.port, str(a.work_dir)) == ("10.0.0.1:5050", "10.0.0.2", 5051, "/var/lib/agora/agent")
    assert (a.isolation, a.pids_max, a.log_max_size, a.log_max_files) == ("auto", 4096, 10 << 20, 5)
    assert (a.gc_delay, a.gc_disk_headroom, a.work_dir_reserve, a.enforce_disk_limit) == (86400.0, 0.1, 64 << 20, True)
    ctx = agent_main.make_context("agora-agent", ["--config", str(UNITS / "agent.toml"), "--host", "10.0.0.3"])
    assert config_from(dict(ctx.params)).host == "10.0.0.3"  # the third machine: one flag in its unit

    ctx = batch_main.make_context("batch", ["--config", str(UNITS / "batch.toml")])
    assert (ctx.params["host"], ctx.params["port"], str(ctx.params["work_dir"])) == ("10.0.0.1", 5052, "/var/lib/agora/batch")
    assert ctx.params["log_tail"] == 64 * 1024
    b = load_config(UNITS / "batch.toml")
    assert b.users.default_os_user == "nobody" and b.retention_days == 90

    ctx = elastic_main.make_context("elastic", ["--config", str(UNITS / "elastic.toml")])
    assert (ctx.params["host"], ctx.params["advertise"], ctx.params["port"]) == ("10.0.0.1", "10.0.0.1", 5053)
