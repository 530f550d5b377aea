"""The cgroup v2 isolator against a fake cgroup tree (this machine has no delegated cgroup v2; the
/proc monitor is exercised with real processes in test_launcher.py)."""

from __future__ import annotations

from pathlib import Path

from agent.isolation import MIN_MEMORY, CgroupV2Isolator


def test_cgroup_v2_limits_usage_and_oom(tmp_path: Path) -> None:
    iso = CgroupV2Isolator(tmp_path)
    (tmp_path / "tasks").mkdir()
    d = iso.prepare("t/f1/a", 64 * 1024 * 1024, 0.5)
    assert d == tmp_path / "tasks" / "t.f1.a"
    assert (d / "memory.max").read_text() == str(64 * 1024 * 1024)
    assert (d / "cpu.max").read_text() == "50000 100000"
    iso.attach("t/f1/a", 123)
    (d / "memory.current").write_text("1048576\n")
    (d / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\n")
    usage, breaches = iso.sample()
    assert usage["t/f1/a"].rss == 1048576 and usage["t/f1/a"].cpu_seconds == 2.5
    assert breaches == []
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    _, breaches = iso.sample()
    assert [b.key for b in breaches] == ["t/f1/a"] and "OOM" in breaches[0].message
    for f in d.iterdir():
        f.unlink()
    iso.release("t/f1/a")
    assert not d.exists()


def test_tiny_limits_are_raised_to_the_minimum(tmp_path: Path) -> None:
    iso = CgroupV2Isolator(tmp_path)
    (tmp_path / "tasks").mkdir()
    d = iso.prepare("t/f/b", 1024 * 1024, None)
    assert d is not None and (d / "memory.max").read_text() == str(MIN_MEMORY)
    assert not (d / "cpu.max").exists()
