"""The operator event feed of the master's pure core (``SUBSCRIBE`` on ``/api/v1``).

The core says what changed as it changes it: where a rule adds a task, moves it to a new state,
admits or loses an agent, or adds, updates or removes a framework, it calls one of the
emitters of ``OperatorFeed`` here (the core's ``feed``), which append a ``PublishOperatorEvent`` effect carrying the Mesos
``master.Event`` (``protocol.mesos.OperatorEvent``). Nothing scans the state to diff it.

Events are built only while an operator stream is open (``OperatorFeed.streams``, kept by the
``OperatorStreamOpened`` / ``OperatorStreamClosed`` facts), so a master nobody watches pays one
set test per change. Every event carries ``seq`` (1, 2, ...): a new subscriber's ``SUBSCRIBED``
snapshot is taken at some ``seq`` (the core's ``operator_seq``) and the shell delivers it only the events after that
(the effects of facts handled before the snapshot may still be queued behind a registry write;
their changes are already in the snapshot).

The record builders (``task_message``, ``agent_record``, ``framework_record``) are the Mesos
``Task`` / ``GetAgents.Agent`` / ``GetFrameworks.Framework`` of the core's records.
"""

from __future__ import annotations

from collections.abc import Mapping

from master.events import Effect, PublishOperatorEvent
from master.lifecycles import FrameworkPhase
from master.read_model import AgentView, FrameworkView, TaskView
from protocol import mesos
from protocol.resources import Resources
from protocol.task_states import TaskState

__pure__ = True

EMPTY = Resources()
STATUSES_SHOWN = 10  # the latest statuses a Task carries (as GET_TASKS)


def time_info(t: float | None) -> mesos.TimeInfo | None:
    return None if t is None else mesos.TimeInfo(nanoseconds=int(t * 1e9))


def task_message(t: TaskView) -> mesos.Task:
    """The v1 ``Task`` of a task record."""
    return mesos.Task(
        name=t.name,
        task_id=mesos.TaskID(t.task_id),
        framework_id=mesos.FrameworkID(t.framework_id),
        agent_id=mesos.AgentID(t.agent_id),
        state=t.state,
        executor_id=mesos.ExecutorID(t.executor_id) if t.executor_id else None,
        resources=t.resources.to_mesos(),
        statuses=tuple(t.statuses[-STATUSES_SHOWN:]),
        status_update_state=t.status_update_state,
        status_update_uuid=t.status_update_uuid,
    )


def agent_record(ag: AgentView, allocated: Resources = EMPTY, offered: Resources = EMPTY) -> mesos.AgentRecord:
    """``GetAgents.Agent`` of an agent record."""
    total = ag.effective_total.to_mesos()
    return mesos.AgentRecord(
        agent_info=mesos.AgentInfo(
            hostname=ag.hostname,
            port=ag.port,
            resources=total,
            attributes=ag.attributes,
            id=mesos.AgentID(ag.agent_id),
        ),
        active=ag.reachable and ag.conn_id is not None,
        version=ag.version or "0.1.0",
        deactivated=not ag.reachable,
        pid=f"slave(1)@{ag.hostname}:{ag.port}",
        registered_time=time_info(ag.registered_time),
        reregistered_time=time_info(ag.reregistered_time),
        total_resources=total,
        allocated_resources=allocated.to_mesos(),
        offered_resources=offered.to_mesos(),
        drain_info=ag.drain_info(),
    )


def framework_record(fw: FrameworkView) -> mesos.FrameworkRecord:
    """``GetFrameworks.Framework`` of a framework record."""
    used = Resources.sum(t.resources for t in fw.tasks.values())
    return mesos.FrameworkRecord(
        framework_info=fw.info,
        active=fw.phase is FrameworkPhase.SUBSCRIBED,
        connected=fw.connected,
        recovered=fw.phase is FrameworkPhase.RECOVERED,
        registered_time=time_info(fw.registered_time),
        reregistered_time=time_info(fw.reregistered_time),
        unregistered_time=time_info(fw.unregistered_time),
        allocated_resources=used.to_mesos(),
    )


class OperatorFeed:
    """The operator event feed, one component of the core (``MasterState.feed``): the open operator
    streams, the last ``seq`` published, and one emitter per kind of change. It reads the
    frameworks (for an agent's allocated resources) and writes nothing of the core's."""

    __slots__ = ("_frameworks", "seq", "streams")

    def __init__(self, frameworks: Mapping[str, FrameworkView]) -> None:
        self._frameworks = frameworks
        self.streams: set[str] = set()  # open operator SUBSCRIBE streams (events are built only if any)
        self.seq = 0  # the seq of the last event published

    def stream(self, stream_id: str, opened: bool) -> None:
        if opened:
            self.streams.add(stream_id)
        else:
            self.streams.discard(stream_id)

    def publish(self, event: mesos.OperatorEvent, fx: list[Effect]) -> None:
        self.seq += 1
        fx.append(PublishOperatorEvent(self.seq, event))

    def task_added(self, task: TaskView, fx: list[Effect]) -> None:
        if self.streams:
            self.publish(mesos.OperatorEvent.make_task_added(task_message(task)), fx)

    def task_updated(
        self, task: TaskView, state: TaskState, status: mesos.TaskStatus | None, now: float, fx: list[Effect]
    ) -> None:
        """``task`` moved to ``state``; ``status`` is the update that moved it (None: the master's
        own change without one; a status is made up)."""
        if not self.streams:
            return
        if status is None:
            status = mesos.TaskStatus(
                task_id=mesos.TaskID(task.task_id),
                state=state,
                source=mesos.Source.SOURCE_MASTER,
                agent_id=mesos.AgentID(task.agent_id),
                timestamp=now,
            )
        self.publish(mesos.OperatorEvent.make_task_updated(mesos.FrameworkID(task.framework_id), status, state), fx)

    def agent_added(self, ag: AgentView, fx: list[Effect]) -> None:
        if not self.streams:
            return
        used = EMPTY
        if ag.tasks:
            used = Resources.sum(
                t.resources
                for (fid, tid) in ag.tasks
                if (fw := self._frameworks.get(fid)) is not None and (t := fw.tasks.get(tid)) is not None
            )
        self.publish(mesos.OperatorEvent.make_agent_added(agent_record(ag, used)), fx)

    def agent_removed(self, agent_id: str, fx: list[Effect]) -> None:
        if self.streams:
            self.publish(mesos.OperatorEvent.make_agent_removed(mesos.AgentID(agent_id)), fx)

    def framework_added(self, fw: FrameworkView, fx: list[Effect]) -> None:
        if self.streams:
            self.publish(mesos.OperatorEvent.make_framework_added(framework_record(fw)), fx)

    def framework_updated(self, fw: FrameworkView, fx: list[Effect]) -> None:
        if self.streams:
            self.publish(mesos.OperatorEvent.make_framework_updated(framework_record(fw)), fx)

    def framework_removed(self, fw: FrameworkView, fx: list[Effect]) -> None:
        if self.streams:
            self.publish(mesos.OperatorEvent.make_framework_removed(fw.info), fx)
