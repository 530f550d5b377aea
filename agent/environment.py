"""The environment a task (or a custom executor) gets (pure).

Mesos' command-task variables plus Agora equivalents, then the task's own ``CommandInfo``
environment (already validated: names, NUL, ``LD_*``). The agent's own environment is *not*
inherited (no secrets leak into tasks); only ``PATH`` is passed through.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

__pure__ = True

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def task_environment(
    *,
    agent_id: str,
    framework_id: str,
    task_id: str,
    executor_id: str,
    sandbox: str,
    path: str | None,
    extra: Iterable[tuple[str, str]] = (),
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    env: dict[str, str] = {"PATH": path or DEFAULT_PATH, "HOME": sandbox}
    if base:
        env.update(base)
    ids = {
        "SANDBOX": sandbox,
        "DIRECTORY": sandbox,
        "TASK_ID": task_id,
        "FRAMEWORK_ID": framework_id,
        "AGENT_ID": agent_id,
        "EXECUTOR_ID": executor_id,
    }
    for name, value in ids.items():
        env[f"MESOS_{name}"] = value
        env[f"AGORA_{name}"] = value
    env["MESOS_SLAVE_ID"] = agent_id
    for name, value in extra:
        env[name] = value
    return env


_CONTAINERS = uuid.UUID("6d2b5f0e-8a43-4c7e-9a55-2f1d0c3b7e41")


def container_id(agent_id: str, framework_id: str, executor_id: str) -> str:
    """The id of the container an executor (a command task's own, or a custom one) runs in: a
    UUID, as Mesos' are, the same for the same agent, framework and executor (so it survives an
    agent restart and every status of the task carries the same one)."""
    return str(uuid.uuid5(_CONTAINERS, f"{agent_id}/{framework_id}/{executor_id}"))
