"""Test support for the HA tests: real ``agora-master`` processes contending in ZooKeeper, a real
``agora-agent`` following them, and a detector to see who leads."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import attrs

from protocol.detector import MasterDetector

from ..agent_process import agent_process, start_ready
from ..agent_process import stop_process as stop

SESSION_TIMEOUT = 1.5  # seconds: a killed leader's znode goes after this


def _text(log: Path) -> str:
    return log.read_text(errors="replace")


@attrs.define
class MasterProc:
    proc: asyncio.subprocess.Process
    address: str  # host:port
    log: Path

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def log_text(self) -> str:
        return _text(self.log)


async def start_master(zk_url: str, work: Path, log: Path) -> MasterProc:
    proc, line = await start_ready(
        (sys.executable, "-m", "master.main", "--ip", "127.0.0.1", "--port", "0", "--work-dir", str(work),
         "--zk", zk_url, "--zk-session-timeout", str(SESSION_TIMEOUT),
         "--heartbeat-interval", "0.5", "--ping-interval", "0.5", "--ping-timeout", "10",
         "--agent-reregister-timeout", "30", "--log-level", "INFO"),
        "agora-master listening on http://127.0.0.1:", log,
    )
    return MasterProc(proc, line.split()[-1].removeprefix("http://"), log)


@contextlib.asynccontextmanager
async def masters(zk_url: str, root: Path, n: int) -> AsyncIterator[list[MasterProc]]:
    started: list[MasterProc] = []
    try:
        results = await asyncio.gather(
            *(start_master(zk_url, root / f"master{i}", root / f"master{i}.log") for i in range(n)),
            return_exceptions=True,
        )
        started = [r for r in results if isinstance(r, MasterProc)]
        for r in results:
            if isinstance(r, BaseException):
                raise r
        yield started
    finally:
        await asyncio.gather(*(stop(m.proc) for m in started))


@contextlib.asynccontextmanager
async def detector(zk_url: str) -> AsyncIterator[MasterDetector]:
    d = MasterDetector(zk_url, session_timeout=5.0)
    await d.start()
    try:
        yield d
    finally:
        await d.close()


@contextlib.asynccontextmanager
async def agent(zk_url: str, work: Path, log: Path) -> AsyncIterator[str]:
    """A real agent following the leader through ZooKeeper; yields its URL."""
    async with agent_process(zk_url, work, "--default-grace", "0.5", "--log-level", "INFO", log=log) as url:
        yield url


async def state(address: str) -> dict[str, object]:
    async with aiohttp.ClientSession() as s, s.get(f"http://{address}/state", allow_redirects=False) as r:
        assert r.status == 200, r.status
        out: dict[str, object] = await r.json()
        return out


async def wait_ready(address: str, within: float = 20.0) -> None:
    """Until the master at ``address`` serves ``/state`` itself (elected and recovered)."""
    async with asyncio.timeout(within), aiohttp.ClientSession() as s:
        while True:
            try:
                async with s.get(f"http://{address}/state", allow_redirects=False) as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)  # polling another process' HTTP endpoint
