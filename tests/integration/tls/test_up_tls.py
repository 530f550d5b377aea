"""``agora up --tls`` wiring (``start_cluster(tls=True)``): real master, agent and batch processes
with a throwaway CA; everything advertised is https, the agent registered with mTLS, the CLI
reaches the batch service through the master with the CA and only with it, and a job's stdout
comes back from the https agent."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from frameworks.cli import common
from frameworks.cli.common import REPO_ROOT, child_env
from frameworks.cli.up import start_cluster

pytestmark = pytest.mark.slow

AGORA = [sys.executable, "-c", "from frameworks.cli.main import main; main()"]


@pytest.fixture
def restore_ca() -> Iterator[None]:
    try:
        yield
    finally:
        common.set_ca(None)  # start_cluster(tls=True) pins its CA for this process' CLI calls


def agora(*args: str, ca: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in child_env().items() if k not in ("AGORA_CA", "AGORA_MASTER")}
    if ca is not None:
        env["AGORA_CA"] = str(ca)
    return subprocess.run([*AGORA, *args], capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=60)


def test_up_tls_wires_ca_master_agents_and_batch(tmp_path: Path, restore_ca: None) -> None:
    with start_cluster(1, tmp_path / "cluster", port=0, with_batch=True, with_elastic=False, tls=True,
                       resources="cpus:1;mem:256;disk:100", ready_timeout=60) as cluster:
        assert cluster.ca is not None and cluster.ca.exists()
        assert cluster.master_url.startswith("https://") and (cluster.batch_url or "").startswith("https://")
        master_log = (tmp_path / "cluster" / "logs" / "master.log").read_text()
        assert "listening on https://" in master_log
        res = agora("agents", "--json", "--master", cluster.master_url, ca=cluster.ca)
        assert res.returncode == 0, res.stderr
        assert [a["active"] for a in json.loads(res.stdout)] == [True]  # registered with its client cert
        res = agora("job", "--json", "--master", cluster.master_url, "list", ca=cluster.ca)
        assert res.returncode == 0, res.stderr  # found through the master's https webui_url
        assert json.loads(res.stdout)["jobs"] == []
        # a job's stdout travels agent (https, its URL from the offer) -> batch service -> CLI
        res = agora("job", "--master", cluster.master_url, "submit", "--cpus", "0.5", "--mem", "64", "--shell",
                    "--", "echo hello over tls", ca=cluster.ca)
        assert res.returncode == 0, res.stderr
        res = agora("job", "--master", cluster.master_url, "logs", res.stdout.split()[-1], "--follow",
                    ca=cluster.ca)
        assert res.returncode == 0 and "hello over tls" in res.stdout, res.stdout + res.stderr
        res = agora("agents", "--master", cluster.master_url)
        assert res.returncode != 0 and "TLS certificate is not trusted" in res.stderr


def test_up_tls_auth_gives_each_agent_a_certificate_naming_its_principal(tmp_path: Path, restore_ca: None) -> None:
    import sqlite3

    from frameworks.cli.authfiles import agent_principal

    try:
        with start_cluster(2, tmp_path / "c", port=0, with_batch=False, tls=True, auth=True,
                           resources="cpus:1;mem:256;disk:100", ready_timeout=60) as cluster:
            assert cluster.ca is not None and cluster.token is not None
            res = agora("agents", "--json", "--master", cluster.master_url, ca=cluster.ca)
            assert res.returncode != 0  # the operator token is needed too
        db = sqlite3.connect(str(tmp_path / "c" / "master" / "registry.sqlite3"))
        try:
            bound = sorted(p for (p,) in db.execute("SELECT principal FROM agent_principals"))
        finally:
            db.close()
        assert bound == [agent_principal(0), agent_principal(1)]  # each agent id bound to its own cert
    finally:
        common.set_token(None)
