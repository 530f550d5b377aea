"""One way to run a real master and agent in-process for integration tests.

``master_config(work_dir, **kw)`` is a loopback master configuration (port 0, quick heartbeats and
pings so a lost peer is noticed within seconds), ``agent_config(master, work_dir, **kw)`` an agent
registered with it. ``running_master`` and ``running_cluster`` start them and stop them on exit,
agent first, whatever the test did. Keyword arguments override any field, so a test states only
what it is about (credentials, an estimator, GPUs).

Agents as separate processes (kill -9, restarts) are ``tests.integration.agent_process``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agent.config import AgentConfig
from agent.service import AgentService
from master.config import MasterConfig
from master.service import MasterService

AGENT_RESOURCES = "cpus:2;mem:1024;disk:1000"


def master_config(work_dir: Path, **kw: Any) -> MasterConfig:
    base: dict[str, Any] = dict(
        ip="127.0.0.1",
        port=0,
        work_dir=str(work_dir),
        heartbeat_interval=1.0,
        ping_interval=0.5,
        ping_timeout=5.0,
        agent_reregister_timeout=5.0,
        read_timeout=5.0,
    )
    base.update(kw)
    return MasterConfig(**base)


def agent_config(master: MasterService, work_dir: Path, **kw: Any) -> AgentConfig:
    base: dict[str, Any] = dict(
        master=f"127.0.0.1:{master.port}", work_dir=work_dir, resources=AGENT_RESOURCES, default_grace=0.5
    )
    base.update(kw)
    return AgentConfig(**base)


@contextlib.asynccontextmanager
async def running_master(work_dir: Path, **kw: Any) -> AsyncIterator[MasterService]:
    master = MasterService(master_config(work_dir, **kw))
    await master.start()
    try:
        yield master
    finally:
        await master.stop()


@contextlib.asynccontextmanager
async def running_cluster(
    tmp_path: Path, *, master: dict[str, Any] | None = None, agent: dict[str, Any] | None = None
) -> AsyncIterator[tuple[MasterService, AgentService]]:
    """A master under ``tmp_path/master`` and one agent under ``tmp_path/agent``; ``master`` and
    ``agent`` override their configuration fields."""
    async with running_master(tmp_path / "master", **(master or {})) as m:
        a = AgentService(agent_config(m, tmp_path / "agent", **(agent or {})))
        await a.start()
        try:
            yield m, a
        finally:
            await a.stop()
