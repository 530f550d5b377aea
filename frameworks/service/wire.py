"""What flows between a framework and its warm service instances (pure).

Two hops, two formats:

- **The channel** (framework <-> service executor): one WebSocket per instance, binary frames,
  each a msgpack array whose first item names it. The executor opens it and says who it is;
  from then on the framework sends tasks and the executor sends their results back, in the order
  the tasks were sent::

      executor -> framework   ["hello", VERSION, instance_id, token]
      framework -> executor   ["tasks", [[seq, input], ...]]        (seq: the framework's number)
      executor -> framework   ["results", [[seq, ok, text], ...]]  (ok: bool; text: result or error)
      framework -> executor   ["stop"]                              (finish what you have, then end)

- **The worker's pipes** (service executor <-> the user's command): one line of input per task on
  the command's stdin, one line of output per task on its stdout, in order (the shell form:
  ``while read x; do ...; echo "$y"; done``). An output line that starts with ``::error::``
  fails that task with the rest of the line as its message. The worker library
  (``frameworks.service.worker``) speaks exactly this.

Inputs and results are text without newlines or NUL bytes (``line_problem`` says why one is not).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import msgpack

__pure__ = True

VERSION = 1
ERROR_PREFIX = "::error::"
MAX_FRAME = 64 * 1024 * 1024  # a frame of tasks or results (the channel's message limit)
MAX_LINE = 1024 * 1024  # one input or result


class WireError(ValueError):
    """A frame that is not one of the channel's messages."""


@attrs.frozen
class Hello:
    version: int
    instance_id: str
    token: str


@attrs.frozen
class Tasks:
    items: tuple[tuple[int, str], ...]


@attrs.frozen
class Results:
    items: tuple[tuple[int, bool, str], ...]


@attrs.frozen
class Stop:
    pass


Message = Hello | Tasks | Results | Stop


def line_problem(text: str) -> str | None:
    """Why ``text`` cannot be one line of the worker's pipes (None: it can)."""
    if "\n" in text or "\r" in text:
        return "contains a line break"
    if "\x00" in text:
        return "contains a NUL byte"
    if len(text) > MAX_LINE:
        return f"is longer than {MAX_LINE} characters"
    return None


def encode_hello(instance_id: str, token: str) -> bytes:
    return msgpack.packb(["hello", VERSION, instance_id, token], use_bin_type=True)


def encode_tasks(items: Sequence[tuple[int, str]]) -> bytes:
    return msgpack.packb(["tasks", items], use_bin_type=True)


def encode_results(items: Sequence[tuple[int, bool, str]]) -> bytes:
    return msgpack.packb(["results", items], use_bin_type=True)


STOP_FRAME = msgpack.packb(["stop"], use_bin_type=True)


def decode(frame: bytes) -> Message:
    """One channel frame; ``WireError`` naming what is wrong otherwise."""
    try:
        msg: Any = msgpack.unpackb(frame, raw=False, use_list=True)
    except (ValueError, msgpack.UnpackException) as exc:
        raise WireError(f"not msgpack: {exc}") from exc
    if not isinstance(msg, list) or not msg or not isinstance(msg[0], str):
        raise WireError("expected an array whose first item names the message")
    kind = msg[0]
    if kind == "results" and len(msg) == 2 and isinstance(msg[1], list):
        out = []
        for item in msg[1]:
            if (
                not isinstance(item, list) or len(item) != 3 or type(item[0]) is not int
                or type(item[1]) is not bool or not isinstance(item[2], str)
            ):
                raise WireError(f"results: expected [seq, ok, text], got {item!r}"[:200])
            out.append((item[0], item[1], item[2]))
        return Results(tuple(out))
    if kind == "tasks" and len(msg) == 2 and isinstance(msg[1], list):
        tasks = []
        for item in msg[1]:
            if not isinstance(item, list) or len(item) != 2 or type(item[0]) is not int or not isinstance(item[1], str):
                raise WireError(f"tasks: expected [seq, input], got {item!r}"[:200])
            tasks.append((item[0], item[1]))
        return Tasks(tuple(tasks))
    if kind == "hello" and len(msg) == 4:
        _, version, instance_id, token = msg
        if type(version) is not int or not isinstance(instance_id, str) or not isinstance(token, str):
            raise WireError("hello: expected [\"hello\", version, instance_id, token]")
        return Hello(version, instance_id, token)
    if kind == "stop" and len(msg) == 1:
        return Stop()
    raise WireError(f"unknown message {kind!r} with {len(msg) - 1} item(s)"[:200])


def parse_output(line: str) -> tuple[bool, str]:
    """A worker's output line as (ok, text): ``::error:: message`` fails the task."""
    if line.startswith(ERROR_PREFIX):
        return False, line[len(ERROR_PREFIX):].strip() or "the task failed"
    return True, line
