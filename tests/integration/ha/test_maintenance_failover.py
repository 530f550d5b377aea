"""The maintenance schedule and the machine modes are registry state: with two ``agora-master``
processes in a real ZooKeeper, a schedule and a DOWN machine posted to the leader are what the
standby serves once it takes over after ``kill -9`` of the leader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from .cluster import detector, masters, wait_ready
from .test_failover import by_address

pytestmark = pytest.mark.slow

SCHEDULE = {"windows": [
    {"machine_ids": [{"hostname": "h1", "ip": "10.0.0.1"}],
     "unavailability": {"start": {"nanoseconds": 1_900_000_000_000_000_000}, "duration": {"nanoseconds": 3_600_000_000_000}}},
    {"machine_ids": [{"hostname": "h2"}], "unavailability": {"start": {"nanoseconds": 1_900_000_000_000_000_000}}},
]}


async def test_the_schedule_and_down_machines_survive_a_failover(zk_url: str, tmp_path: Path) -> None:
    async with masters(zk_url, tmp_path, 2) as ms, detector(zk_url) as det, aiohttp.ClientSession() as s:
        first = by_address(ms, await det.leader(within=20))
        await wait_ready(first.address)

        async def get(address: str, path: str) -> Any:
            async with s.get(f"http://{address}{path}", allow_redirects=False) as r:
                assert r.status == 200, (path, r.status)
                return await r.json()

        async with s.post(first.url + "/maintenance/schedule", json=SCHEDULE) as r:
            assert r.status == 200, await r.text()
        async with s.post(first.url + "/machine/down", json=[{"hostname": "h2"}]) as r:
            assert r.status == 200, await r.text()
        before = await get(first.address, "/maintenance/status")
        assert before == {"draining_machines": [{"id": {"hostname": "h1", "ip": "10.0.0.1"}}],
                          "down_machines": [{"hostname": "h2"}]}

        first.proc.kill()  # kill -9 the leader
        await first.proc.wait()
        new_address = await det.wait_change(first.address, within=15)
        assert new_address is not None and new_address != first.address
        await wait_ready(new_address)
        assert await get(new_address, "/maintenance/schedule") == SCHEDULE
        assert await get(new_address, "/maintenance/status") == before
