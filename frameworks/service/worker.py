"""The worker library: a service instance's side of the work, in Python.

A service job's command runs once per slot and is handed many tasks, one after the other::

    from frameworks.service import agora_service

    for task in agora_service():
        task.done(str(int(task.input) ** 2))   # or task.fail("why"); neither: done with ""

or as a decorated function (an exception fails that task, with its type and message)::

    from frameworks.service import service

    @service
    def square(x: str) -> str:
        return str(int(x) ** 2)

    if __name__ == "__main__":
        square.serve()

Underneath it is the shell form's protocol (``frameworks.service.wire``): one line of input per
task on stdin, one line per result on stdout, ``::error:: message`` for a failure. The library
keeps the real stdout for results and points file descriptor 1 at stderr, so ``print`` (and
anything a C library writes) lands in the instance's stderr log instead of corrupting the
results; stdin is likewise taken over (``/dev/null`` for the task's code). Inputs are read in
large chunks (one read per batch the framework sends); each result is written when its task is
answered.
It runs outside Agora too: ``printf '1\\n2\\n' | python worker.py`` prints ``1`` and ``4``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from frameworks.service.wire import ERROR_PREFIX, line_problem

__all__ = ["Task", "agora_service", "serve", "service"]

CHUNK = 1 << 16


class Task:
    """One task: its ``input`` (a line of text), answered with ``done`` or ``fail``."""

    __slots__ = ("_out", "input")

    def __init__(self, text: str) -> None:
        self.input = text
        self._out: str | None = None

    @property
    def answered(self) -> bool:
        return self._out is not None

    def done(self, result: object = "") -> None:
        """The task succeeded with ``result`` (text of one line; ``str()`` of anything else)."""
        if self._out is not None:
            raise RuntimeError("this task is already answered")
        text = result if isinstance(result, str) else ("" if result is None else str(result))
        problem = line_problem(text)
        if problem is not None:
            self._out = f"{ERROR_PREFIX} the result {problem}; a result is one line of text"
        elif text.startswith(ERROR_PREFIX):
            self._out = f"{ERROR_PREFIX} the result starts with {ERROR_PREFIX}"
        else:
            self._out = text

    def fail(self, message: object) -> None:
        """The task failed with ``message`` (its retries, if any, run it again elsewhere)."""
        if self._out is not None:
            raise RuntimeError("this task is already answered")
        text = " ".join(str(message).split()) or "the task failed"
        self._out = f"{ERROR_PREFIX} {text}"


def _take_fds() -> tuple[int, int]:
    """Private copies of stdin and stdout for the tasks and results; fd 0 becomes /dev/null and
    fd 1 stderr, so the task's own code can neither eat task lines nor write into the results."""
    fd_in, fd_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return fd_in, fd_out


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def agora_service(fd_in: int | None = None, fd_out: int | None = None) -> Iterator[Task]:
    """The tasks sent to this service instance, in order; ends when its input ends (the
    instance is told to stop). Answer each with ``done`` or ``fail`` before taking the next.

    Each result is written as soon as its task is answered (one write per task), so an
    instance that dies loses no answered result, and the task it died on is the one blamed."""
    if fd_in is None or fd_out is None:
        fd_in, fd_out = _take_fds()
    pending = b""
    while True:
        chunk = os.read(fd_in, CHUNK)
        if not chunk:
            return
        data = pending + chunk
        lines = data.split(b"\n")
        pending = lines.pop()
        for raw in lines:
            task = Task(raw.decode("utf-8", "replace"))
            yield task
            _write_all(fd_out, ((task._out if task._out is not None else "") + "\n").encode())


def serve(fn: Callable[[str], Any]) -> None:
    """Run ``fn`` on every task's input: its return value (``str()`` of it; None is "") is the
    result, an exception fails the task with its type and message."""
    for task in agora_service():
        try:
            result = fn(task.input)
        except Exception as exc:  # the task's failure, not the instance's
            task.fail(f"{type(exc).__name__}: {exc}")
        else:
            task.done(result)


F = TypeVar("F", bound=Callable[..., Any])


def service(fn: F) -> F:
    """Mark ``fn`` (input text -> result) as a service; ``fn.serve()`` runs it on the tasks."""
    fn.serve = functools.partial(serve, fn)  # type: ignore[attr-defined]
    return fn
