"""R12: 20x SIGKILL of an ``agora-master`` process while it writes its registry. Every restart
succeeds, the registry is never half-written and no agent appears twice."""

from __future__ import annotations

import asyncio
import contextlib
import random
import sqlite3
from pathlib import Path

import aiohttp
import pytest

from master.registry import FILENAME
from protocol import agent_channel as ac
from protocol import codec, mesos
from protocol.resources import Resources

from .test_restart import master_process


async def _register(session: aiohttp.ClientSession, url: str, agent_id: str | None) -> None:
    with contextlib.suppress(Exception):
        async with session.ws_connect(url + ac.PATH) as ws:
            reg = ac.Register(hostname="h", port=1, resources=Resources.parse("cpus:1;mem:64").to_mesos(),
                              agent_id=mesos.AgentID(agent_id) if agent_id else None)
            await ws.send_bytes(codec.encode_msgpack(ac.frame(reg)))
            await ws.receive(timeout=5)


async def _subscribe(session: aiohttp.ClientSession, url: str) -> None:
    body = codec.encode_msgpack(mesos.Call.make_subscribe(mesos.FrameworkInfo(user="u", name="n", failover_timeout=60)))
    with contextlib.suppress(Exception):
        async with session.post(url + "/api/v1/scheduler", data=body, headers={"Content-Type": codec.MSGPACK}) as r:
            await r.content.readany()


@pytest.mark.slow
async def test_sigkill_during_registry_writes(tmp_path: Path) -> None:
    work = tmp_path / "master"
    rng = random.Random(12)
    known: list[str] = []
    async with aiohttp.ClientSession() as session:
        for _ in range(20):
            async with master_process(work) as (proc, url):
                jobs = [asyncio.ensure_future(_register(session, url, aid)) for aid in known[:3]]
                jobs += [asyncio.ensure_future(_register(session, url, None)) for _ in range(2)]
                jobs += [asyncio.ensure_future(_subscribe(session, url)) for _ in range(2)]
                await asyncio.sleep(rng.uniform(0.0, 0.08))  # the moment to kill is the point of the test
                proc.kill()
                await proc.wait()
                for j in jobs:
                    j.cancel()
                await asyncio.gather(*jobs, return_exceptions=True)
            conn = sqlite3.connect(str(work / FILENAME))
            try:
                assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
                ids = [r[0] for r in conn.execute("SELECT agent_id FROM agents")]
                assert len(ids) == len(set(ids))
                known = ids
            finally:
                conn.close()
        async with master_process(work) as (proc, url), session.get(url + "/health") as r:
            assert r.status == 200
    conn = sqlite3.connect(str(work / FILENAME))
    seq = int(conn.execute("SELECT value FROM meta WHERE key='master_seq'").fetchone()[0])
    conn.close()
    assert seq == 21
