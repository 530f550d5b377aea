"""View models of the web UI: plain data computed from the operator views, no markup.

Inputs are shaped like the operator endpoints' answers: ``state`` is (a part of) ``/state`` —
``slaves``, ``frameworks``, ``completed_frameworks``, the master's own fields — ``snapshot`` is
``/metrics/snapshot`` and ``offers`` the ``/api/v1/offers`` list. Every function is pure, so the
page builders (``master.webui.pages``, ``master.webui.sandbox``) and their tests need no master.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs

from master.webui.html import RESOURCE_NAMES

__pure__ = True

State = Mapping[str, Any]
TASK_LISTS = ("tasks", "unreachable_tasks", "completed_tasks")


def scalar(d: Mapping[str, Any] | None, name: str) -> float:
    v = (d or {}).get(name, 0.0)
    return float(v) if isinstance(v, int | float) else 0.0


def resource_split(
    total: Mapping[str, Any], allocated: Mapping[str, Any], offered: Mapping[str, Any]
) -> list[tuple[str, float, float, float, float]]:
    """``(name, total, allocated, offered, idle)`` for cpus, mem, disk, gpus; idle is what is
    neither allocated nor offered (never below zero). Offered is never counted as allocated."""
    rows = []
    for name in RESOURCE_NAMES:
        t, a, o = (scalar(d, name) for d in (total, allocated, offered))
        rows.append((name, t, a, o, max(0.0, t - a - o)))
    return rows


def sum_resources(items: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    out = dict.fromkeys(RESOURCE_NAMES, 0.0)
    for res in items:
        for name in RESOURCE_NAMES:
            out[name] += scalar(res, name)
    return out


def all_frameworks(state: State) -> Iterator[tuple[Mapping[str, Any], bool]]:
    """Every framework with whether it is completed (torn down / failed over for good)."""
    for fw in state.get("frameworks", ()):
        yield fw, False
    for fw in state.get("completed_frameworks", ()):
        yield fw, True


def tasks_with_kind(state: State) -> Iterator[tuple[Mapping[str, Any], str]]:
    """Every task with the list it is in: ``tasks``, ``unreachable_tasks`` or ``completed_tasks``."""
    for fw, _ in all_frameworks(state):
        for kind in TASK_LISTS:
            for task in fw.get(kind, ()):
                yield task, kind


def all_tasks(state: State) -> Iterator[Mapping[str, Any]]:
    """Every task the master knows: live, unreachable and completed, of every framework."""
    for task, _ in tasks_with_kind(state):
        yield task


def active_and_completed(state: State) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(active, completed) tasks, each newest update first; unreachable tasks count as active
    (the master still holds their resources' place until they come back or are gone)."""
    live: list[Mapping[str, Any]] = []
    done: list[Mapping[str, Any]] = []
    for task, kind in tasks_with_kind(state):
        (done if kind == "completed_tasks" else live).append(task)
    return sorted(live, key=last_update, reverse=True), sorted(done, key=last_update, reverse=True)


def last_update(task: Mapping[str, Any]) -> float:
    statuses = task.get("statuses") or []
    ts = statuses[-1].get("timestamp") if statuses else None
    return float(ts) if isinstance(ts, int | float) else 0.0


def follow_chunk(data: str, offset: int) -> tuple[str, int]:
    """What the pailer appends from the agent's ``/files/read`` answer (``data`` decoded as UTF-8
    with undecodable bytes replaced, read from byte ``offset``), and the offset to ask from next.
    A character cut at the end of the chunk (a writer mid-character, or the chunk's limit) came
    back as a trailing U+FFFD: it is left out and read again, whole, next time. (Bytes that are
    not UTF-8 in the middle of a chunk are shown as U+FFFD and may shift the offset.)"""
    kept = data.rstrip("\ufffd")
    return kept, offset + len(kept.encode())


def framework_names(state: State) -> dict[str, str]:
    """framework id -> its name (live and completed frameworks), what the pages show for a
    framework (its id on hover)."""
    return {str(fw.get("id", "")): str(fw.get("name", "")) for fw, _ in all_frameworks(state) if fw.get("name")}


def empty_offers(offers: Sequence[Mapping[str, Any]]) -> int:
    """Outstanding offers with nothing left in them: reusable offers (leases) whose tasks use all
    they hold; they offer nothing again until one of those tasks ends."""
    return sum(1 for o in offers if not any(scalar(o.get("resources"), n) for n in RESOURCE_NAMES))


TERMINAL_TASK_STATES = frozenset({
    "TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_LOST", "TASK_ERROR", "TASK_DROPPED", "TASK_GONE",
    "TASK_GONE_BY_OPERATOR",
})


@attrs.frozen
class TaskOutcome:
    """What a task page says about how a task went: its exit code (the agent's ``exit_code``
    label), the last message, when it started running and ended, and for how long it ran."""

    exit_code: str | None
    message: str | None
    started: float | None
    ended: float | None
    duration: float | None  # ended (or now, still running) - started


def task_outcome(task: Mapping[str, Any], now: float | None = None) -> TaskOutcome:
    statuses = [s for s in task.get("statuses") or [] if isinstance(s, Mapping)]
    code = None
    message = None
    for s in statuses:
        for label in s.get("labels") or []:
            if label.get("key") == "exit_code":
                code = str(label.get("value"))
        if s.get("message"):
            message = str(s["message"])
    started = next((float(s["timestamp"]) for s in statuses
                    if s.get("state") == "TASK_RUNNING" and isinstance(s.get("timestamp"), int | float)), None)
    last = statuses[-1] if statuses else {}
    ended = (float(last["timestamp"]) if task.get("state") in TERMINAL_TASK_STATES
             and isinstance(last.get("timestamp"), int | float) and last.get("timestamp") else None)
    until = ended if ended is not None else (now if task.get("state") not in TERMINAL_TASK_STATES else None)
    took = max(0.0, until - started) if started is not None and until is not None else None
    return TaskOutcome(code, message, started, ended, took)


def find_framework(state: State, framework_id: str) -> tuple[Mapping[str, Any], bool] | None:
    for fw, completed in all_frameworks(state):
        if fw.get("id") == framework_id:
            return fw, completed
    return None


def find_agent(state: State, agent_id: str) -> Mapping[str, Any] | None:
    for ag in state.get("slaves", ()):
        if ag.get("id") == agent_id:
            return ag
    return None


def task_states(snapshot: Mapping[str, float]) -> list[tuple[str, int]]:
    """``[("TASK_RUNNING", 3), ...]`` from the ``master/tasks_<state>`` metrics, non-zero first."""
    out = [
        ("TASK_" + key.removeprefix("master/tasks_").upper(), int(v))
        for key, v in snapshot.items()
        if key.startswith("master/tasks_")
    ]
    return sorted(out, key=lambda kv: (kv[1] == 0, kv[0]))


def agent_label(agent: Mapping[str, Any]) -> str:
    """``active``, ``draining``, ``unreachable``, ... as an operator says it."""
    if agent.get("active"):
        drain = (agent.get("drain_info") or {}).get("state")
        if drain:  # DRAIN_AGENT: DRAINING until its tasks ended, then DRAINED
            return str(drain).lower()
        return "deactivated" if agent.get("phase") == "DRAINING" or agent.get("draining") else "active"
    return str(agent.get("phase", "inactive")).lower()


def framework_label(fw: Mapping[str, Any], completed: bool) -> str:
    if completed:
        return "completed"
    if fw.get("active"):
        return "active"
    return "recovered" if fw.get("recovered") else "disconnected"


# --- maintenance ----------------------------------------------------------------------------------


@attrs.frozen
class MaintenanceRow:
    """One agent as the maintenance page shows it: its state in words, whether it is out of
    service (drained or deactivated) and the action the operator may take."""

    agent_id: str
    address: str
    state: str  # "in service", "draining", "drained", "deactivated", "... (unreachable)"
    phase: str
    out_of_service: bool
    live_tasks: int
    allocated: Mapping[str, Any]
    action: str  # "DRAIN_AGENT" or "REACTIVATE_AGENT"
    reason: str = ""  # why it drains, as the operator said (DRAIN_AGENT's Agora ``reason``)
    window: str = ""  # its machine is scheduled for maintenance: when it will be unavailable


def window_text(unavailability: Mapping[str, Any] | None) -> str:
    """A maintenance window (Mesos' ``Unavailability``) in words, UTC."""
    if not unavailability:
        return ""
    start = int((unavailability.get("start") or {}).get("nanoseconds", 0)) / 1e9
    text = "from " + datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%d %H:%M:%S") + " UTC"
    duration = (unavailability.get("duration") or {}).get("nanoseconds")
    return text + (f" for {int(duration) / 1e9:g} s" if duration is not None else "")


def maintenance_rows(state: State) -> list[MaintenanceRow]:
    """Every registered agent, those out of service (draining, or deactivated: not reachable)
    first; ``live_tasks`` counts the master's non-terminal tasks on each."""
    live: dict[str, int] = {}
    for task, kind in tasks_with_kind(state):
        if kind != "completed_tasks":
            aid = str(task.get("slave_id", ""))
            live[aid] = live.get(aid, 0) + 1
    rows = []
    for a in state.get("slaves", ()):
        aid, phase = str(a.get("id", "")), str(a.get("phase", ""))
        drain = str((a.get("drain_info") or {}).get("state") or "").lower()  # draining / drained
        draining = bool(a.get("draining")) or phase == "DRAINING" or bool(drain)
        deactivated = bool(a.get("deactivated")) or not a.get("active")  # a drained agent is too
        if draining:
            words = drain or "deactivated"  # no drain_info: DEACTIVATE_AGENT (no kills)
            words = f"{words} (unreachable)" if phase == "UNREACHABLE" else words
        elif deactivated:
            words = f"deactivated ({phase.lower() or 'inactive'})"
        else:
            words = "in service"
        rows.append(MaintenanceRow(
            agent_id=aid, address=f"{a.get('hostname', '')}:{a.get('port', '')}", state=words, phase=phase,
            out_of_service=draining or deactivated, live_tasks=live.get(aid, 0),
            allocated=a.get("used_resources") or {}, action="REACTIVATE_AGENT" if draining else "DRAIN_AGENT",
            reason=str(a.get("drain_reason") or "") if draining else "",
            window=window_text(a.get("unavailability")),
        ))
    return sorted(rows, key=lambda r: (not r.out_of_service, r.agent_id))


# --- roles as a tree ------------------------------------------------------------------------------


@attrs.frozen
class RoleNode:
    """A role in the hierarchy (``eng/ml/train`` is a child of ``eng/ml``). ``role`` is the
    GET_ROLES row, ``None`` for a parent that only exists through its children; ``allocated``
    and ``offered`` add up the whole subtree (as Mesos' hierarchical quota does)."""

    name: str  # full name
    label: str  # last path segment
    role: Mapping[str, Any] | None
    children: tuple[RoleNode, ...]
    allocated: Mapping[str, float]
    offered: Mapping[str, float]


def role_tree(roles: Sequence[Mapping[str, Any]]) -> list[RoleNode]:
    """The roles (rows with ``name``, ``allocated``, ``offered``...) as a forest, sorted by name.
    ``*`` is a root of its own."""
    rows = {str(r["name"]): r for r in roles}
    names = set(rows)
    for name in list(rows):
        parts = name.split("/")
        names.update("/".join(parts[:i]) for i in range(1, len(parts)))
    kids: dict[str, list[str]] = {}
    roots: list[str] = []
    for name in sorted(names):
        parent = name.rsplit("/", 1)[0] if "/" in name else None
        (kids.setdefault(parent, []) if parent is not None else roots).append(name)

    def build(name: str) -> RoleNode:
        children = tuple(build(c) for c in kids.get(name, []))
        row = rows.get(name)
        own_alloc = sum_resources([row.get("allocated") or {}]) if row else dict.fromkeys(RESOURCE_NAMES, 0.0)
        own_off = sum_resources([row.get("offered") or {}]) if row else dict.fromkeys(RESOURCE_NAMES, 0.0)
        return RoleNode(
            name=name, label=name.rsplit("/", 1)[-1], role=row, children=children,
            allocated=sum_resources([own_alloc, *(c.allocated for c in children)]),
            offered=sum_resources([own_off, *(c.offered for c in children)]),
        )

    return [build(r) for r in roots]
