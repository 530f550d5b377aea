"""The drain mode in the registry: SQLite keeps DRAIN_AGENT's settings and DRAINED, an older
registry file gains the columns when opened (its draining agents read back as deactivated, which
is all the older master did), and the ZooKeeper registry's fold reads back the same."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from master import registry
from master import registry_ops as ops
from master.registry_zk import Mirror, fold, snapshot_of

OLD_AGENTS = """CREATE TABLE agents (
    agent_id TEXT PRIMARY KEY, hostname TEXT NOT NULL, port INTEGER NOT NULL,
    resources TEXT NOT NULL, attributes TEXT NOT NULL DEFAULT '', registered_at REAL NOT NULL,
    unreachable_since REAL, draining INTEGER NOT NULL DEFAULT 0, reservations TEXT NOT NULL DEFAULT '')"""

BATCH: list[ops.RegistryOp] = [
    ops.AgentAdmitted("a1", "h1", 5051, "cpus:4", registered_at=1.0),
    ops.AgentAdmitted("a2", "h2", 5051, "cpus:4", registered_at=2.0),
    ops.AgentAdmitted("a3", "h3", 5051, "cpus:4", registered_at=3.0),
    ops.AgentDrainSet("a1", True, kill=True, max_grace=2.5),
    ops.AgentDrainSet("a2", True, kill=True, mark_gone=True, drained=True),
    ops.AgentDrainSet("a3", True),
    ops.AgentAdmitted("a1", "h1", 5052, "cpus:4", registered_at=9.0),  # re-admission keeps the drain
]


def test_an_older_registry_file_gains_the_drain_columns(tmp_path: Path) -> None:
    path = tmp_path / registry.FILENAME
    old = sqlite3.connect(str(path))
    old.execute(OLD_AGENTS)
    old.execute("INSERT INTO agents (agent_id, hostname, port, resources, registered_at, draining)"
                " VALUES ('a0', 'h0', 5051, 'cpus:1', 1.0, 1)")
    old.commit()
    old.close()
    conn, snap = registry.open_sync(path)
    try:
        (a0,) = snap.agents
        assert (a0.draining, a0.drain_kill, a0.drain_max_grace, a0.drain_mark_gone, a0.drained) == (
            True, False, None, False, False)
        registry.apply_sync(conn, [ops.AgentDrainSet("a0", True, kill=True, max_grace=1.0)])
    finally:
        conn.close()
    conn, snap = registry.open_sync(path)  # opening again adds nothing twice
    conn.close()
    (a0,) = snap.agents
    assert (a0.drain_kill, a0.drain_max_grace) == (True, 1.0)


def test_sqlite_and_the_zookeeper_fold_read_the_drain_back_alike(tmp_path: Path) -> None:
    conn, _ = registry.open_sync(tmp_path / registry.FILENAME)
    registry.apply_sync(conn, BATCH)
    expected = registry._read(conn, 0)
    conn.close()
    mirror: Mirror = {}
    fold(mirror, BATCH)
    assert snapshot_of(mirror, 0) == expected
    by_id = {a.agent_id: a for a in expected.agents}
    assert (by_id["a1"].drain_kill, by_id["a1"].drain_max_grace, by_id["a1"].port) == (True, 2.5, 5052)
    assert (by_id["a2"].drain_mark_gone, by_id["a2"].drained) == (True, True)
    assert (by_id["a3"].draining, by_id["a3"].drain_kill) == (True, False)
    # a znode written before drain modes were kept reads as deactivated only
    old: Mirror = {("agents", "a9"): {"hostname": "h", "port": 1, "resources": "cpus:1", "draining": True}}
    (a9,) = snapshot_of(old, 0).agents
    assert (a9.draining, a9.drain_kill, a9.drained) == (True, False, False)
