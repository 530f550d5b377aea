"""Sandbox garbage collection (delayed removal, sooner the fuller the disk, restart sweep, never
outside the root), the disk decisions (agent.disk, exact) and du on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.disk import gc_max_age, quota_message, restore_reserve
from agent.diskwatch import du
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


def test_a_fuller_disk_shortens_the_delay(tmp_path: Path) -> None:
    gc = SandboxGC(tmp_path, delay=100.0)
    a, b = make(tmp_path, "f", "a"), make(tmp_path, "f", "b")
    gc.schedule(a, now=0.0)
    gc.schedule(b, now=50.0)
    assert gc.due(60.0, max_age=gc_max_age(100.0, 0.1, 0.5)) == [a]  # 40 s: a is 60 s old, b 10 s
    assert len(gc) == 1
    assert gc.due(60.0, max_age=gc_max_age(100.0, 0.1, 0.95)) == [b]  # fuller than 1 - headroom: at once
    old = make(tmp_path, "f", "old", age=30)
    assert gc.sweep(lambda f, t: False, max_age=gc_max_age(100.0, 0.1, 0.0)) == 0  # 90 s: kept
    assert gc.sweep(lambda f, t: False, max_age=gc_max_age(100.0, 0.1, 0.8)) == 1  # 10 s: the 30 s old one goes
    assert not old.exists() and a.exists() and b.exists()


def test_disk_decisions() -> None:
    assert gc_max_age(3600.0, 0.1, 0.3) == pytest.approx(3600.0 * 0.6)
    assert gc_max_age(3600.0, 0.1, 0.95) == 0.0
    assert quota_message(10 << 20, 10 << 20) is None and quota_message(5, None) is None
    assert quota_message(12 << 20, 10 << 20) == "Disk limit exceeded: the sandbox uses 12.0 MB of the task's 10.0 MB disk"
    assert restore_reserve(free=128 << 20, reserve=64 << 20) and not restore_reserve(free=100 << 20, reserve=64 << 20)
    assert not restore_reserve(free=1 << 40, reserve=0)


def test_du_counts_allocated_blocks_once(tmp_path: Path) -> None:
    sb = tmp_path / "sb"
    (sb / "d").mkdir(parents=True)
    (sb / "d" / "data").write_bytes(b"x" * (1 << 20))
    os.link(sb / "d" / "data", sb / "again")  # a hard link counts once (as du counts it)
    with open(sb / "sparse", "wb") as f:  # a hole allocates nothing
        f.truncate(100 << 20)
    outside = tmp_path / "big"
    outside.write_bytes(b"y" * (4 << 20))
    (sb / "link").symlink_to(outside)  # not followed
    used = du(sb)
    assert (1 << 20) <= used < (1 << 20) + 64 * 1024
    assert du(tmp_path / "nope") == 0
