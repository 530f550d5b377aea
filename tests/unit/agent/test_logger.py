"""The log writer's streams (agent.logger.Stream) on real files: rotation, a window of one file,
links a task planted in its sandbox are never followed, and a full file system drops output
(saying so once) without stopping the reading."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.logger import Stream

from ...cgroup_env import small_filesystem


def stream(sb: Path, max_size: int, max_files: int) -> Stream:
    dirfd = os.open(sb, os.O_RDONLY | os.O_DIRECTORY)
    r, w = os.pipe()
    os.close(w)
    return Stream("t/f/x", "stdout", dirfd, r, max_size, max_files)


def test_rotation_and_state(tmp_path: Path) -> None:
    s = stream(tmp_path, 10, 3)
    s.feed(b"0123456789abcdefghijKLMNO")
    s.close()
    assert (tmp_path / "stdout.2").read_bytes() == b"0123456789"
    assert (tmp_path / "stdout.1").read_bytes() == b"abcdefghij"
    assert (tmp_path / "stdout").read_bytes() == b"KLMNO"
    assert (tmp_path / ".stdout.logrotate").read_text() == f'{{"base":20,"ino":{(tmp_path / "stdout").stat().st_ino}}}'
    again = stream(tmp_path, 10, 3)  # a new writer taking the stream over continues it
    assert (again.base, again.size) == (20, 5)
    again.feed(b"PQRSTU")
    again.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".stdout.logrotate", "stdout", "stdout.1", "stdout.2"]
    assert (tmp_path / "stdout").read_bytes() == b"U" and (tmp_path / "stdout.2").read_bytes() == b"abcdefghij"


def test_a_window_of_one_file(tmp_path: Path) -> None:
    s = stream(tmp_path, 4, 1)
    s.feed(b"aaaabbbbcc")
    s.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".stdout.logrotate", "stdout"]
    assert (tmp_path / "stdout").read_bytes() == b"cc"


def test_links_planted_by_a_task_are_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    sb = tmp_path / "sb"
    sb.mkdir()
    (sb / "stdout").symlink_to(victim)
    (sb / "stdout.1").symlink_to(victim)
    (sb / ".stdout.logrotate.tmp").symlink_to(victim)
    s = stream(sb, 4, 3)
    s.feed(b"12345678")
    s.close()
    assert victim.read_text() == "precious\n"
    assert not any(p.is_symlink() for p in sb.iterdir() if p.name != "stdout.2")
    assert (sb / "stdout.1").read_bytes() == b"1234" and (sb / "stdout").read_bytes() == b"5678"


def test_a_full_file_system_drops_output_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with small_filesystem(tmp_path / "small", "64k") as sb:
        s = stream(sb, 1 << 20, 2)
        s.feed(b"x" * (256 << 10))
        assert s.dropped > 0
        s.feed(b"y" * 4096)  # still failing: nothing more is said
        err = capsys.readouterr().err
        assert err.count("cannot write its stdout") == 1 and "No space left on device" in err
        os.unlink(sb / "stdout")  # room again
        s.rotate()
        s.feed(b"back\n")
        s.close()
        assert (sb / "stdout").read_bytes() == b"back\n"
        assert "writing its stdout works again" in capsys.readouterr().err
