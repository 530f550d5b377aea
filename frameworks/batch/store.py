"""The batch framework's persistent job store: one SQLite file (WAL, synchronous=FULL).

Each job is one row: its spec and task records as msgpack. A submission is written before the
job id is returned; task progress is written in batches (one transaction per scheduling tick)
on a worker thread so the event loop never waits on fsync. On start the service loads every
job back, so a restart of the framework loses nothing it acknowledged.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import attrs
import msgpack

from frameworks.batch.core import Attempt, JobRecord, TaskRecord
from frameworks.batch.model import JobState, TaskPhase, spec_from_dict, spec_to_dict

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY,
    state TEXT NOT NULL,
    submitted_at REAL NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def attempt_to_dict(a: Attempt) -> dict[str, Any]:
    return attrs.asdict(a)


def job_to_dict(job: JobRecord) -> dict[str, Any]:
    return {
        "id": job.job_id,
        "spec": spec_to_dict(job.spec),
        "state": job.state.value,
        "submitted_at": job.submitted_at,
        "started_at": job.started_at,
        "ended_at": job.ended_at,
        "reason": job.reason,
        "gang_started": job.gang_started,
        "tasks": [
            {
                "index": t.index,
                "phase": t.phase.value,
                "attempt": t.attempt,
                "failures": t.failures,
                "not_before": t.not_before,
                "revocable": t.revocable,
                "relaunches": t.relaunches,
                "history": [attempt_to_dict(a) for a in t.history],
            }
            for t in job.tasks
        ],
    }


def job_from_dict(d: dict[str, Any]) -> JobRecord:
    job = JobRecord(
        job_id=d["id"],
        spec=spec_from_dict(d["spec"]),
        submitted_at=d["submitted_at"],
        state=JobState(d["state"]),
        started_at=d.get("started_at"),
        ended_at=d.get("ended_at"),
        reason=d.get("reason"),
        gang_started=d.get("gang_started", False),
    )
    for td in d["tasks"]:
        task = TaskRecord(
            job_id=job.job_id,
            index=td["index"],
            phase=TaskPhase(td["phase"]),
            attempt=td["attempt"],
            failures=td["failures"],
            not_before=td["not_before"],
            revocable=td.get("revocable", False),
            relaunches=td.get("relaunches", 0),
        )
        task.history = [Attempt(**a) for a in td["history"]]
        job.tasks.append(task)
    return job


class JobStore:
    """Synchronous SQLite access; the async wrappers run it on one worker thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def write(self, jobs: list[JobRecord]) -> None:
        rows = [
            (j.job_id, j.state.value, j.submitted_at, msgpack.packb(job_to_dict(j), use_bin_type=True))
            for j in jobs
        ]
        self.write_rows(rows)

    def write_rows(self, rows: list[tuple[int, str, float, bytes]]) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT INTO jobs (id, state, submitted_at, data) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT(id) DO UPDATE SET state=excluded.state, data=excluded.data",
                    rows,
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def load(self) -> list[JobRecord]:
        with self._lock:
            rows = self._db.execute("SELECT data FROM jobs ORDER BY id").fetchall()
        return [job_from_dict(msgpack.unpackb(r[0], raw=False)) for r in rows]

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

    async def awrite(self, jobs: list[JobRecord]) -> None:
        # Serialize on the loop (the records are mutated there), write on a thread.
        rows = [
            (j.job_id, j.state.value, j.submitted_at, msgpack.packb(job_to_dict(j), use_bin_type=True))
            for j in jobs
        ]
        await asyncio.to_thread(self.write_rows, rows)
