"""The output the batch service keeps of each attempt (``--log-tail``, 64KB by default): when an
attempt ends, the last ``keep`` bytes of its stdout and stderr are copied from its agent's sandbox
into the job store, so ``agora job logs`` of an old job still shows how it ended after the agent
has removed the sandbox (``--gc-delay``), and says that it shows a kept tail.

Pure: where the kept window starts, what a read by stream offset returns from it (the same
answer as the agent's ``/files/read``: ``offset`` is where the data starts, moved forward to the
oldest kept byte when asked for less), and the note that says what is shown. Cuts fall on UTF-8
character boundaries, so a reader that counts the bytes of the decoded text keeps its place."""

from __future__ import annotations

import attrs

__pure__ = True

DEFAULT_KEEP = 64 * 1024


@attrs.frozen
class KeptTail:
    """The last bytes of one stream of one attempt: ``data`` are bytes ``start`` .. ``size`` of it."""

    start: int
    data: bytes

    @property
    def size(self) -> int:
        return self.start + len(self.data)


def window_start(size: int, keep: int) -> int:
    """Where the kept tail of a stream of ``size`` bytes starts."""
    return max(0, size - keep)


def _char_start(data: bytes, i: int) -> int:
    """``i`` moved forward past UTF-8 continuation bytes (to the next character's first byte)."""
    while i < len(data) and 0x80 <= data[i] < 0xC0:
        i += 1
    return i


def kept(start: int, data: bytes) -> KeptTail:
    """The tail as read from ``start``, begun at its first whole character."""
    skip = _char_start(data, 0) if start > 0 else 0
    return KeptTail(start + skip, data[skip:])


def read(tail: KeptTail, offset: int, length: int) -> tuple[int, bytes]:
    """``(where the data starts, data)`` for a read of ``length`` bytes at ``offset`` (-1: the
    end, no data): before the kept window it starts at the window, past the end it is empty at
    the end, and a piece ends on a character boundary unless it reaches the end."""
    if offset == -1 or offset >= tail.size:
        return tail.size, b""
    at = max(offset, tail.start) - tail.start
    at = _char_start(tail.data, at)
    end = min(len(tail.data), at + max(0, length))
    if end < len(tail.data):
        cut = end
        while cut > at and 0x80 <= tail.data[cut] < 0xC0:
            cut -= 1
        end = cut if cut > at else end
    return tail.start + at, tail.data[at:end]


def human(n: int) -> str:
    for unit, size in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return f"{n} bytes"


def note(stream: str, tail: KeptTail) -> str:
    """What a reader of a kept tail is told."""
    if tail.start == 0:
        return f"its sandbox is gone; all {human(tail.size)} of its {stream}, as the batch service kept it"
    return (f"its sandbox is gone; the last {human(len(tail.data))} of its {stream} (bytes {tail.start}-{tail.size}),"
            " as the batch service kept it")


_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "M": 1 << 20, "MB": 1 << 20}


def parse_keep(text: str) -> int:
    """``--log-tail``: ``64KB``, ``1MB``, a number of bytes, or ``0`` (keep nothing); at most 16MB."""
    v = text.strip().upper().replace("IB", "B")
    num = v.rstrip("KMB")
    unit = v[len(num):]
    try:
        n = int(float(num) * _UNITS[unit])
    except (KeyError, ValueError):
        raise ValueError(f"not a size: {text!r} (e.g. 64KB, 1MB, 0 to keep nothing)") from None
    if not 0 <= n <= 16 << 20:
        raise ValueError(f"{text!r}: give 0 to 16MB")
    return n
