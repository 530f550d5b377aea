"""pymesos 0.3.15, unchanged, with a ``zk://`` master URL: its detector reads the masters' znodes
(the lowest ``json.info_`` child, ``address.ip``/``port``), subscribes at the leader, and after
``kill -9`` of the leader re-registers with the same framework id at the new one."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from .cluster import detector, masters, state, wait_ready

try:
    from pymesos import MesosSchedulerDriver, Scheduler
except ImportError as e:  # pragma: no cover - the install scripts provide it
    raise ImportError("pymesos 0.3.15 is required: run scripts/install-compat-clients") from e

pytestmark = pytest.mark.slow


class Sched(Scheduler):
    def __init__(self) -> None:
        self.framework_id: str | None = None
        self.registered_at: list[str] = []  # the master each (re-)registration went to
        self.changed = threading.Event()

    def registered(self, driver: Any, framework_id: Any, master_info: Any) -> None:
        self.framework_id = framework_id["value"]
        self.registered_at.append(f"{master_info['hostname']}:{master_info['port']}")
        self.changed.set()

    def reregistered(self, driver: Any, master_info: Any) -> None:
        self.registered_at.append(f"{master_info['hostname']}:{master_info['port']}")
        self.changed.set()


async def _until(pred: Any, ev: threading.Event, within: float) -> None:
    async with asyncio.timeout(within):
        while not pred():
            await asyncio.to_thread(ev.wait, 0.5)
            ev.clear()


async def test_pymesos_follows_the_leader_through_zk(zk_url: str, tmp_path: Path) -> None:
    async with masters(zk_url, tmp_path, 2) as ms, detector(zk_url) as det:
        leader = await det.leader(within=20)
        sched = Sched()
        driver = MesosSchedulerDriver(
            sched, {"user": "nobody", "name": "pymesos-zk", "failover_timeout": 300.0}, zk_url, use_addict=False,
        )
        await asyncio.to_thread(driver.start)
        zk_client = driver.detector.zk  # pymesos stops it but never closes it (its socketpair leaks)
        try:
            await _until(lambda: len(sched.registered_at) >= 1, sched.changed, 30)
            assert sched.registered_at == [leader]
            first = next(m for m in ms if m.address == leader)
            first.proc.kill()
            await first.proc.wait()
            new = await det.wait_change(leader, within=15)
            await _until(lambda: len(sched.registered_at) >= 2, sched.changed, 30)
            assert sched.registered_at[-1] == new
            await wait_ready(new or "")
            st = await state(new or "")
            frameworks = st["frameworks"]
            assert isinstance(frameworks, list)
            assert [f["id"] for f in frameworks if f["active"]] == [sched.framework_id]
        finally:
            await asyncio.to_thread(driver.stop)
            await asyncio.to_thread(driver.join)
            zk_client.close()
