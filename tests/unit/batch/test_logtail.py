"""The kept tail of an attempt's output (``frameworks/batch/logtail.py``): exact windows, reads by
stream offset as ``/files/read`` answers them, UTF-8 boundaries, the note, ``--log-tail`` sizes."""

from __future__ import annotations

import pytest

from frameworks.batch.logtail import KeptTail, kept, note, parse_keep, read, window_start


def test_the_window_is_the_last_keep_bytes() -> None:
    assert window_start(100_000, 65_536) == 34_464
    assert window_start(10, 65_536) == 0
    assert window_start(0, 0) == 0


def test_reads_by_stream_offset() -> None:
    t = KeptTail(1000, b"abcdefghij")
    assert t.size == 1010
    assert read(t, 0, 4) == (1000, b"abcd")  # before the window: moved forward to its start
    assert read(t, 1004, 100) == (1004, b"efghij")
    assert read(t, 1010, 10) == (1010, b"")  # the end
    assert read(t, 5000, 10) == (1010, b"")
    assert read(t, -1, 10) == (1010, b"")  # offset -1: where the end is


def test_cuts_fall_on_character_boundaries() -> None:
    text = "é" * 10  # two bytes each
    data = text.encode()
    t = kept(1001, data[1:])  # the window began inside a character: it starts at the next one
    assert (t.start, t.data) == (1002, data[2:])
    at, piece = read(t, 1002, 3)  # 3 bytes would split the second character
    assert (at, piece) == (1002, "é".encode())
    at, piece = read(t, 1003, 4)  # from inside a character: the next whole one
    assert (at, piece.decode()) == (1004, "éé")
    assert kept(0, b"\x80abc") == KeptTail(0, b"\x80abc")  # the stream's first byte is kept as it is


def test_the_note_says_what_is_shown() -> None:
    assert note("stdout", KeptTail(34_464, b"x" * 65_536)) == (
        "its sandbox is gone; the last 64KB of its stdout (bytes 34464-100000), as the batch service kept it"
    )
    assert note("stderr", KeptTail(0, b"x" * 12)) == "its sandbox is gone; all 12 bytes of its stderr, as the batch service kept it"


@pytest.mark.parametrize(("text", "n"), [("64KB", 65_536), ("1MB", 1 << 20), ("0", 0), ("4096", 4096), ("1.5K", 1536)])
def test_log_tail_sizes(text: str, n: int) -> None:
    assert parse_keep(text) == n


@pytest.mark.parametrize(("text", "why"), [("5XB", "not a size: '5XB'"), ("-1", "give 0 to 16MB"), ("17MB", "give 0 to 16MB")])
def test_bad_log_tail_sizes(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_keep(text)
