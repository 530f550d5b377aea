"""The elastic framework's durable state: one JSON file per job plus ``meta.json`` (framework id,
next job id) in the work dir, each written atomically (temporary file, fsync, ``os.replace``,
fsync of the directory) so a crash leaves the old or the new version, never half of one."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from frameworks.elastic.checkpoint import write_atomic

log = logging.getLogger(__name__)


class StoreError(ValueError):
    """A state file that cannot be read; names the file."""


class JobStore:
    def __init__(self, work_dir: Path) -> None:
        self.root = Path(work_dir)
        self.jobs_dir = self.root / "jobs"
        self.meta_path = self.root / "meta.json"

    def load_meta(self) -> dict[str, Any]:
        if not self.meta_path.exists():
            return {}
        return self._read(self.meta_path)

    def save_meta(self, meta: dict[str, Any]) -> None:
        write_atomic(self.meta_path, json.dumps(meta, sort_keys=True).encode())

    def save_job(self, record: dict[str, Any]) -> None:
        write_atomic(
            self.jobs_dir / f"{int(record['job_id'])}.json", json.dumps(record, sort_keys=True).encode()
        )

    def save_jobs(self, records: list[dict[str, Any]]) -> None:
        for r in records:
            self.save_job(r)

    def load_jobs(self) -> list[dict[str, Any]]:
        if not self.jobs_dir.exists():
            return []
        out = []
        for path in sorted(self.jobs_dir.glob("*.json"), key=lambda p: (len(p.stem), p.stem)):
            out.append(self._read(path))
        return out

    def job_dir(self, job_id: int) -> Path:
        return self.jobs_dir / str(job_id)

    @staticmethod
    def _read(path: Path) -> dict[str, Any]:
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError) as e:
            raise StoreError(f"{path}: {e}") from e
        if not isinstance(data, dict):
            raise StoreError(f"{path}: not a JSON object")
        return data
