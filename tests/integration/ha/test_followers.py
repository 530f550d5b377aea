"""Followers against a real ZooKeeper: the shared resolver waits for a leader (none yet: a
timeout, not a hang) and the CLI turns a ``zk://`` master into the leader's URL."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from frameworks.cli.common import CliError, master_url
from protocol.detector import MasterResolver

from .cluster import detector, masters


async def test_no_leader_yet_is_a_timeout_then_the_leader_is_found(zk_url: str, tmp_path: Path) -> None:
    r = MasterResolver(zk_url, session_timeout=5.0)
    try:
        with pytest.raises(TimeoutError):
            await r.resolve(within=0.3)
        with pytest.raises(CliError, match="no leading master"):
            await asyncio.to_thread(master_url, zk_url)
        async with masters(zk_url, tmp_path, 1) as (m,), detector(zk_url) as det:
            assert await det.leader(within=20) == m.address
            assert await r.resolve(within=10) == m.address
            assert await asyncio.to_thread(master_url, zk_url) == f"http://{m.address}"
    finally:
        await r.close()
