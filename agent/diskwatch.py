"""Disk measurements and the work dir's reserve (shell; the decisions are ``agent.disk``).

``measure`` (blocking, off the event loop, every ``--disk-watch-interval``) takes how full the
work dir's file system is and what every running task's sandbox holds, the way ``du`` counts it
(allocated blocks; hard links once; symbolic links not followed; the walk stays on the sandbox's
file system). ``Reserve`` is a preallocated file (``meta/reserve``) given up when a checkpoint
write finds the file system full and taken again once there is room.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
from collections.abc import Mapping
from pathlib import Path

import attrs

from agent.disk import restore_reserve

log = logging.getLogger(__name__)


def du(path: Path | str) -> int:
    """Bytes allocated under ``path`` (``du -s``); 0 if it is gone."""
    total = 0
    seen: set[tuple[int, int]] = set()
    try:
        top = os.lstat(path)
    except OSError:
        return 0
    dev = top.st_dev
    stack = [os.fspath(path)]
    total += top.st_blocks * 512
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st.st_dev != dev:
                    continue
                if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                    ident = (st.st_dev, st.st_ino)
                    if ident in seen:
                        continue
                    seen.add(ident)
                total += st.st_blocks * 512
                if stat.S_ISDIR(st.st_mode):
                    stack.append(e.path)
    return total


@attrs.frozen
class DiskReport:
    used_fraction: float  # of the work dir's file system
    free: int  # bytes available
    sandboxes: dict[str, int]  # task key -> bytes


def fs_usage(path: Path) -> tuple[float, int]:
    """(fraction in use, bytes available) of the file system holding ``path``."""
    st = os.statvfs(path)
    total = st.f_blocks * st.f_frsize
    avail = st.f_bavail * st.f_frsize
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    return (used / total if total else 0.0), avail


def measure(work_dir: Path, sandboxes: Mapping[str, Path]) -> DiskReport:
    used, free = fs_usage(work_dir)
    return DiskReport(used, free, {key: du(p) for key, p in sandboxes.items()})


class Reserve:
    """``size`` bytes held in ``path`` for the checkpoints' sake (0: none)."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.size = size
        self.released = False

    def ensure(self) -> None:
        """Blocking: take the reserve if it is not held and there is room for it twice over."""
        if self.size <= 0 or self.path.exists():
            return
        try:
            _, free = fs_usage(self.path.parent)
        except OSError:
            return
        if not restore_reserve(free, self.size):
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.posix_fallocate(fd, 0, self.size)
        except OSError as e:  # a file system without fallocate: write it out
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                os.close(fd)
                with contextlib.suppress(OSError):
                    self.path.unlink()
                return
            chunk = b"\0" * (1 << 20)
            for _ in range(self.size // len(chunk)):
                os.write(fd, chunk)
        os.close(fd)
        if self.released:
            log.warning("work dir %s has room again: took back its %d MB reserve for checkpoints",
                        self.path.parent.parent, self.size >> 20)
            self.released = False

    def release(self) -> bool:
        """The file system is full: give the reserve up (once). True if that freed anything."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        self.released = True
        log.error("work dir %s is full: released its %d MB reserve so that checkpoints and status updates "
                  "go on; tasks writing to their sandboxes fail until space is freed",
                  self.path.parent.parent, self.size >> 20)
        return True


__all__ = ["DiskReport", "Reserve", "du", "fs_usage", "measure"]
