"""R12: SIGKILL during registry writes. 20 times a process applying registry batches through the
master's real registry code is killed at a random moment, and 3 times a whole ``agora-master``
is killed while agents and frameworks register. The registry always reopens, is never
half-written (integrity check, each batch all-or-nothing) and no agent appears twice."""

from __future__ import annotations

import asyncio
import contextlib
import random
import sqlite3
import sys
from pathlib import Path

import aiohttp
import pytest

from master.registry import FILENAME, open_sync
from protocol import agent_channel as ac
from protocol import codec, mesos
from protocol.resources import Resources

from .test_restart import master_process

WRITER = """
import itertools, sys
from pathlib import Path
from master import registry_ops as ops
from master.registry import apply_sync, open_sync
conn, snap = open_sync(Path(sys.argv[1]))
print("ready", flush=True)
for i in itertools.count():
    a = f"agent-{i % 7}"
    # one batch = one transaction: an agent, its pair framework and a weight, all or nothing
    apply_sync(conn, [
        ops.AgentAdmitted(a, "h", 5051, f"cpus:{i % 5 + 1}", "", float(i)),
        ops.FrameworkAdded(f"fw-{i}", b"x" * 64, 10.0, float(i)),
        ops.WeightSet(f"role{i % 3}", float(i + 1)),
        ops.FrameworkDisconnected(f"fw-{i}", float(i) + 10.0),
    ])
"""


def _check(path: Path) -> None:
    conn = sqlite3.connect(str(path))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        ids = [r[0] for r in conn.execute("SELECT agent_id FROM agents")]
        assert len(ids) == len(set(ids))
        # every committed framework row has its deadline: the batch was applied whole
        assert conn.execute("SELECT count(*) FROM frameworks WHERE deadline IS NULL").fetchone()[0] == 0
    finally:
        conn.close()


@pytest.mark.slow
async def test_sigkill_during_registry_writes(tmp_path: Path) -> None:
    path = tmp_path / FILENAME
    rng = random.Random(12)
    for _ in range(20):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", WRITER, str(path), stdout=asyncio.subprocess.PIPE
        )
        try:
            assert proc.stdout is not None
            assert (await asyncio.wait_for(proc.stdout.readline(), 20)).startswith(b"ready")
            await asyncio.sleep(rng.uniform(0.005, 0.05))  # the moment to kill is the point of the test
        finally:
            proc.kill()
            await proc.wait()
        _check(path)
    conn, snap = open_sync(path)
    conn.close()
    assert snap.master_seq == 21 and snap.agents


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
async def test_sigkill_agora_master_while_it_registers(tmp_path: Path) -> None:
    work = tmp_path / "master"
    rng = random.Random(7)
    known: list[str] = []
    async with aiohttp.ClientSession() as session:
        for _ in range(3):
            async with master_process(work) as (proc, url):
                jobs = [asyncio.ensure_future(_register(session, url, aid)) for aid in known[:3]]
                jobs += [asyncio.ensure_future(_register(session, url, None)) for _ in range(3)]
                jobs += [asyncio.ensure_future(_subscribe(session, url)) for _ in range(2)]
                await asyncio.sleep(rng.uniform(0.01, 0.08))  # the moment to kill is the point of the test
                proc.kill()
                await proc.wait()
                for j in jobs:
                    j.cancel()
                await asyncio.gather(*jobs, return_exceptions=True)
            conn = sqlite3.connect(str(work / FILENAME))
            try:
                assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
                known = [r[0] for r in conn.execute("SELECT agent_id FROM agents")]
                assert len(known) == len(set(known))
            finally:
                conn.close()
        async with master_process(work) as (proc, url), session.get(url + "/health") as r:
            assert r.status == 200
