"""Sandbox garbage collection (shell; the policy is ``agent.disk.gc_max_age``).

A finished task's sandbox stays readable (``/files``, ``agora job logs``) after its terminal
update was acknowledged for ``--gc-delay`` shortened by how full the work dir's file system is
(``--gc-disk-headroom``, Mesos' ``--gc_delay`` / ``--gc_disk_headroom``), then it is removed. The
finished sandboxes live in memory, oldest first; after a restart ``sweep`` removes sandboxes of
tasks the checkpoint no longer knows whose last change is older than that age. The executor's
and live tasks' sandboxes are never touched.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path


class SandboxGC:
    def __init__(self, root: Path, delay: float) -> None:
        self.root = root
        self.delay = delay  # the longest a finished sandbox stays (an empty disk)
        self._finished: list[tuple[float, str]] = []  # (finished at, sandbox), oldest first
        self.removed = 0

    def schedule(self, sandbox: Path, now: float) -> None:
        heapq.heappush(self._finished, (now, str(sandbox)))

    def due(self, now: float, max_age: float | None = None) -> list[Path]:
        """The sandboxes finished at least ``max_age`` (default: the delay) seconds ago."""
        age = self.delay if max_age is None else max_age
        out: list[Path] = []
        while self._finished and self._finished[0][0] + age <= now:
            out.append(Path(heapq.heappop(self._finished)[1]))
        return out

    def __len__(self) -> int:
        return len(self._finished)

    def remove(self, paths: list[Path]) -> None:
        """Blocking: run in a worker thread."""
        for p in paths:
            if not str(p.resolve()).startswith(str(self.root.resolve()) + os.sep):
                continue
            shutil.rmtree(p, ignore_errors=True)
            self.removed += 1
            with contextlib.suppress(OSError):
                p.parent.rmdir()  # the framework's directory, once empty

    def sweep(self, in_use: Callable[[str, str], bool], now: float | None = None, max_age: float | None = None) -> int:
        """Blocking: remove stale sandboxes not in use (after a restart). Returns how many."""
        wall = time.time() if now is None else now
        age = self.delay if max_age is None else max_age
        n = 0
        if not self.root.is_dir():
            return 0
        for fdir in self.root.iterdir():
            if not fdir.is_dir():
                continue
            for sb in fdir.iterdir():
                try:
                    old = wall - sb.stat().st_mtime > age
                except OSError:
                    continue
                if old and not in_use(fdir.name, sb.name):
                    shutil.rmtree(sb, ignore_errors=True)
                    n += 1
            with contextlib.suppress(OSError):
                fdir.rmdir()
        self.removed += n
        return n
