"""The batch framework's persistent job store: one SQLite file (WAL, synchronous=FULL).

Layout (schema 2): a ``jobs`` row per job holds its header (spec, state, times, reason) as
msgpack; a ``tasks`` row per task holds that task with its attempt history. A flush writes the
header of each changed job and only the task rows changed since that job's last write
(``JobRecord.unsaved_tasks``, kept by the core), so a flush costs O(changed tasks), not O(job).

A submission is written before the job id is returned; task progress is written in batches (one
transaction per scheduling tick) on the store's one writer thread, so the event loop never waits
on fsync and writes land in the order they were taken (a later snapshot of a task never loses to
an earlier one). On start the service loads every job back, so a restart of the framework loses
nothing it acknowledged.

Schema 1 (the first layout: each job row's blob carried every task) is converted in place the
first time the store is opened.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import msgpack

from frameworks.batch.fairshare import Usage
from frameworks.batch.logtail import KeptTail
from frameworks.batch.model import JobState, TaskPhase, spec_from_dict, spec_to_dict
from frameworks.batch.records import Attempt, JobRecord, TaskRecord

SCHEMA_VERSION = 2

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY,
    state TEXT NOT NULL,
    submitted_at REAL NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS tasks (
    job_id INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (job_id, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS usage (
    queue TEXT NOT NULL,
    user TEXT NOT NULL,
    cpu REAL NOT NULL,
    mem REAL NOT NULL,
    gpu REAL NOT NULL,
    billing REAL NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (queue, user)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS accounting (
    task_id TEXT PRIMARY KEY,
    job_id INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    name TEXT NOT NULL,
    user TEXT,
    queue TEXT NOT NULL,
    agent_id TEXT,
    hostname TEXT,
    submitted_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL,
    state TEXT NOT NULL,
    exit_code INTEGER,
    cpus REAL NOT NULL,
    mem REAL NOT NULL,
    gpus REAL NOT NULL,
    cpu_seconds REAL,
    mem_peak_bytes INTEGER,
    message TEXT
);
CREATE INDEX IF NOT EXISTS accounting_ended ON accounting (ended_at);
CREATE TABLE IF NOT EXISTS service_jobs (job_id INTEGER PRIMARY KEY, token TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS service_tasks (
    job_id INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    input TEXT NOT NULL,
    state TEXT NOT NULL,
    failures INTEGER NOT NULL DEFAULT 0,
    sends INTEGER NOT NULL DEFAULT 0,
    result TEXT,
    sent_at REAL,
    ended_at REAL,
    PRIMARY KEY (job_id, idx)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS accounting_user ON accounting (user, ended_at);
CREATE TABLE IF NOT EXISTS log_tails (
    task_id TEXT NOT NULL,
    stream TEXT NOT NULL,
    job_id INTEGER NOT NULL,
    start INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (task_id, stream)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS log_tails_job ON log_tails (job_id);
"""

ACCOUNTING_COLUMNS = (
    "task_id", "job_id", "idx", "attempt", "name", "user", "queue", "agent_id", "hostname", "submitted_at",
    "started_at", "ended_at", "state", "exit_code", "cpus", "mem", "gpus", "cpu_seconds", "mem_peak_bytes", "message",
)

JobRow = tuple[int, str, float, bytes]
TaskRow = tuple[int, int, bytes]


# --- records <-> dicts --------------------------------------------------------------------------


def attempt_to_dict(a: Attempt) -> dict[str, Any]:
    return {
        "attempt": a.attempt,
        "task_id": a.task_id,
        "agent_id": a.agent_id,
        "hostname": a.hostname,
        "started_at": a.started_at,
        "ended_at": a.ended_at,
        "state": a.state,
        "exit_code": a.exit_code,
        "message": a.message,
        "address": a.address,
        "ports": list(a.ports),
        "cpu_seconds": a.cpu_seconds,
        "mem_peak_bytes": a.mem_peak_bytes,
    }


def header_to_dict(job: JobRecord) -> dict[str, Any]:
    """The job without its tasks."""
    return {
        "id": job.job_id,
        "spec": spec_to_dict(job.spec),
        "state": job.state.value,
        "submitted_at": job.submitted_at,
        "started_at": job.started_at,
        "ended_at": job.ended_at,
        "reason": job.reason,
        "gang_started": job.gang_started,
        "gang_restarts": job.gang_restarts,
        "regrouping": job.regrouping,
        "aborting": job.aborting,
        "gang_started_at": job.gang_started_at,
        "gang_not_before": job.gang_not_before,
        "exit_code": job.exit_code,
        "user": job.user,
        "held": job.held,
        "changes": job.changes,
        "parent_id": job.parent_id,
        "due_at": job.due_at,
        "next_run": job.next_run,
        "runs": job.runs,
        "notified": job.notified,
        "run_as": job.run_as,
        "preempted_by": job.preempted_by,
    }


def task_to_dict(t: TaskRecord) -> dict[str, Any]:
    return {
        "index": t.index,
        "phase": t.phase.value,
        "attempt": t.attempt,
        "failures": t.failures,
        "not_before": t.not_before,
        "revocable": t.revocable,
        "relaunches": t.relaunches,
        "killing": t.killing,
        "preempted_by": t.preempted_by,
        "history": [attempt_to_dict(a) for a in t.history],
    }


def job_to_dict(job: JobRecord) -> dict[str, Any]:
    """The whole job (header and tasks): the schema-1 row format and the comparison form."""
    d = header_to_dict(job)
    d["tasks"] = [task_to_dict(t) for t in job.tasks]
    return d


def header_from_dict(d: dict[str, Any]) -> JobRecord:
    return JobRecord(
        job_id=d["id"],
        spec=spec_from_dict(d["spec"]),
        submitted_at=d["submitted_at"],
        state=JobState(d["state"]),
        started_at=d.get("started_at"),
        ended_at=d.get("ended_at"),
        reason=d.get("reason"),
        gang_started=d.get("gang_started", False),
        gang_restarts=d.get("gang_restarts", 0),
        regrouping=d.get("regrouping"),
        aborting=d.get("aborting"),
        gang_started_at=d.get("gang_started_at"),
        gang_not_before=d.get("gang_not_before", 0.0),
        exit_code=d.get("exit_code"),
        user=d.get("user"),
        held=d.get("held"),
        changes=list(d.get("changes") or []),
        parent_id=d.get("parent_id"),
        due_at=d.get("due_at"),
        next_run=d.get("next_run"),
        runs=list(d.get("runs") or []),
        notified=d.get("notified", False),
        run_as=d.get("run_as"),
        preempted_by=d.get("preempted_by"),
    )


def task_from_dict(job_id: int, td: dict[str, Any]) -> TaskRecord:
    task = TaskRecord(
        job_id=job_id,
        index=td["index"],
        phase=TaskPhase(td["phase"]),
        attempt=td["attempt"],
        failures=td["failures"],
        not_before=td["not_before"],
        revocable=td.get("revocable", False),
        relaunches=td.get("relaunches", 0),
        killing=td.get("killing"),
        preempted_by=td.get("preempted_by"),
    )
    task.history = [Attempt(**{**a, "ports": tuple(a.get("ports") or ())}) for a in td["history"]]
    return task


def job_from_dict(d: dict[str, Any]) -> JobRecord:
    job = header_from_dict(d)
    job.tasks = [task_from_dict(job.job_id, td) for td in d["tasks"]]
    return job


def _pack(d: dict[str, Any]) -> bytes:
    return msgpack.packb(d, use_bin_type=True)


def _unpack(b: bytes) -> dict[str, Any]:
    return msgpack.unpackb(b, raw=False)


# --- what one flush writes ----------------------------------------------------------------------


@attrs.define
class WriteBatch:
    """Rows serialised from the records at one instant (on the event loop, where they change)."""

    jobs: list[JobRow] = attrs.field(factory=list)
    tasks: list[TaskRow] = attrs.field(factory=list)
    accounting: list[tuple[Any, ...]] = attrs.field(factory=list)  # one row per attempt that ran
    # what was taken from each job's unsaved set (None: all tasks), to give back if the write fails
    taken: list[tuple[JobRecord, set[int] | None]] = attrs.field(factory=list)

    def give_back(self) -> None:
        """The write failed: mark its tasks unsaved again so the next flush retries them."""
        for job, taken in self.taken:
            if taken is None or job.unsaved_tasks is None:
                job.unsaved_tasks = None
            else:
                job.unsaved_tasks |= taken


def snapshot(jobs: Sequence[JobRecord]) -> WriteBatch:
    """Header rows of ``jobs`` and the rows of their tasks changed since their last snapshot."""
    batch = WriteBatch()
    for job in jobs:
        batch.jobs.append((job.job_id, job.state.value, job.submitted_at, _pack(header_to_dict(job))))
        unsaved, job.unsaved_tasks = job.unsaved_tasks, set()
        batch.taken.append((job, unsaved))
        tasks = job.tasks if unsaved is None else [job.tasks[i] for i in sorted(unsaved)]
        batch.tasks.extend((job.job_id, t.index, _pack(task_to_dict(t))) for t in tasks)
        for t in tasks:
            # accounting: every attempt of the changed task that ran (a task has a few at most;
            # one that failed and was placed again before this flush is written too)
            batch.accounting.extend(
                accounting_row(job, t.index, a) for a in t.history if a.started_at is not None or a.ended_at is not None
            )
    return batch


def accounting_row(job: JobRecord, index: int, a: Attempt) -> tuple[Any, ...]:
    """One attempt as the ``accounting`` table keeps it (``ACCOUNTING_COLUMNS``)."""
    spec = job.spec
    return (
        a.task_id, job.job_id, index, a.attempt, spec.name, job.user, spec.queue, a.agent_id, a.hostname,
        job.submitted_at, a.started_at, a.ended_at, a.state or "TASK_RUNNING", a.exit_code, spec.cpus, spec.mem,
        spec.gpus, a.cpu_seconds, a.mem_peak_bytes, a.message,
    )


@attrs.frozen
class AccountingQuery:
    user: str | None = None
    queue: str | None = None
    states: tuple[str, ...] = ()
    since: float | None = None
    until: float | None = None
    job_id: int | None = None
    limit: int = 1000


# --- the store ----------------------------------------------------------------------------------


class JobStore:
    """Synchronous SQLite access; the async wrappers run it on the store's one writer thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)
        self._migrate()
        # One thread, so writes commit in the order their snapshots were taken.
        self._writer = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="batch-store")

    def close(self) -> None:
        """Finish the queued writes, then close the file."""
        self._writer.shutdown(wait=True)
        with self._lock:
            self._db.close()

    def _migrate(self) -> None:
        version = self.get_meta("schema")
        if version is not None and int(version) >= SCHEMA_VERSION:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                # Schema 1: every task inside its job's blob. Split them into task rows.
                for job_id, data in self._db.execute("SELECT id, data FROM jobs").fetchall():
                    d = _unpack(data)
                    tasks = d.pop("tasks", None)
                    if tasks is None:
                        continue
                    self._db.executemany(
                        "INSERT OR REPLACE INTO tasks (job_id, idx, data) VALUES (?, ?, ?)",
                        [(job_id, td["index"], _pack(td)) for td in tasks],
                    )
                    self._db.execute("UPDATE jobs SET data = ? WHERE id = ?", (_pack(d), job_id))
                self._db.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                    (str(SCHEMA_VERSION),),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def write(self, jobs: Sequence[JobRecord]) -> None:
        batch = snapshot(jobs)
        try:
            self.write_batch(batch)
        except BaseException:
            batch.give_back()
            raise

    def write_batch(self, batch: WriteBatch) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT INTO jobs (id, state, submitted_at, data) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT(id) DO UPDATE SET state=excluded.state, data=excluded.data",
                    batch.jobs,
                )
                self._db.executemany(
                    "INSERT OR REPLACE INTO tasks (job_id, idx, data) VALUES (?, ?, ?)", batch.tasks
                )
                if batch.accounting:
                    self._db.executemany(
                        f"INSERT OR REPLACE INTO accounting ({', '.join(ACCOUNTING_COLUMNS)}) "
                        f"VALUES ({', '.join('?' for _ in ACCOUNTING_COLUMNS)})",
                        batch.accounting,
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def load(self) -> list[JobRecord]:
        """Every job with its tasks, as last written; the records start with nothing unsaved."""
        with self._lock:
            headers = self._db.execute("SELECT data FROM jobs ORDER BY id").fetchall()
            rows = self._db.execute("SELECT job_id, data FROM tasks ORDER BY job_id, idx").fetchall()
        jobs = [header_from_dict(_unpack(h[0])) for h in headers]
        by_id = {j.job_id: j for j in jobs}
        for job_id, data in rows:
            job = by_id.get(job_id)
            if job is not None:
                job.tasks.append(task_from_dict(job_id, _unpack(data)))
        for job in jobs:
            job.unsaved_tasks = set()
        return jobs

    def save_usage(self, usage: Mapping[tuple[str, str], Usage]) -> None:
        """Every (queue, user)'s decayed usage as of its ``at`` (the fair-share input a restart
        goes on from: decay continues from ``at``)."""
        rows = [(q, u, x.cpu, x.mem, x.gpu, x.billing, x.at) for (q, u), x in usage.items()]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO usage (queue, user, cpu, mem, gpu, billing, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def load_usage(self) -> dict[tuple[str, str], Usage]:
        with self._lock:
            rows = self._db.execute("SELECT queue, user, cpu, mem, gpu, billing, at FROM usage").fetchall()
        return {(q, u): Usage(cpu, mem, gpu, billing, at) for q, u, cpu, mem, gpu, billing, at in rows}

    async def asave_usage(self, usage: Mapping[tuple[str, str], Usage]) -> None:
        await asyncio.get_running_loop().run_in_executor(self._writer, self.save_usage, dict(usage))

    def accounting(self, query: AccountingQuery) -> list[dict[str, Any]]:
        """Attempt rows (``sacct``'s steps), newest first: those of ``user`` / ``queue`` / in
        ``states`` (Mesos state names) that overlap the window [``since``, ``until``)."""
        where: list[str] = []
        args: list[Any] = []
        if query.user is not None:
            where.append("user = ?")
            args.append(query.user)
        if query.queue is not None:
            where.append("queue = ?")
            args.append(query.queue)
        if query.states:
            where.append(f"state IN ({', '.join('?' for _ in query.states)})")
            args.extend(query.states)
        if query.job_id is not None:
            where.append("job_id = ?")
            args.append(query.job_id)
        if query.since is not None:
            where.append("(ended_at IS NULL OR ended_at >= ?)")
            args.append(query.since)
        if query.until is not None:
            where.append("COALESCE(started_at, ended_at) < ?")
            args.append(query.until)
        sql = (
            f"SELECT {', '.join(ACCOUNTING_COLUMNS)} FROM accounting"
            + (f" WHERE {' AND '.join(where)}" if where else "")
            + " ORDER BY COALESCE(ended_at, started_at) DESC, task_id DESC LIMIT ?"
        )
        with self._lock:
            rows = self._db.execute(sql, (*args, query.limit)).fetchall()
        return [dict(zip(ACCOUNTING_COLUMNS, r, strict=True)) for r in rows]

    def purge(self, job_ids: Sequence[int], before: float) -> int:
        """Delete ``job_ids`` (jobs the core forgot, with their kept output) and every accounting row that ended before
        ``before``; returns how many accounting rows went."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("DELETE FROM jobs WHERE id = ?", [(i,) for i in job_ids])
                self._db.executemany("DELETE FROM tasks WHERE job_id = ?", [(i,) for i in job_ids])
                self._db.executemany("DELETE FROM service_jobs WHERE job_id = ?", [(i,) for i in job_ids])
                self._db.executemany("DELETE FROM service_tasks WHERE job_id = ?", [(i,) for i in job_ids])
                self._db.executemany("DELETE FROM log_tails WHERE job_id = ?", [(i,) for i in job_ids])
                n = self._db.execute("DELETE FROM accounting WHERE ended_at < ?", (before,)).rowcount
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return int(n)

    # --- service jobs' service tasks (frameworks/batch/warm.py) ------------------------------------

    def add_service(self, job_id: int, token: str, inputs: Sequence[str]) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("INSERT OR REPLACE INTO service_jobs (job_id, token) VALUES (?, ?)", (job_id, token))
                self._db.executemany(
                    "INSERT OR REPLACE INTO service_tasks (job_id, idx, input, state) VALUES (?, ?, ?, 'PENDING')",
                    [(job_id, i, text) for i, text in enumerate(inputs)],
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def update_service_tasks(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """``rows``: (state, failures, sends, result, sent_at, ended_at, job_id, idx)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "UPDATE service_tasks SET state = ?, failures = ?, sends = ?, result = ?, sent_at = ?, ended_at = ? "
                    "WHERE job_id = ? AND idx = ?",
                    rows,
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    async def aupdate_service_tasks(self, rows: Sequence[tuple[Any, ...]]) -> None:
        await asyncio.get_running_loop().run_in_executor(self._writer, self.update_service_tasks, rows)

    def load_service(self, job_id: int) -> tuple[str, list[tuple[Any, ...]]] | None:
        """(token, [(idx, input, state, failures, sends, result, sent_at, ended_at), ...]) of a
        service job (None: no such job)."""
        with self._lock:
            row = self._db.execute("SELECT token FROM service_jobs WHERE job_id = ?", (job_id,)).fetchone()
            if row is None:
                return None
            tasks = self._db.execute(
                "SELECT idx, input, state, failures, sends, result, sent_at, ended_at FROM service_tasks "
                "WHERE job_id = ? ORDER BY idx",
                (job_id,),
            ).fetchall()
        return str(row[0]), tasks

    def service_counts(self, job_id: int) -> dict[str, int]:
        """A service job's service tasks per state."""
        with self._lock:
            rows = self._db.execute(
                "SELECT state, COUNT(*) FROM service_tasks WHERE job_id = ? GROUP BY state", (job_id,)
            ).fetchall()
        return {str(state): int(n) for state, n in rows}

    def service_tasks(
        self, job_id: int, offset: int, limit: int, state: str | None = None
    ) -> list[tuple[Any, ...]]:
        """Service tasks of a job from index ``offset`` on (of one ``state``), as in ``load_service``."""
        sql = (
            "SELECT idx, input, state, failures, sends, result, sent_at, ended_at FROM service_tasks "
            "WHERE job_id = ? AND idx >= ?" + (" AND state = ?" if state else "") + " ORDER BY idx LIMIT ?"
        )
        args: tuple[Any, ...] = (job_id, offset, state, limit) if state else (job_id, offset, limit)
        with self._lock:
            return list(self._db.execute(sql, args).fetchall())

    def save_tails(self, job_id: int, task_id: str, tails: Mapping[str, KeptTail]) -> None:
        """Keep the last bytes of an attempt's streams (``frameworks/batch/logtail.py``), one
        transaction for all of them."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO log_tails (task_id, stream, job_id, start, data) VALUES (?, ?, ?, ?, ?)",
                    [(task_id, stream, job_id, t.start, t.data) for stream, t in tails.items()],
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def tail(self, task_id: str, stream: str) -> KeptTail | None:
        with self._lock:
            row = self._db.execute(
                "SELECT start, data FROM log_tails WHERE task_id = ? AND stream = ?", (task_id, stream)
            ).fetchone()
        return None if row is None else KeptTail(int(row[0]), bytes(row[1]))

    async def asave_tails(self, job_id: int, task_id: str, tails: Mapping[str, KeptTail]) -> None:
        await asyncio.get_running_loop().run_in_executor(self._writer, self.save_tails, job_id, task_id, dict(tails))

    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (key, value),
            )

    # --- async, off the event loop -------------------------------------------------------------

    async def awrite(self, jobs: Sequence[JobRecord]) -> None:
        """Write the changes of ``jobs``: serialised now, on the loop (the records are mutated
        there), committed on the writer thread. If the write fails its tasks stay unsaved."""
        batch = snapshot(jobs)
        if not batch.jobs:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(self._writer, self.write_batch, batch)
        except BaseException:
            # Failed, or cancelled (perhaps before its turn on the writer thread): the next
            # flush writes these tasks again (a repeat of a write that did land is harmless).
            batch.give_back()
            raise
