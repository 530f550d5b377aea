"""The channel's frames and the worker library (a real subprocess for the shell form)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgpack
import pytest

from frameworks.service import wire
from frameworks.service.worker import Task, agora_service, serve


def test_frames_round_trip() -> None:
    assert wire.decode(wire.encode_hello("j1-0-0", "tok")) == wire.Hello(wire.VERSION, "j1-0-0", "tok")
    assert wire.decode(wire.encode_tasks([(0, "a"), (1, "")])) == wire.Tasks(((0, "a"), (1, "")))
    assert wire.decode(wire.encode_results([(0, True, "A"), (1, False, "no")])) == wire.Results(
        ((0, True, "A"), (1, False, "no"))
    )
    assert wire.decode(wire.STOP_FRAME) == wire.Stop()


@pytest.mark.parametrize(
    ("frame", "error"),
    [
        (b"\xc1", "not msgpack"),
        (msgpack.packb({"a": 1}), "expected an array whose first item names the message"),
        (msgpack.packb(["results", [[0, "yes", "x"]]]), "results: expected [seq, ok, text]"),
        (msgpack.packb(["tasks", [[0]]]), "tasks: expected [seq, input]"),
        (msgpack.packb(["hello", "1", "i", "t"]), "hello: expected"),
        (msgpack.packb(["launch", 1]), "unknown message 'launch' with 1 item(s)"),
    ],
)
def test_bad_frames_are_named(frame: bytes, error: str) -> None:
    with pytest.raises(wire.WireError, match=error.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        wire.decode(frame)


def test_output_lines_and_line_problems() -> None:
    assert wire.parse_output("42") == (True, "42")
    assert wire.parse_output("::error:: division by zero") == (False, "division by zero")
    assert wire.parse_output("::error::") == (False, "the task failed")
    assert wire.line_problem("a\nb") == "contains a line break"
    assert wire.line_problem("a\x00") == "contains a NUL byte"
    assert wire.line_problem("fine") is None


def test_task_answers() -> None:
    t = Task("x")
    t.done(3)
    assert t._out == "3"
    with pytest.raises(RuntimeError, match="already answered"):
        t.fail("late")
    t = Task("x")
    t.done("two\nlines")
    assert t._out == "::error:: the result contains a line break; a result is one line of text"
    t = Task("x")
    t.fail("bad\n input")
    assert t._out == "::error:: bad input"


def test_agora_service_answers_each_task_in_order(tmp_path: Path) -> None:
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    os.write(w_in, b"1\n2\nboom\n3")  # the last line is finished by the next write
    os.write(w_in, b"\n")
    os.close(w_in)

    def square(x: str) -> str:
        return str(int(x) ** 2)

    for task in agora_service(r_in, w_out):
        try:
            task.done(square(task.input))
        except ValueError as exc:
            task.fail(exc)
    os.close(w_out)
    out = os.read(r_out, 1 << 16).decode().splitlines()
    assert out == ["1", "4", "::error:: invalid literal for int() with base 10: 'boom'", "9"]
    os.close(r_in)
    os.close(r_out)
    assert serve  # the decorated form is exercised by the subprocess test below


def test_the_decorated_form_keeps_prints_out_of_the_results(tmp_path: Path) -> None:
    script = tmp_path / "w.py"
    script.write_text(
        "from frameworks.service import service\n"
        "@service\n"
        "def half(x: str) -> str:\n"
        "    print('noise on stdout')\n"
        "    return str(10 // int(x))\n"
        "if __name__ == '__main__':\n"
        "    half.serve()\n"
    )
    p = subprocess.run(
        [sys.executable, str(script)], input=b"2\n0\n5\n", capture_output=True, timeout=30, check=True
    )
    assert p.stdout.decode().splitlines() == ["5", "::error:: ZeroDivisionError: integer division or modulo by zero", "2"]
    assert p.stderr.decode().count("noise on stdout") == 3
