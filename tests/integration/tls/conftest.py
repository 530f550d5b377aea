"""A TLS cluster on loopback: a throwaway CA (``frameworks/cli/certs.py``), a master serving only
HTTPS/WSS with mTLS for agents, and helpers to start a real agent process against it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from frameworks.cli.certs import ClusterCerts, LocalCA, make_cluster_certs
from master.config import MasterConfig
from master.service import MasterService

from ..agent_process import agent_process as real_agent


@attrs.frozen
class Certs:
    cluster: ClusterCerts
    foreign_ca: Path  # a CA nobody in the cluster trusts
    foreign_cert: Path  # a client certificate it signed
    foreign_key: Path


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    d = tmp_path_factory.mktemp("tls")
    foreign = LocalCA.create("foreign CA")
    fc, fk = foreign.issue("intruder").write_pem(d / "foreign.pem", d / "foreign-key.pem")
    return Certs(make_cluster_certs(d), foreign.write_ca(d / "foreign-ca.pem"), fc, fk)


def tls_master_config(work_dir: Path, c: ClusterCerts, *, mtls: bool = True, **kw: Any) -> MasterConfig:
    base = MasterConfig(
        ip="127.0.0.1", port=0, work_dir=str(work_dir), heartbeat_interval=1.0, ping_interval=0.5,
        ping_timeout=5.0, agent_reregister_timeout=5.0, read_timeout=0.5,
        tls_cert=str(c.master_cert), tls_key=str(c.master_key),
        tls_ca=str(c.ca) if mtls else None, tls_require_client_cert=mtls,
    )
    return attrs.evolve(base, **kw)


@pytest.fixture
async def master(tmp_path: Path, certs: Certs) -> AsyncIterator[MasterService]:
    svc = MasterService(tls_master_config(tmp_path / "master", certs.cluster))
    await svc.start()
    try:
        yield svc
    finally:
        await svc.stop()


@contextlib.asynccontextmanager
async def agent_process(master: MasterService, work: Path, *tls_args: str) -> AsyncIterator[str]:
    """A real ``agora-agent`` process (``tests/integration/agent_process.py``) against the TLS
    master; yields the URL it prints (``https://`` with ``--tls-cert``)."""
    async with real_agent(
        master.url, work, "--default-grace", "0.5", *tls_args, resources="cpus:2;mem:512;disk:100"
    ) as url:
        yield url


def agent_tls_args(c: ClusterCerts) -> tuple[str, ...]:
    return ("--master-ca", str(c.ca), "--tls-cert", str(c.agent_cert), "--tls-key", str(c.agent_key))


async def run_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``agora ARGS`` as a process (the master runs in this test's event loop, which keeps serving)."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("AGORA_CA", "AGORA_MASTER")}
    full_env.update(env or {})
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from frameworks.cli.main import main; main()", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=full_env,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
