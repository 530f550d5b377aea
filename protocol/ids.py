"""Identifier generation and validation.

Ids are opaque strings shaped like Mesos' (``<uuid>-0000`` frameworks, ``<uuid>-S0`` agents,
``<prefix>-O12`` offers). Anything a peer names that becomes a path component (task, framework,
executor ids) must pass ``valid_path_id``: ``[A-Za-z0-9._-]{1,200}`` with no leading dot.
"""

from __future__ import annotations

import re
import uuid

_PATH_ID = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9._\-]{0,199}")
_ROLE_BAD = re.compile(r"[\s\x08/\\]")


def new_uuid() -> str:
    return str(uuid.uuid4())


def new_framework_id(master_id: str, seq: int) -> str:
    return f"{master_id}-{seq:04d}"


def new_agent_id(master_id: str, seq: int) -> str:
    return f"{master_id}-S{seq}"


def new_stream_id() -> str:
    return str(uuid.uuid4())


def new_status_uuid() -> bytes:
    """The 16 raw bytes of a status update's uuid (base64 on the Mesos JSON wire)."""
    return uuid.uuid4().bytes


def valid_path_id(value: str) -> bool:
    return bool(_PATH_ID.fullmatch(value)) and value not in {".", ".."}


valid_task_id = valid_path_id


def sandbox_path(framework_id: str, task_id: str, executor_id: str = "") -> str:
    """Where a task's sandbox is under an agent's sandbox root (the path ``/files/*`` knows it
    by): ``<framework>/<task>``, or for a task of a task group run under its executor's id,
    ``<framework>/<executor>/tasks/<task>`` (nested under the executor's, as Mesos nests them)."""
    if executor_id and executor_id != task_id:
        return f"{framework_id}/{executor_id}/tasks/{task_id}"
    return f"{framework_id}/{task_id}"


def role_error(role: str) -> str | None:
    """Why ``role`` is not a valid role name (Mesos docs/roles.md), or None.

    Hierarchical roles use ``/`` as a separator (``eng/ml``); each component must be valid.
    """
    if role == "*":
        return None
    if not role:
        return "role name is empty"
    for part in role.split("/"):
        if part in {"", ".", ".."}:
            return f"invalid role component {part!r} in {role!r}"
        if part.startswith("-"):
            return f"role component {part!r} starts with '-'"
        if _ROLE_BAD.search(part):
            return f"role {role!r} contains whitespace, backspace or backslash"
    return None
