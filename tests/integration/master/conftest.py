from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from master.config import MasterConfig
from master.service import MasterService


def master_config(work_dir: Path, **kw: object) -> MasterConfig:
    base = dict(
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
    return MasterConfig(**base)  # type: ignore[arg-type]


@pytest.fixture
async def master(tmp_path: Path) -> AsyncIterator[MasterService]:
    svc = MasterService(master_config(tmp_path / "master"))
    await svc.start()
    try:
        yield svc
    finally:
        await svc.stop()
