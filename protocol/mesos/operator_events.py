"""The Mesos v1 master operator API's event stream (``SUBSCRIBE``):
``OperatorEvent`` (Mesos' ``master.Event``) with its bodies.
"""

from __future__ import annotations

import enum

import attrs

from protocol.mesos.common import FrameworkInfo
from protocol.mesos.operator import AgentRecord, FrameworkRecord, GetState
from protocol.mesos.tasks import Task, TaskStatus
from protocol.mesos_common import AgentID, FrameworkID
from protocol.task_states import TaskState

__pure__ = True


# --- operator API: event stream (SUBSCRIBE) -------------------------------------------------


class OperatorEventType(enum.Enum):
    UNKNOWN = "UNKNOWN"
    SUBSCRIBED = "SUBSCRIBED"
    TASK_ADDED = "TASK_ADDED"
    TASK_UPDATED = "TASK_UPDATED"
    AGENT_ADDED = "AGENT_ADDED"
    AGENT_REMOVED = "AGENT_REMOVED"
    FRAMEWORK_ADDED = "FRAMEWORK_ADDED"
    FRAMEWORK_UPDATED = "FRAMEWORK_UPDATED"
    FRAMEWORK_REMOVED = "FRAMEWORK_REMOVED"
    HEARTBEAT = "HEARTBEAT"


@attrs.frozen
class OperatorSubscribed:
    """``master.Event.Subscribed``: the whole state, then changes as events."""

    get_state: GetState | None = None
    heartbeat_interval_seconds: float | None = None


@attrs.frozen
class TaskAdded:
    task: Task


@attrs.frozen
class TaskUpdated:
    """``status``: the task's latest status; ``state``: its latest state (as the master holds it)."""

    framework_id: FrameworkID
    status: TaskStatus
    state: TaskState


@attrs.frozen
class AgentAdded:
    agent: AgentRecord


@attrs.frozen
class AgentRemoved:
    agent_id: AgentID


@attrs.frozen
class FrameworkAdded:
    framework: FrameworkRecord


@attrs.frozen
class FrameworkUpdated:
    framework: FrameworkRecord


@attrs.frozen
class FrameworkRemoved:
    framework_info: FrameworkInfo


@attrs.frozen
class OperatorEvent:
    """An event of the operator stream (``master.Event``): ``{"type": T, "<t lower>": {...}}``;
    HEARTBEAT has no body."""

    type: OperatorEventType | None = None
    subscribed: OperatorSubscribed | None = None
    task_added: TaskAdded | None = None
    task_updated: TaskUpdated | None = None
    agent_added: AgentAdded | None = None
    agent_removed: AgentRemoved | None = None
    framework_added: FrameworkAdded | None = None
    framework_updated: FrameworkUpdated | None = None
    framework_removed: FrameworkRemoved | None = None

    @classmethod
    def make_subscribed(cls, get_state: GetState, heartbeat_interval_seconds: float) -> OperatorEvent:
        return cls(type=OperatorEventType.SUBSCRIBED, subscribed=OperatorSubscribed(get_state, heartbeat_interval_seconds))

    @classmethod
    def make_task_added(cls, task: Task) -> OperatorEvent:
        return cls(type=OperatorEventType.TASK_ADDED, task_added=TaskAdded(task))

    @classmethod
    def make_task_updated(cls, framework_id: FrameworkID, status: TaskStatus, state: TaskState) -> OperatorEvent:
        return cls(type=OperatorEventType.TASK_UPDATED, task_updated=TaskUpdated(framework_id, status, state))

    @classmethod
    def make_agent_added(cls, agent: AgentRecord) -> OperatorEvent:
        return cls(type=OperatorEventType.AGENT_ADDED, agent_added=AgentAdded(agent))

    @classmethod
    def make_agent_removed(cls, agent_id: AgentID) -> OperatorEvent:
        return cls(type=OperatorEventType.AGENT_REMOVED, agent_removed=AgentRemoved(agent_id))

    @classmethod
    def make_framework_added(cls, framework: FrameworkRecord) -> OperatorEvent:
        return cls(type=OperatorEventType.FRAMEWORK_ADDED, framework_added=FrameworkAdded(framework))

    @classmethod
    def make_framework_updated(cls, framework: FrameworkRecord) -> OperatorEvent:
        return cls(type=OperatorEventType.FRAMEWORK_UPDATED, framework_updated=FrameworkUpdated(framework))

    @classmethod
    def make_framework_removed(cls, framework_info: FrameworkInfo) -> OperatorEvent:
        return cls(type=OperatorEventType.FRAMEWORK_REMOVED, framework_removed=FrameworkRemoved(framework_info))

    @classmethod
    def make_heartbeat(cls) -> OperatorEvent:
        return cls(type=OperatorEventType.HEARTBEAT)
