"""The rotated-log arithmetic (agent.logrotate, pure): where writes split, the renames of a
rotation, and where a read by stream offset comes from."""

from __future__ import annotations

from agent.logrotate import Segment, layout, locate, parse_state, rotation_renames, split_write, state_json


def test_writes_split_at_the_size() -> None:
    assert split_write(0, 10, 4) == [(False, 4), (True, 4), (True, 2)]
    assert split_write(3, 1, 4) == [(False, 1)]
    assert split_write(4, 1, 4) == [(True, 1)]
    assert split_write(2, 0, 4) == []
    assert split_write(10, 3, 4) == [(True, 3)]  # a file already past the size (the size was lowered)


def test_rotation_renames_oldest_first() -> None:
    assert rotation_renames("stdout", 3) == [("stdout.1", "stdout.2"), ("stdout", "stdout.1")]
    assert rotation_renames("stderr", 1) == []


def test_state_round_trip_and_garbage() -> None:
    assert parse_state(state_json(123, 456)) == (123, 456)
    assert parse_state(b"{") is None and parse_state(b'{"base": -1, "ino": 2}') is None
    assert parse_state(b'{"base": "1", "ino": 2}') is None and parse_state(b"[]") is None


def test_layout_and_locate() -> None:
    segs = layout(base=20, current_size=3, rotated_sizes=[10, 10, 10])
    # stdout.3 would start at -10: not part of this stream (a leftover), so the window is [0, 23)
    assert segs == [Segment(2, 0, 10), Segment(1, 10, 10), Segment(0, 20, 3)]
    assert locate(segs, -1, 100) == (23, [])
    assert locate(segs, 23, 100) == (23, [])
    assert locate(segs, 5, 3) == (5, [(2, 5, 3)])
    assert locate(segs, 8, 14) == (8, [(2, 8, 2), (1, 0, 10), (0, 0, 2)])
    behind = layout(base=1000, current_size=5, rotated_sizes=[100])
    assert locate(behind, 0, 50) == (900, [(1, 0, 50)])  # moved to the oldest kept byte
    assert locate(layout(0, 0, []), 0, 10) == (0, [])
