"""Reading and following sandbox log files by byte offset, as Mesos' ``/files/read`` tailers do.

Pure: the reader of each stream, the "is it over yet" check, the sleep and the writer are given,
so tests drive it with a fake file and a fake clock. One rule for every follower (``agora task
logs -f``, ``task attach``, ``job logs -f``): read each stream until it has nothing new; once the
thing writing them is over, read them all once more (what it wrote just before it ended) and
stop.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import attrs

__pure__ = True


@attrs.frozen
class Chunk:
    """What one read returned. ``generation`` names the file being read (a batch task's attempt):
    when it changes, the stream starts again at offset 0 of the new file. ``offset``: where the
    data starts when the reader says so (``/files/read`` of a rotated log moves a reader that fell
    behind the kept window forward to the oldest kept byte); None: where it was asked to."""

    data: str
    generation: object = None
    offset: int | None = None


Reader = Callable[[int], Chunk]


@attrs.define
class LineBuffer:
    """Splits data into whole lines, each with ``prefix`` in front; an unfinished line waits for
    its end (or for ``flush``)."""

    prefix: str
    partial: str = ""

    def feed(self, data: str) -> list[str]:
        text = self.partial + data
        lines = text.splitlines(keepends=True)
        if lines and not lines[-1].endswith(("\n", "\r")):
            self.partial = lines.pop()
        else:
            self.partial = ""
        return [self.prefix + line for line in lines]

    def flush(self) -> list[str]:
        if not self.partial:
            return []
        out, self.partial = self.prefix + self.partial + "\n", ""
        return [out]


@attrs.define
class LogStream:
    """One file being followed: raw pass-through when ``prefix`` is None, else prefixed lines;
    ``render`` turns each piece into what is written (``--json``: one JSON object per line)."""

    read: Reader
    prefix: str | None = None
    render: Callable[[str], str] | None = None
    offset: int = 0
    generation: object = None
    skipped: int = 0  # bytes rotated away before they could be read (the reader fell behind)
    buf: LineBuffer = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.buf = LineBuffer(self.prefix or "")

    def poll(self) -> list[str]:
        """Everything new, read until the reader answers empty."""
        return self._rendered(self._poll())

    def _rendered(self, pieces: list[str]) -> list[str]:
        return pieces if self.render is None else [self.render(p) for p in pieces]

    def _poll(self) -> list[str]:
        out: list[str] = []
        while True:
            chunk = self.read(self.offset)
            if chunk.generation is not None and chunk.generation != self.generation:
                first = self.generation is None and self.offset == 0
                self.generation = chunk.generation
                if not first:  # a new file (a new attempt): start it from its beginning
                    out += self._flush()
                    self.offset = 0
                    continue
            if not chunk.data:
                return out
            if chunk.offset is not None and chunk.offset > self.offset:
                out += self._flush()  # what came before the gap ends there
                self.skipped += chunk.offset - self.offset
                self.offset = chunk.offset
            self.offset += len(chunk.data.encode("utf-8"))
            out += [chunk.data] if self.prefix is None else self.buf.feed(chunk.data)

    def flush(self) -> list[str]:
        return self._rendered(self._flush())

    def _flush(self) -> list[str]:
        return self.buf.flush() if self.prefix is not None else []


def follow(
    streams: Sequence[LogStream],
    *,
    keep_following: bool,
    done: Callable[[], bool],
    sleep: Callable[[float], None],
    write: Callable[[str], None],
    poll: float = 0.5,
    done_every: int = 1,
) -> None:
    """Print what ``streams`` hold; with ``keep_following``, keep polling them every ``poll``
    seconds until ``done()``, then drain them one last time and return. ``done()`` is asked on
    the first round and then every ``done_every``-th (for a check dearer than a read)."""
    ended = not keep_following
    rounds = 0
    while True:
        for s in streams:
            for piece in s.poll():
                write(piece)
        if ended:
            for s in streams:
                for piece in s.flush():
                    write(piece)
            return
        if rounds % done_every == 0 and done():
            ended = True  # one more round: what was written just before the end
            continue
        rounds += 1
        sleep(poll)


def json_lines(**tags: object) -> Callable[[str], str]:
    """A ``render`` for ``--json``: each line as ``{**tags, "line": ...}`` on a line of its own."""

    def render(line: str) -> str:
        return json.dumps({**tags, "line": line.rstrip("\r\n")}, sort_keys=True) + "\n"

    return render


def last_lines(text: str, n: int, from_start: bool) -> tuple[str, bool]:
    """The last ``n`` lines of ``text`` (a window ending at the end of a file) and whether that is
    certain: a window that does not start at the file's start may begin mid-line (that line is
    dropped) and must hold more than ``n`` lines to be sure."""
    lines = text.splitlines(keepends=True)
    if not from_start and lines:
        lines = lines[1:]
    enough = from_start or len(lines) >= n
    return "".join(lines[-n:] if n > 0 else []), enough
