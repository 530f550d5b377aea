"""Sandbox garbage collection (shell).

A finished task's sandbox stays readable (``/files``, ``agora job logs``) for ``delay`` seconds
after its terminal update was acknowledged, then it is removed. Scheduled removals live in memory;
after a restart ``sweep`` removes sandboxes of tasks the checkpoint no longer knows whose last
change is older than the delay. The executor's and live tasks' sandboxes are never touched.
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
        self.delay = delay
        self._due: list[tuple[float, str]] = []
        self.removed = 0

    def schedule(self, sandbox: Path, now: float) -> None:
        heapq.heappush(self._due, (now + self.delay, str(sandbox)))

    def due(self, now: float) -> list[Path]:
        out: list[Path] = []
        while self._due and self._due[0][0] <= now:
            out.append(Path(heapq.heappop(self._due)[1]))
        return out

    def remove(self, paths: list[Path]) -> None:
        """Blocking: run in a worker thread."""
        for p in paths:
            if not str(p.resolve()).startswith(str(self.root.resolve()) + os.sep):
                continue
            shutil.rmtree(p, ignore_errors=True)
            self.removed += 1
            with contextlib.suppress(OSError):
                p.parent.rmdir()  # the framework's directory, once empty

    def sweep(self, in_use: Callable[[str, str], bool], now: float | None = None) -> int:
        """Blocking: remove stale sandboxes not in use (after a restart). Returns how many."""
        wall = time.time() if now is None else now
        n = 0
        if not self.root.is_dir():
            return 0
        for fdir in self.root.iterdir():
            if not fdir.is_dir():
                continue
            for sb in fdir.iterdir():
                try:
                    old = wall - sb.stat().st_mtime > self.delay
                except OSError:
                    continue
                if old and not in_use(fdir.name, sb.name):
                    shutil.rmtree(sb, ignore_errors=True)
                    n += 1
            with contextlib.suppress(OSError):
                fdir.rmdir()
        self.removed += n
        return n
