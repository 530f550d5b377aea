"""Following logs by offset with a fake file, a fake clock and a fake "is it over"."""

from __future__ import annotations

import attrs

from frameworks.cli.follow import Chunk, LineBuffer, LogStream, follow, last_lines


@attrs.define
class FakeFile:
    """A log file read in chunks of at most ``max_read`` bytes; ``generation`` names the attempt."""

    text: str = ""
    max_read: int = 4
    generation: object = None
    reads: int = 0

    def read(self, offset: int) -> Chunk:
        self.reads += 1
        data = self.text.encode()[offset : offset + self.max_read].decode()
        return Chunk(data, self.generation)


@attrs.define
class World:
    """The task writes ``script[i]`` at the i-th sleep and has ended after the last one."""

    files: list[FakeFile]
    script: list[list[str]]
    now: float = 0.0
    sleeps: int = 0
    out: list[str] = attrs.field(factory=list)

    def sleep(self, s: float) -> None:
        self.now += s
        if self.sleeps < len(self.script):
            for f, more in zip(self.files, self.script[self.sleeps], strict=True):
                f.text += more
        self.sleeps += 1

    def done(self) -> bool:
        return self.sleeps >= len(self.script)


def test_reads_everything_without_follow() -> None:
    f = FakeFile("hello\nworld\n")
    w = World([f], [])
    follow([LogStream(f.read)], keep_following=False, done=lambda: 1 / 0 > 0, sleep=w.sleep, write=w.out.append)
    assert "".join(w.out) == "hello\nworld\n" and w.sleeps == 0


def test_follow_until_terminal_then_drain() -> None:
    f = FakeFile("a\n")
    # the last write lands just as the task ends: it must still be printed
    w = World([f], [["b\n"], ["c\nlast"]])
    follow([LogStream(f.read)], keep_following=True, done=w.done, sleep=w.sleep, write=w.out.append, poll=0.5)
    assert "".join(w.out) == "a\nb\nc\nlast"
    assert w.sleeps == 2 and w.now == 1.0


def test_prefixed_streams_interleave_whole_lines() -> None:
    out, err = FakeFile("o1\no2 part", max_read=3), FakeFile("")
    w = World([out, err], [["ial\n", "e1\n"], ["", "e2 no newline"]])
    streams = [LogStream(out.read, prefix="[stdout] "), LogStream(err.read, prefix="[stderr] ")]
    follow(streams, keep_following=True, done=w.done, sleep=w.sleep, write=w.out.append)
    assert w.out == [
        "[stdout] o1\n",
        "[stdout] o2 partial\n",
        "[stderr] e1\n",
        "[stderr] e2 no newline\n",  # flushed at the end
    ]


def test_a_new_attempt_starts_at_the_beginning_of_its_file() -> None:
    f = FakeFile("try 0 output\n", generation=0)
    s = LogStream(f.read, prefix="[3] ")
    assert s.poll() == ["[3] try 0 output\n"]
    f.text, f.generation = "try 1\n", 1  # a retry: a new, shorter file
    assert s.poll() == ["[3] try 1\n"]
    f.text += "more\n"
    assert s.poll() == ["[3] more\n"]
    # a reader that cannot tell (task not started) keeps the stream where it is
    s2 = LogStream(lambda _o: Chunk(""), prefix="")
    assert s2.poll() == [] and s2.offset == 0


def test_offsets_count_bytes_not_characters() -> None:
    f = FakeFile("é\nü\n", max_read=3)
    s = LogStream(f.read)
    assert "".join(s.poll()) == "é\nü\n" and s.offset == len("é\nü\n".encode())


def test_line_buffer() -> None:
    b = LineBuffer("> ")
    assert b.feed("a\nb") == ["> a\n"]
    assert b.feed("c\r\nd\n") == ["> bc\r\n", "> d\n"]
    assert b.flush() == []


def test_last_lines() -> None:
    assert last_lines("a\nb\nc\n", 2, from_start=True) == ("b\nc\n", True)
    assert last_lines("a\nb\n", 5, from_start=True) == ("a\nb\n", True)
    # a window in the middle of a file: its first line may be cut, and it must hold n lines
    assert last_lines("xa\nb\nc\n", 2, from_start=False) == ("b\nc\n", True)
    assert last_lines("xa\nb\n", 2, from_start=False) == ("b\n", False)
    assert last_lines("a\n", 0, from_start=True) == ("", True)


def test_json_lines() -> None:
    import json

    f = FakeFile("a\nb")
    s = LogStream(f.read, prefix="", render=lambda line: json.dumps({"task": "t", "line": line.rstrip("\n")}) + "\n")
    assert s.poll() == ['{"task": "t", "line": "a"}\n']
    assert s.flush() == ['{"task": "t", "line": "b"}\n']


def test_done_asked_every_nth_round() -> None:
    f = FakeFile("a\n")
    w = World([f], [["b\n"], [""], [""], [""], ["c\n"]])
    asks: list[int] = []

    def done() -> bool:
        asks.append(w.sleeps)
        return w.done()

    follow([LogStream(f.read)], keep_following=True, done=done, sleep=w.sleep, write=w.out.append, done_every=3)
    # asked on the first round, then every third: the reads go on between asks
    assert asks == [0, 3, 6] and w.sleeps == 6
    assert "".join(w.out) == "a\nb\nc\n"


@attrs.define
class RotatedFile:
    """A rotated log read in stream offsets: only the last ``keep`` bytes are kept, and a read
    before them starts at the oldest kept byte (as ``/files/read`` answers)."""

    text: str = ""
    keep: int = 8
    max_read: int = 4

    def read(self, offset: int) -> Chunk:
        oldest = max(0, len(self.text) - self.keep)
        start = max(offset, oldest)
        return Chunk(self.text[start : start + self.max_read], offset=start)


def test_a_follower_behind_the_rotated_window_jumps_to_the_oldest_kept_byte() -> None:
    f = RotatedFile("line1\nline2\n")
    s = LogStream(f.read, prefix="[t] ")
    assert s.poll() == ["[t] 1\n", "[t] line2\n"]  # 4 bytes were rotated away: what is left of that line
    assert (s.offset, s.skipped) == (12, 4)
    f.text += "line3\nline4\nline5\n"  # the follower falls behind by more than the window again
    assert s.poll() == ["[t] 4\n", "[t] line5\n"]
    assert (s.offset, s.skipped) == (30, 4 + 10)
    raw = LogStream(RotatedFile("abcdefghij", keep=4).read)
    assert raw.poll() == ["ghij"] and raw.offset == 10
