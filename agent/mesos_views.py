"""The agent's state in Mesos' shapes, from the one read model (the tracker, the frameworks it
runs for, the usage book): ``/state`` (``/slave(1)/state``) as Mesos 1.11's agent writes it
(``src/slave/http.cpp``: frameworks with their executors, each executor's ``directory`` and its
tasks), and the v1 agent operator API's ``GET_FRAMEWORKS``, ``GET_EXECUTORS``, ``GET_TASKS`` and
``GET_CONTAINERS`` (``agent/operator_api.py``).

Executors: a command task runs in an executor of its own (id = the task id, as Mesos' command
executor); a task group on the DEFAULT executor and the tasks of a CUSTOM executor are listed under
that executor. A custom or DEFAULT executor's ``directory`` is its sandbox (``<fid>/<eid>``); a
command task's, its task's sandbox. A task run by the DEFAULT executor has its own sandbox nested
under the executor's (``<fid>/<eid>/tasks/<tid>``, as Mesos nests a task group's containers), named
in the task's ``sandbox``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from agent.environment import container_id
from protocol import codec
from protocol.mesos import ExecutorInfo, FrameworkInfo
from protocol.resources import Resources
from protocol.task_states import is_terminal

if TYPE_CHECKING:
    from agent.ports import AgentView
    from agent.tasks import TaskRecord
    from agent.taskspec import TaskSpec

SECRET_FLAGS = frozenset({"token"})


@attrs.frozen
class ExecutorView:
    framework_id: str
    executor_id: str
    info: ExecutorInfo | None  # None: a command task's own executor
    kind: str  # "COMMAND" (the command executor), "DEFAULT" or "CUSTOM"
    directory: str
    tasks: tuple[TaskRecord, ...]


def _legacy(resources: Any) -> dict[str, float | str]:
    try:
        return Resources.from_mesos(resources).to_legacy_dict()
    except (ValueError, TypeError):
        return {}


def executors(svc: AgentView) -> list[ExecutorView]:
    """Every executor with a task the agent still tracks, with its tasks (and those of its tasks
    the agent forgot but keeps in its book of finished work)."""
    groups: dict[tuple[str, str], list[TaskRecord]] = {}
    infos: dict[tuple[str, str], ExecutorInfo | None] = {}
    for t in svc.tracker.tasks.values():
        fid, tid = t.key
        eid = t.spec.executor_id or tid
        groups.setdefault((fid, eid), []).append(t)
        info = t.spec.info.executor if t.spec.info is not None else None
        if info is None and t.spec.executor_id is not None:
            info = t.spec.group_executor
        if info is not None or (fid, eid) not in infos:
            infos[(fid, eid)] = info
    # an executor's finished tasks the tracker forgot are among its completed tasks, oldest first
    return [_view(svc, fid, eid, infos.get((fid, eid)), [*svc.tracker.completed.tasks(fid, eid), *tasks])
            for (fid, eid), tasks in sorted(groups.items())]


def _view(svc: AgentView, fid: str, eid: str, info: ExecutorInfo | None, tasks: list[TaskRecord]) -> ExecutorView:
    first = tasks[0]
    if first.spec.executor_id is None:
        kind, directory = "COMMAND", svc.sandboxes / fid / first.spec.task_id
    elif first.spec.pod:
        kind, directory = "DEFAULT", svc.sandboxes / fid / eid
    else:
        kind, directory = "CUSTOM", svc.sandboxes / fid / eid
    return ExecutorView(fid, eid, info, kind, str(directory), tuple(tasks))


def completed_executors(svc: AgentView, fid: str, live: set[tuple[str, str]]) -> list[ExecutorView]:
    """The framework's executors the agent keeps only in its book of finished work (none of their
    tasks is tracked any more: not in ``live``), oldest first."""
    return [_view(svc, fid, c.executor_id, c.info, list(c.tasks))
            for c in svc.tracker.completed.executors(fid) if (fid, c.executor_id) not in live]


def completed_framework_ids(svc: AgentView, execs: list[ExecutorView]) -> list[str]:
    """Frameworks with finished work in the book and no task the agent still tracks."""
    active = {e.framework_id for e in execs}
    return [fid for fid in svc.tracker.completed.frameworks() if fid not in active]


def forgotten_tasks(svc: AgentView) -> list[TaskRecord]:
    """Every task in the book of finished work, framework by framework, oldest first."""
    return [t for fid in svc.tracker.completed.frameworks() for c in svc.tracker.completed.executors(fid) for t in c.tasks]


def sandbox_path(svc: AgentView, spec: TaskSpec) -> Path:
    """Where the task's sandbox is (``Checkpoint.task_sandbox``'s layout, unchecked: for views)."""
    root = svc.sandboxes / spec.framework_id
    if spec.pod_executor is not None:
        return root / spec.pod_executor / "tasks" / spec.task_id
    return root / spec.task_id


def _container(svc: AgentView, fid: str, eid: str) -> str:
    return container_id(svc.me.agent_id or "", fid, eid)


def task_json(svc: AgentView, t: TaskRecord) -> dict[str, Any]:
    """A task as Mesos' agent ``/state`` writes it (``json(Task)``) plus Agora's ``sandbox``."""
    fid, tid = t.key
    eid = t.spec.executor_id or tid
    info = t.spec.info
    status: dict[str, Any] = {
        "state": t.state.name,
        "timestamp": t.started_at or 0.0,
        "container_status": {"container_id": {"value": _container(svc, fid, eid)}},
    }
    out: dict[str, Any] = {
        "id": tid,
        "name": t.spec.name,
        "framework_id": fid,
        "executor_id": t.spec.executor_id or "",
        "slave_id": svc.me.agent_id or "",
        "state": t.state.name,
        "resources": _legacy(info.resources) if info is not None else {},
        "role": _role(svc.tracker.frameworks.get(fid)),
        "statuses": [status],
        "sandbox": str(sandbox_path(svc, t.spec)),  # Agora addition
    }
    if info is not None:
        if info.labels is not None and info.labels.labels:
            out["labels"] = [codec.to_builtins(lb) for lb in info.labels.labels]
        if info.health_check is not None:
            out["health_check"] = codec.to_builtins(info.health_check)
        if info.discovery is not None:
            out["discovery"] = codec.to_builtins(info.discovery)
    return out


def _role(fi: FrameworkInfo | None) -> str:
    if fi is None:
        return "*"
    roles = fi.effective_roles()
    return roles[0] if roles else "*"


def executor_json(svc: AgentView, ex: ExecutorView) -> dict[str, Any]:
    """An executor as Mesos' agent writes it (``ExecutorWriter``)."""
    live = [t for t in ex.tasks if not is_terminal(t.state)]
    done = [t for t in ex.tasks if is_terminal(t.state)]
    if ex.info is not None:
        name = ex.info.name or ex.executor_id
        resources = _legacy(ex.info.resources)
    else:
        cmd = ex.tasks[0].spec.command
        name = f"Command Executor (Task: {ex.executor_id}) (Command: {' '.join(cmd.argv) if cmd else ''})"
        resources = _legacy(ex.tasks[0].spec.info.resources) if ex.tasks[0].spec.info is not None else {}
    out: dict[str, Any] = {
        "id": ex.executor_id,
        "name": name,
        "framework_id": ex.framework_id,
        "source": ex.info.source if ex.info is not None and ex.info.source else ex.executor_id,
        "container": _container(svc, ex.framework_id, ex.executor_id),
        "directory": ex.directory,
        "resources": resources,
        "role": _role(svc.tracker.frameworks.get(ex.framework_id)),
        "type": "CUSTOM" if ex.kind == "COMMAND" else ex.kind,
        "tasks": [task_json(svc, t) for t in live],
        "queued_tasks": [],
        "completed_tasks": [task_json(svc, t) for t in done],
    }
    if ex.info is not None and ex.info.labels is not None and ex.info.labels.labels:
        out["labels"] = [codec.to_builtins(lb) for lb in ex.info.labels.labels]
    return out


def framework_json(svc: AgentView, fid: str, execs: list[ExecutorView]) -> dict[str, Any]:
    fi = svc.tracker.frameworks.get(fid)
    out: dict[str, Any] = {
        "id": fid,
        "name": fi.name if fi is not None else "",
        "user": fi.user if fi is not None else "",
        "failover_timeout": float(fi.failover_timeout or 0.0) if fi is not None else 0.0,
        "checkpoint": bool(fi.checkpoint) if fi is not None else False,
        "hostname": (fi.hostname or "") if fi is not None else "",
        "capabilities": sorted(c.type.value for c in fi.capabilities if c.type is not None) if fi is not None else [],
        "executors": [executor_json(svc, e) for e in execs if e.framework_id == fid],
        "completed_executors": [executor_json(svc, e) for e in completed_executors(
            svc, fid, {(e.framework_id, e.executor_id) for e in execs})],
    }
    if fi is not None and fi.principal:
        out["principal"] = fi.principal
    if fi is not None and any(c.type is not None and c.type.value == "MULTI_ROLE" for c in fi.capabilities):
        out["roles"] = list(fi.roles)
    else:
        out["role"] = _role(fi)
    return out


def flags(svc: AgentView) -> dict[str, str]:
    """The settings the agent runs with (flags and ``--config`` file merged) by name, values as
    strings, unset ones and secrets left out, and the port it listens on."""
    out: dict[str, str] = {}
    for f in attrs.fields(type(svc.config)):
        if f.name in SECRET_FLAGS:
            continue
        value = getattr(svc.config, f.name)
        if value is None:
            continue
        out[f.name] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    out["port"] = str(svc.me.port)
    return dict(sorted(out.items()))


def state_json(svc: AgentView, additions: dict[str, Any]) -> dict[str, Any]:
    """``/state`` as Mesos' agent writes it, plus Agora's ``additions`` (documented in
    ``agent/README.md``)."""
    execs = executors(svc)
    done = completed_framework_ids(svc, execs)
    fids = sorted({*svc.tracker.frameworks, *(e.framework_id for e in execs)} - set(done))
    resources = svc.me.resources.to_legacy_dict()
    out: dict[str, Any] = {
        "version": svc.me.version,
        "build_date": "",
        "build_time": 0.0,
        "build_user": "",
        "start_time": svc.me.start_time,
        "id": svc.me.agent_id or "",
        "pid": f"slave(1)@{svc.config.advertised_host}:{svc.me.port}",
        "hostname": svc.config.advertised_host,
        "capabilities": ["MULTI_ROLE", "HIERARCHICAL_ROLE", "TASK_KILLING_STATE"],
        "resources": resources,
        "attributes": svc.me.attributes,
        "flags": flags(svc),
        "frameworks": [framework_json(svc, fid, execs) for fid in fids],
        "completed_frameworks": [framework_json(svc, fid, []) for fid in done],
        "reserved_resources": {},
        "reserved_resources_full": {},
        "unreserved_resources": resources,
        "unreserved_resources_full": codec.to_builtins(svc.me.resources.to_mesos()),
        "reserved_resources_allocated": {},
        "unreserved_resources_allocated": _allocated(svc),
    }
    master = link.master if (link := svc.link()) else None
    if master:
        out["master_hostname"] = master.split("://")[-1].rsplit(":", 1)[0].strip("[]")
    out.update(additions)
    return out


def _allocated(svc: AgentView) -> dict[str, float | str]:
    total = Resources()
    for t in svc.tracker.tasks.values():
        if not is_terminal(t.state) and t.spec.info is not None:
            try:
                total = total + Resources.from_mesos(t.spec.info.resources)
            except (ValueError, TypeError):
                continue
    return total.to_legacy_dict()
