"""The master's mutable records of frameworks, agents and tasks (owned by ``MasterState``)."""

from __future__ import annotations

from collections import OrderedDict

import attrs

from master.lifecycles import AGENT, FRAMEWORK, AgentPhase, FrameworkPhase
from protocol import mesos
from protocol.resources import Resources
from protocol.task_states import TaskState, check_transition
from protocol.usage import TaskUsage, from_labels

__pure__ = True

EMPTY = Resources()


@attrs.define(eq=False)
class TaskRec:
    framework_id: str
    task_id: str
    agent_id: str
    name: str
    state: TaskState
    resources: Resources
    role: str = "*"
    executor_id: str | None = None
    info: mesos.TaskInfo | None = None
    statuses: list[mesos.TaskStatus] = attrs.field(factory=list)
    status_update_state: TaskState | None = None
    status_update_uuid: bytes | None = None
    acked_uuid: bytes | None = None  # the last status uuid the framework acknowledged
    usage: TaskUsage | None = None  # the agent's last USAGE_REPORT figures for it
    # the framework (not partition-aware) was told TASK_LOST when the agent became unreachable:
    # that was its terminal update, so what the agent reports later is acknowledged on the
    # framework's behalf and not forwarded
    lost_reported: bool = False

    @property
    def latest(self) -> mesos.TaskStatus | None:
        return self.statuses[-1] if self.statuses else None

    def move(self, new: TaskState) -> None:
        """A change the master decides, or a reported one it has checked: through the task table
        (``protocol.task_states``); an illegal move raises (a bug)."""
        check_transition(self.state, new)
        self.state = new

    def resync(self, reported: TaskState) -> None:
        """A re-registering agent's own (non-terminal) state for the task replaces the master's,
        whatever it was (Mesos' merge: the agent runs the task; the table does not apply)."""
        self.state = reported

    def current_usage(self) -> TaskUsage | None:
        """What it uses (live, from the agent's reports) or used (its terminal status's labels,
        the agent's final figures, win over the last report)."""
        last = self.latest
        if last is not None and last.labels is not None:
            final = from_labels(last.labels.labels, last.timestamp or 0.0)
            if final is not None:
                return final
        return self.usage


@attrs.define(eq=False)
class FrameworkRec:
    framework_id: str
    info: mesos.FrameworkInfo
    phase: FrameworkPhase
    roles: tuple[str, ...]
    capabilities: frozenset[str]
    registered_time: float
    stream_id: str | None = None
    last_stream_id: str | None = None  # the stream before the current one (closed or replaced)
    principal: str | None = None
    reregistered_time: float | None = None
    unregistered_time: float | None = None
    deadline: float | None = None
    tasks: dict[str, TaskRec] = attrs.field(factory=dict)  # live and unreachable
    completed: OrderedDict[str, TaskRec] = attrs.field(factory=OrderedDict)
    # terminal tasks pushed out of ``completed`` while their last update was unacknowledged:
    # kept (bounded) so the framework's late ACKNOWLEDGE still reaches the agent
    awaiting_ack: OrderedDict[str, TaskRec] = attrs.field(factory=OrderedDict)
    executors: dict[tuple[str, str], mesos.ExecutorInfo] = attrs.field(factory=dict)

    def finished(self, task_id: str) -> TaskRec | None:
        """A terminal task the master still remembers (completed or awaiting its ACKNOWLEDGE)."""
        return self.completed.get(task_id) or self.awaiting_ack.get(task_id)

    @property
    def partition_aware(self) -> bool:
        return "PARTITION_AWARE" in self.capabilities

    @property
    def failover_timeout(self) -> float:
        return float(self.info.failover_timeout or 0.0)

    @property
    def connected(self) -> bool:
        return self.phase is FrameworkPhase.SUBSCRIBED and self.stream_id is not None

    def move(self, new: FrameworkPhase) -> None:
        """Through ``master.lifecycles.FRAMEWORK``; an illegal move raises (a bug)."""
        self.phase = FRAMEWORK.move(self.phase, new)


@attrs.frozen
class DrainMode:
    """DRAIN_AGENT's settings (persisted): its tasks are killed with at most ``max_grace`` seconds
    (None: each task's kill policy); ``mark_gone``: the agent is gone once drained."""

    max_grace: float | None = None
    mark_gone: bool = False


@attrs.define(eq=False)
class AgentRec:
    agent_id: str
    hostname: str
    port: int
    total: Resources
    phase: AgentPhase
    registered_time: float
    attributes: tuple[mesos.Attribute, ...] = ()
    ip: str = ""  # the address its connection came from (its machine, for maintenance)
    conn_id: int | None = None
    reregistered_time: float | None = None
    last_seen: float = 0.0
    next_ping: float = 0.0
    ping_seq: int = 0
    unreachable_since: float | None = None
    version: str = ""
    capabilities: tuple[str, ...] = ()
    reservations: Resources = EMPTY  # dynamic reservations (registry)
    slack: Resources = EMPTY
    draining: bool = False
    drain_reason: str | None = None  # the operator's, in memory only (a new master shows none)
    drain: DrainMode | None = None  # set by DRAIN_AGENT (tasks killed); None if only deactivated
    drained: bool = False  # draining, and every task ended with its update acknowledged (persisted)
    drain_pending: set[tuple[str, str]] = attrs.field(factory=set)  # tasks to see end and acknowledged
    tasks: set[tuple[str, str]] = attrs.field(factory=set)  # (framework_id, task_id)
    in_allocator: bool = False

    @property
    def effective_total(self) -> Resources:
        """The agent's resources with the master's dynamic reservations applied."""
        if self.reservations.is_empty():
            return self.total
        return (self.total - self.reservations.unreserve()) + self.reservations

    @property
    def reachable(self) -> bool:
        return self.phase in (AgentPhase.REGISTERED, AgentPhase.DRAINING)

    def move(self, new: AgentPhase) -> None:
        """Through ``master.lifecycles.AGENT``; an illegal move raises (a bug)."""
        self.phase = AGENT.move(self.phase, new)

    def drain_info(self) -> mesos.DrainInfo | None:
        """Mesos' ``DrainInfo`` while DRAIN_AGENT holds (None when in service or only deactivated)."""
        if self.drain is None:
            return None
        grace = self.drain.max_grace
        return mesos.DrainInfo(
            state=mesos.DrainState.DRAINED if self.drained else mesos.DrainState.DRAINING,
            config=mesos.DrainConfig(
                max_grace_period=mesos.DurationInfo(int(grace * 1e9)) if grace is not None else None,
                mark_gone=self.drain.mark_gone,
            ),
        )
