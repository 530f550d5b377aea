"""Suite-wide: after the run, remove the cgroups that agents of this run left behind.

An agent keeps its tasks' cgroups when it stops (its tasks outlive it by design); a test that
then kills those tasks itself leaves empty cgroups under ``<hierarchy>/agora*/agent-*``. They are
removed at the end of the session when empty and more than 5 s old (a cgroup just made for a task
of a concurrent run, which its task joins within milliseconds, is never touched)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest


def _sweep() -> None:
    root = Path("/sys/fs/cgroup")
    if not root.is_dir():
        return
    for base in root.glob("*/agora*/agent-*"):
        with contextlib.suppress(OSError):
            for task in base.iterdir():
                if not task.is_dir():
                    continue
                with contextlib.suppress(OSError):
                    if task.stat().st_mtime < time.time() - 5 and not (task / "cgroup.procs").read_text().strip():
                        task.rmdir()
            with contextlib.suppress(OSError):
                base.rmdir()
            with contextlib.suppress(OSError):
                base.parent.rmdir()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _sweep()
