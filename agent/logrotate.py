"""Rotated task logs: the file layout and the arithmetic both sides share (pure).

A task's ``stdout`` (and ``stderr``) is written by the agent's log writer (``agent/logger.py``)
into its sandbox as a window of at most ``max_files`` files of at most ``max_size`` bytes
(Mesos' ``LogrotateContainerLogger``, Nomad's ``logs { max_files, max_file_size }``)::

    stdout            the newest bytes (always this name: what every tool opens)
    stdout.1          the ones before, up to stdout.<max_files - 1>
    .stdout.logrotate {"base": B, "ino": I}: B is the stream offset of stdout's first byte
                      (how many bytes went to rotated files before it), I its inode

A *stream offset* counts every byte the task wrote to the stream since it started. The current
file holds ``[base, base + size)``; each rotated file ends where the next newer one starts. So a
reader that follows by offset (``/files/read``, ``agora task logs -f``, the web UI's pailer)
keeps its place across rotations, and one that fell behind the window is moved forward to the
oldest byte still kept (the reply's ``offset`` says where its data starts).

A file is rotated when it reaches ``max_size``: writes are split at exactly that size, so every
rotated file is ``max_size`` bytes long.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

__pure__ = True

STREAMS = ("stdout", "stderr")


def state_name(stream: str) -> str:
    return f".{stream}.logrotate"


def rotated_name(stream: str, i: int) -> str:
    return stream if i == 0 else f"{stream}.{i}"


def split_write(size: int, n: int, max_size: int) -> list[tuple[bool, int]]:
    """How ``n`` bytes go to a file holding ``size`` bytes: ``(rotate first?, bytes)`` pieces, no
    file past ``max_size``."""
    out: list[tuple[bool, int]] = []
    while n > 0:
        rotate = size >= max_size
        if rotate:
            size = 0
        take = min(n, max_size - size)
        out.append((rotate, take))
        size += take
        n -= take
    return out


def rotation_renames(stream: str, max_files: int) -> list[tuple[str, str]]:
    """The renames of one rotation, oldest first: ``stdout.{k-1} -> stdout.{k}`` ... ``stdout ->
    stdout.1`` (the rename over the oldest name drops what it held). With one file there is no
    rename: the current file is unlinked."""
    return [(rotated_name(stream, i - 1), rotated_name(stream, i)) for i in range(max_files - 1, 0, -1)]


def state_json(base: int, ino: int) -> bytes:
    return json.dumps({"base": base, "ino": ino}, separators=(",", ":")).encode()


def parse_state(data: bytes) -> tuple[int, int] | None:
    """``(base, ino)`` from a state file, or None when it is not one."""
    try:
        d = json.loads(data)
        base, ino = d["base"], d["ino"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(base, int) or not isinstance(ino, int) or base < 0:
        return None
    return base, ino


@dataclass(frozen=True)
class Segment:
    index: int  # 0: the current file, i: stream.i
    start: int  # stream offset of its first byte
    size: int


def layout(base: int, current_size: int, rotated_sizes: Sequence[int]) -> list[Segment]:
    """The kept files as stream ranges, oldest first. ``rotated_sizes[i]`` is the size of
    ``stream.{i+1}``; the list stops at the first missing file."""
    out = [Segment(0, base, current_size)]
    start = base
    for i, size in enumerate(rotated_sizes, 1):
        start -= size
        if start < 0:
            break
        out.append(Segment(i, start, size))
    return list(reversed(out))


def locate(segments: Sequence[Segment], offset: int, length: int) -> tuple[int, list[tuple[int, int, int]]]:
    """Where a read of ``length`` bytes from stream ``offset`` comes from: ``(the stream offset the
    data really starts at, [(segment index, offset in that file, bytes), ...])``. ``offset`` -1,
    or one at or past the end, reads nothing at the end; one before the oldest kept byte starts
    at the oldest kept byte."""
    end = segments[-1].start + segments[-1].size
    if offset < 0 or offset >= end:
        return end, []
    start = max(offset, segments[0].start)
    pos, left, reads = start, length, []
    for seg in segments:
        if left <= 0:
            break
        if pos >= seg.start + seg.size:
            continue
        within = pos - seg.start
        take = min(left, seg.size - within)
        if take > 0:
            reads.append((seg.index, within, take))
            pos += take
            left -= take
    return start, reads


__all__ = [
    "STREAMS",
    "Segment",
    "layout",
    "locate",
    "parse_state",
    "rotated_name",
    "rotation_renames",
    "split_write",
    "state_json",
    "state_name",
]
