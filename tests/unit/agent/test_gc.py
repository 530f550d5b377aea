"""Sandbox garbage collection: delayed removal, restart sweep, never outside the root."""

from __future__ import annotations

import os
from pathlib import Path

from agent.gc import SandboxGC


def make(root: Path, fid: str, tid: str, age: float = 0.0) -> Path:
    p = root / fid / tid
    p.mkdir(parents=True)
    (p / "stdout").write_text("x")
    if age:
        t = os.stat(p).st_mtime - age
        os.utime(p, (t, t))
    return p


def test_schedule_and_remove_after_delay(tmp_path: Path) -> None:
    gc = SandboxGC(tmp_path, delay=10.0)
    a = make(tmp_path, "f", "a")
    gc.schedule(a, now=100.0)
    assert gc.due(109.9) == []
    due = gc.due(110.0)
    assert due == [a]
    gc.remove(due)
    assert not a.exists() and not (tmp_path / "f").exists()


def test_remove_refuses_paths_outside_the_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    gc = SandboxGC(tmp_path / "root", delay=0.0)
    gc.remove([outside])
    assert outside.exists()


def test_sweep_removes_only_old_unknown_sandboxes(tmp_path: Path) -> None:
    gc = SandboxGC(tmp_path, delay=60.0)
    old_unknown = make(tmp_path, "f", "old", age=3600)
    old_known = make(tmp_path, "f", "live", age=3600)
    fresh = make(tmp_path, "f", "fresh")
    assert gc.sweep(lambda f, t: (f, t) == ("f", "live")) == 1
    assert not old_unknown.exists() and old_known.exists() and fresh.exists()
