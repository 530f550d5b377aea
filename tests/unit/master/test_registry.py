from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from master import registry_ops as ops
from master.registry import FILENAME, Registry, apply_sync, open_sync


async def test_ops_round_trip_and_master_seq(tmp_path: Path) -> None:
    reg = await Registry.open(tmp_path)
    assert reg.snapshot.master_seq == 1
    await reg.apply(
        [
            ops.AgentAdmitted("a1", "h1", 5051, "cpus:4;mem:1024", "rack:r1", 10.0),
            ops.FrameworkAdded("f1", b"\x81\xa1x\x01", 100.0, 11.0),
            ops.QuotaSet("eng", "cpus:2", "cpus:4"),
            ops.WeightSet("eng", 2.0),
        ]
    )
    await reg.apply([ops.FrameworkDisconnected("f1", 111.0), ops.AgentMarkedUnreachable("a1", 12.0)])
    await reg.apply([ops.FrameworkAdded("f2", b"", 0.0), ops.FrameworkRemoved("f2", 13.0)])
    await reg.apply([ops.ReservationsSet("a1", "cpus(eng):1"), ops.AgentDrainSet("a1", True)])
    await reg.close()

    reg2 = await Registry.open(tmp_path)
    snap = reg2.snapshot
    assert snap.master_seq == 2
    (a,) = snap.agents
    assert (a.agent_id, a.hostname, a.port, a.resources, a.unreachable_since) == ("a1", "h1", 5051, "cpus:4;mem:1024", 12.0)
    assert a.draining and a.reservations == "cpus(eng):1"
    (f,) = snap.frameworks
    assert (f.framework_id, f.info, f.failover_timeout, f.deadline) == ("f1", b"\x81\xa1x\x01", 100.0, 111.0)
    assert snap.removed_frameworks == frozenset({"f2"})
    assert snap.quotas == (ops.QuotaSet("eng", "cpus:2", "cpus:4"),)
    assert snap.weights == (ops.WeightSet("eng", 2.0),)
    # re-admission clears unreachable; reconnect clears the deadline
    await reg2.apply([ops.AgentAdmitted("a1", "h1", 5051, "cpus:4"), ops.FrameworkReconnected("f1")])
    snap2 = reg2.read()
    assert snap2.agents[0].unreachable_since is None and snap2.frameworks[0].deadline is None
    await reg2.close()
    await reg2.close()  # idempotent


def test_batch_is_atomic(tmp_path: Path) -> None:
    conn, _ = open_sync(tmp_path / FILENAME)

    class Bad:
        pass

    with pytest.raises(Exception, match="unknown registry operation"):
        apply_sync(conn, [ops.AgentAdmitted("a1", "h", 1, ""), Bad()])  # type: ignore[list-item]
    assert conn.execute("SELECT count(*) FROM agents").fetchone()[0] == 0
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    conn.close()


async def test_concurrent_applies_coalesce(tmp_path: Path) -> None:
    import asyncio

    reg = await Registry.open(tmp_path)
    await asyncio.gather(*(reg.apply([ops.WeightSet(f"r{i}", float(i + 1))]) for i in range(50)))
    assert len(reg.read().weights) == 50
    assert reg.transactions < 50
    await reg.close()


def test_corrupt_file_is_a_clear_error(tmp_path: Path) -> None:
    from master.registry import RegistryError

    (tmp_path / FILENAME).write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(RegistryError, match="cannot open registry"):
        open_sync(tmp_path / FILENAME)
    assert isinstance(sqlite3.sqlite_version, str)
