"""Validation of what a framework asks the master to launch (the parts that do not need the
offer book): task and executor ids safe as path components, exactly one of command/executor,
well-formed resources, environment names, no NUL bytes, no ``LD_*`` variables.

Every check returns an error message (``str``) or ``None``; the core turns a message into a
TASK_ERROR update (REASON_TASK_INVALID), never into an HTTP error.
"""

from __future__ import annotations

import math
import re

from protocol import mesos
from protocol.ids import valid_path_id
from protocol.resources import ResourceError, Resources

__pure__ = True

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DENIED_ENV_PREFIXES: tuple[str, ...] = ("LD_",)
MAX_SCALAR = 1e15


_PARSED: dict[tuple[mesos.Resource, ...], Resources] = {}
_PARSED_MAX = 4096


def parse_resources(resources: tuple[mesos.Resource, ...]) -> Resources:
    """``Resources.from_mesos`` remembered: frameworks send the same few task shapes over and over
    (a bounded memo of immutable values; equal Mesos lists always parse to the same resources).
    Raises what ``from_mesos`` raises; failures are not remembered."""
    try:
        r = _PARSED.get(resources)
    except TypeError:  # an unhashable value smuggled into a field: parse (and fail) normally
        return Resources.from_mesos(resources)
    if r is None:
        r = Resources.from_mesos(resources)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[resources] = r
    return r


def _nul(*values: str | None) -> bool:
    for v in values:  # noqa: SIM110 (a plain loop is faster than any() over a generator)
        if v is not None and "\x00" in v:
            return True
    return False


def check_resources(resources: tuple[mesos.Resource, ...], what: str) -> tuple[Resources | None, str | None]:
    for i, r in enumerate(resources):
        if r.scalar is not None:
            v = r.scalar.value
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                return None, f"{what}: resource {r.name!r} has a non-finite quantity"
            if v <= 0:
                return None, f"{what}: resource {r.name!r} has a non-positive quantity {v}"
            if v > MAX_SCALAR:
                return None, f"{what}: resource {r.name!r} quantity {v} is too large"
        if _nul(r.name):
            return None, f"{what}: resource #{i} has a NUL in its name"
    try:
        return parse_resources(resources), None
    except ResourceError as e:
        return None, f"{what}: invalid resources: {e}"
    except (TypeError, ValueError, OverflowError) as e:
        return None, f"{what}: invalid resources: {e}"


def check_command(cmd: mesos.CommandInfo, what: str) -> str | None:
    if _nul(cmd.value, cmd.user, *cmd.arguments):
        return f"{what}: command contains a NUL byte"
    env = cmd.environment
    if env is not None:
        for var in env.variables:
            name = var.name
            if not ENV_NAME.fullmatch(name):
                return f"{what}: invalid environment variable name {name!r}"
            if name.upper().startswith(DENIED_ENV_PREFIXES):
                return f"{what}: environment variable {name!r} is not allowed"
            if _nul(var.value):
                return f"{what}: environment variable {name!r} contains a NUL byte"
    for uri in cmd.uris:
        if _nul(uri.value, uri.output_file):
            return f"{what}: URI contains a NUL byte"
    return None


def check_executor(ex: mesos.ExecutorInfo) -> str | None:
    eid = ex.executor_id.value
    if not valid_path_id(eid):
        return f"invalid executor ID {eid[:64]!r}: must match [A-Za-z0-9._-]{{1,200}} without a leading dot"
    if ex.command is not None:
        err = check_command(ex.command, f"executor {eid}")
        if err:
            return err
    _, err = check_resources(ex.resources, f"executor {eid}")
    return err


def check_task(task: mesos.TaskInfo, *, in_group: bool = False) -> str | None:
    """Static checks on one TaskInfo (no offer, no state)."""
    tid = task.task_id.value
    if not valid_path_id(tid):
        return f"invalid task ID {tid[:64]!r}: must match [A-Za-z0-9._-]{{1,200}} without a leading dot"
    if _nul(task.name):
        return "task name contains a NUL byte"
    if in_group:
        if task.executor is not None:
            return "a task in a task group must not have its own executor"
    elif (task.command is None) == (task.executor is None):
        return "task must have exactly one of 'command' or 'executor'"
    if task.command is not None:
        err = check_command(task.command, f"task {tid}")
        if err:
            return err
    if task.executor is not None:
        err = check_executor(task.executor)
        if err:
            return err
    res, err = check_resources(task.resources, f"task {tid}")
    if err:
        return err
    assert res is not None
    if res.is_empty() and task.executor is None:
        return f"task {tid} uses no resources"
    return None


def task_resources(task: mesos.TaskInfo) -> Resources:
    """What a (validated) task consumes from the offer: its own resources plus its executor's."""
    r = parse_resources(task.resources)
    if task.executor is not None and task.executor.resources:
        r = r + parse_resources(task.executor.resources)
    return r
