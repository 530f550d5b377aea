"""The master's registry: a SQLite file in the work dir (WAL, ``synchronous=FULL``).

Each durable change is a named operation (``master.registry_ops``); a batch of operations is
applied in one transaction on a single writer thread, so the event loop never blocks on fsync and
a ``kill -9`` leaves either the whole batch or none of it. ``Registry.open`` reads everything
back (``RegistrySnapshot``) and bumps the master sequence number used as the fencing epoch.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import typing
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import attrs

from master import registry_ops as ops

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS agents (
    agent_id TEXT PRIMARY KEY, hostname TEXT NOT NULL, port INTEGER NOT NULL,
    resources TEXT NOT NULL, attributes TEXT NOT NULL DEFAULT '', registered_at REAL NOT NULL,
    unreachable_since REAL, draining INTEGER NOT NULL DEFAULT 0, reservations TEXT NOT NULL DEFAULT '',
    drain_kill INTEGER NOT NULL DEFAULT 0, drain_max_grace REAL, drain_mark_gone INTEGER NOT NULL DEFAULT 0,
    drained INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS frameworks (
    framework_id TEXT PRIMARY KEY, info BLOB NOT NULL, failover_timeout REAL NOT NULL,
    registered_at REAL NOT NULL, deadline REAL);
CREATE TABLE IF NOT EXISTS removed_frameworks (framework_id TEXT PRIMARY KEY, removed_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS quotas (role TEXT PRIMARY KEY, guarantee TEXT NOT NULL, lim TEXT);
CREATE TABLE IF NOT EXISTS weights (role TEXT PRIMARY KEY, weight REAL NOT NULL);
CREATE TABLE IF NOT EXISTS agent_principals (agent_id TEXT PRIMARY KEY, principal TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS maintenance (id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL);
"""

# columns added after the first release: (table, column, definition), added to an older file
# by ``ALTER TABLE ... ADD COLUMN`` when it is opened (its rows take the defaults)
ADDED_COLUMNS = (
    ("agents", "drain_kill", "INTEGER NOT NULL DEFAULT 0"),
    ("agents", "drain_max_grace", "REAL"),
    ("agents", "drain_mark_gone", "INTEGER NOT NULL DEFAULT 0"),
    ("agents", "drained", "INTEGER NOT NULL DEFAULT 0"),
)

FILENAME = "registry.sqlite3"


class RegistryError(RuntimeError):
    pass


class RegistryStore(Protocol):
    """What the master needs of a registry: this SQLite ``Registry`` or, with high availability,
    ``master.registry_zk.ZkRegistry``. ``snapshot`` is what was read at open (``master_seq`` is
    the fencing epoch); ``apply`` returns once the batch is durable."""

    snapshot: ops.RegistrySnapshot
    writes: int
    transactions: int

    async def apply(self, batch: Sequence[ops.RegistryOp]) -> None: ...

    def read(self) -> ops.RegistrySnapshot: ...

    async def close(self) -> None: ...


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.executescript(SCHEMA)
    _migrate(conn)
    return conn


def _migrate(conn: sqlite3.Connection) -> None:
    """Add the columns an older registry file lacks (backward compatible: nothing is rewritten)."""
    for table, column, definition in ADDED_COLUMNS:
        have = {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")


def _apply_one(c: sqlite3.Connection, op: ops.RegistryOp) -> None:
    match op:
        case ops.AgentAdmitted():
            c.execute(
                "INSERT INTO agents (agent_id, hostname, port, resources, attributes, registered_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(agent_id) DO UPDATE SET hostname=excluded.hostname,"
                " port=excluded.port, resources=excluded.resources, attributes=excluded.attributes,"
                " unreachable_since=NULL",
                (op.agent_id, op.hostname, op.port, op.resources, op.attributes, op.registered_at),
            )
        case ops.AgentMarkedUnreachable():
            c.execute("UPDATE agents SET unreachable_since=? WHERE agent_id=?", (op.at, op.agent_id))
        case ops.AgentRemoved():
            c.execute("DELETE FROM agents WHERE agent_id=?", (op.agent_id,))
        case ops.AgentDrainSet():
            c.execute(
                "UPDATE agents SET draining=?, drain_kill=?, drain_max_grace=?, drain_mark_gone=?, drained=?"
                " WHERE agent_id=?",
                (int(op.draining), int(op.kill), op.max_grace, int(op.mark_gone), int(op.drained), op.agent_id),
            )
        case ops.AgentPrincipalBound():
            c.execute(
                "INSERT OR REPLACE INTO agent_principals (agent_id, principal) VALUES (?, ?)", (op.agent_id, op.principal)
            )
        case ops.ReservationsSet():
            c.execute("UPDATE agents SET reservations=? WHERE agent_id=?", (op.resources, op.agent_id))
        case ops.FrameworkAdded():
            c.execute(
                "INSERT INTO frameworks (framework_id, info, failover_timeout, registered_at, deadline)"
                " VALUES (?, ?, ?, ?, NULL) ON CONFLICT(framework_id) DO UPDATE SET info=excluded.info,"
                " failover_timeout=excluded.failover_timeout, deadline=NULL",
                (op.framework_id, op.info, op.failover_timeout, op.registered_at),
            )
        case ops.FrameworkDisconnected():
            c.execute("UPDATE frameworks SET deadline=? WHERE framework_id=?", (op.deadline, op.framework_id))
        case ops.FrameworkReconnected():
            c.execute("UPDATE frameworks SET deadline=NULL WHERE framework_id=?", (op.framework_id,))
        case ops.FrameworkRemoved():
            c.execute("DELETE FROM frameworks WHERE framework_id=?", (op.framework_id,))
            c.execute(
                "INSERT OR REPLACE INTO removed_frameworks (framework_id, removed_at) VALUES (?, ?)",
                (op.framework_id, op.at),
            )
        case ops.QuotaSet():
            c.execute(
                "INSERT OR REPLACE INTO quotas (role, guarantee, lim) VALUES (?, ?, ?)",
                (op.role, op.guarantee, op.limit),
            )
        case ops.QuotaRemoved():
            c.execute("DELETE FROM quotas WHERE role=?", (op.role,))
        case ops.WeightSet():
            c.execute("INSERT OR REPLACE INTO weights (role, weight) VALUES (?, ?)", (op.role, op.weight))
        case ops.MaintenanceSet():
            c.execute("INSERT OR REPLACE INTO maintenance (id, state) VALUES (1, ?)", (op.state,))
        case _:  # pragma: no cover - the union is closed
            raise RegistryError(f"unknown registry operation {op!r}")


def storable(op: ops.RegistryOp) -> ops.RegistryOp:
    """``op`` with every text field SQLite can store (UTF-8). Decoding refuses text that is not
    Unicode (``protocol.codec``), so this only guards against a bug: one such value is written
    with the offending code points escaped (``\\ud800``) and logged once, instead of failing
    the transaction -- and with it every other change of the batch and the master."""
    bad: dict[str, str] = {}
    if not attrs.has(type(op)):
        return op  # not an operation at all: _apply_one refuses it
    for a in attrs.fields(type(op)):
        v = getattr(op, a.name)
        if isinstance(v, str) and not v.isascii():
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                bad[a.name] = v.encode("utf-8", "backslashreplace").decode("utf-8")
    if not bad:
        return op
    log.error("registry: %s holds text that is not Unicode in %s; stored escaped", type(op).__name__, sorted(bad))
    fixed: Any = attrs.evolve(typing.cast(Any, op), **bad)
    return typing.cast(ops.RegistryOp, fixed)


def apply_sync(conn: sqlite3.Connection, batch: Iterable[ops.RegistryOp]) -> None:
    """Apply ``batch`` in one transaction (all or nothing)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for op in batch:
            _apply_one(conn, storable(op))
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _read(conn: sqlite3.Connection, master_seq: int) -> ops.RegistrySnapshot:
    agents = tuple(
        ops.AgentEntry(
            agent_id=r[0],
            hostname=r[1],
            port=int(r[2]),
            resources=r[3],
            attributes=r[4],
            registered_at=float(r[5]),
            unreachable_since=None if r[6] is None else float(r[6]),
            draining=bool(r[7]),
            reservations=r[8],
            drain_kill=bool(r[9]),
            drain_max_grace=None if r[10] is None else float(r[10]),
            drain_mark_gone=bool(r[11]),
            drained=bool(r[12]),
        )
        for r in conn.execute(
            "SELECT agent_id, hostname, port, resources, attributes, registered_at, unreachable_since,"
            " draining, reservations, drain_kill, drain_max_grace, drain_mark_gone, drained FROM agents"
            " ORDER BY agent_id"
        )
    )
    frameworks = tuple(
        ops.FrameworkEntry(
            framework_id=r[0],
            info=bytes(r[1]),
            failover_timeout=float(r[2]),
            registered_at=float(r[3]),
            deadline=None if r[4] is None else float(r[4]),
        )
        for r in conn.execute(
            "SELECT framework_id, info, failover_timeout, registered_at, deadline FROM frameworks"
            " ORDER BY framework_id"
        )
    )
    removed = frozenset(r[0] for r in conn.execute("SELECT framework_id FROM removed_frameworks"))
    quotas = tuple(
        ops.QuotaSet(role=r[0], guarantee=r[1], limit=r[2])
        for r in conn.execute("SELECT role, guarantee, lim FROM quotas ORDER BY role")
    )
    weights = tuple(
        ops.WeightSet(role=r[0], weight=float(r[1]))
        for r in conn.execute("SELECT role, weight FROM weights ORDER BY role")
    )
    bound = tuple(
        (str(r[0]), str(r[1])) for r in conn.execute("SELECT agent_id, principal FROM agent_principals ORDER BY agent_id")
    )
    row = conn.execute("SELECT state FROM maintenance WHERE id = 1").fetchone()
    return ops.RegistrySnapshot(
        master_seq=master_seq, agents=agents, frameworks=frameworks, removed_frameworks=removed,
        quotas=quotas, weights=weights, agent_principals=bound, maintenance=str(row[0]) if row else "",
    )


def open_sync(path: Path) -> tuple[sqlite3.Connection, ops.RegistrySnapshot]:
    """Open (creating if needed), bump the master sequence and read everything back."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = _connect(path)
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute("SELECT value FROM meta WHERE key='master_seq'").fetchone()
        seq = (int(row[0]) if row else 0) + 1
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('master_seq', ?)", (str(seq),))
        conn.execute("COMMIT")
    except sqlite3.DatabaseError as e:
        raise RegistryError(f"cannot open registry {path}: {e}") from e
    return conn, _read(conn, seq)


class GroupCommit:
    """Write-first group commit shared by the registries (SQLite here, ZooKeeper in
    ``registry_zk``): ``await apply(batch)`` returns once the batch is durable; batches submitted
    while a write is in flight are coalesced into the next ``_write`` (one transaction), run on
    the registry's single-thread pool, and every waiter gets that write's outcome."""

    _flush_name = "registry-flush"

    def __init__(self, pool_name: str) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=pool_name)
        self._pending: list[tuple[Sequence[ops.RegistryOp], asyncio.Future[None]]] = []
        self._flushing = False
        self._flush_task: asyncio.Task[None] | None = None
        self._closed = False
        self.writes = 0
        self.transactions = 0

    def _write(self, batch: list[ops.RegistryOp]) -> None:
        raise NotImplementedError

    async def apply(self, batch: Sequence[ops.RegistryOp]) -> None:
        if not batch:
            return
        if self._closed:
            raise RegistryError("registry is closed")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._pending.append((batch, fut))
        if not self._flushing:
            self._flushing = True
            self._flush_task = loop.create_task(self._flush(), name=self._flush_name)
        await fut

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                taken, self._pending = self._pending, []
                batch = [op for b, _ in taken for op in b]
                try:
                    await loop.run_in_executor(self._pool, self._write, batch)
                except Exception as e:  # delivered to every waiter; the master stops
                    for _, f in taken:
                        if not f.done():
                            f.set_exception(RegistryError(f"registry write failed: {e!r}"))
                    continue
                for _, f in taken:
                    if not f.done():
                        f.set_result(None)
        finally:
            self._flushing = False

    async def _stop_writing(self) -> bool:
        """Refuse new batches, wait for the writes in flight, stop the pool; False if already
        closed."""
        if self._closed:
            return False
        self._closed = True
        if self._flush_task is not None:
            await asyncio.gather(self._flush_task, return_exceptions=True)
        self._pool.shutdown(wait=True)
        return True


class Registry(GroupCommit):
    """Async facade: ``await registry.apply([...])`` returns once the batch is durable.

    Batches submitted while a write is in flight are coalesced into the next transaction.
    """

    def __init__(self, conn: sqlite3.Connection, snapshot: ops.RegistrySnapshot, path: Path) -> None:
        super().__init__("registry")
        self._conn = conn
        self.snapshot = snapshot
        self.path = path
        self._lock = threading.Lock()

    @classmethod
    async def open(cls, work_dir: Path) -> Registry:
        path = Path(work_dir) / FILENAME
        loop = asyncio.get_running_loop()
        conn, snap = await loop.run_in_executor(None, open_sync, path)
        return cls(conn, snap, path)

    def _write(self, batch: list[ops.RegistryOp]) -> None:
        with self._lock:
            apply_sync(self._conn, batch)
            self.writes += len(batch)
            self.transactions += 1

    def read(self) -> ops.RegistrySnapshot:
        with self._lock:
            return _read(self._conn, self.snapshot.master_seq)

    async def close(self) -> None:
        if await self._stop_writing():
            with self._lock:
                self._conn.close()
