"""The task book of the master's pure core (``MasterState.task_book``): a task's life as the
master sees it. A launch adds it (``add``, from ACCEPT), the agent's status updates move it
(``status_update``: the transition table of ``protocol.task_states``, the terminal ones
``finish`` it, its resources recovered), the framework kills, acknowledges and reconciles it;
the master makes up updates of its own (``master_update``: SOURCE_MASTER, no uuid, never
acknowledged; DROPPED/UNREACHABLE shown as LOST to frameworks that are not PARTITION_AWARE).

The records are ``FrameworkRec.tasks`` / ``completed`` / ``awaiting_ack`` and ``AgentRec.tasks``
(``master.records``); the book reaches them, and the books it tells, through ``TaskHost``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from master.allocator import events as ae
from master.core_base import EMPTY, TS, R, S, StateConfig
from master.events import Effect
from master.lifecycles import AgentPhase
from master.operator_events import OperatorFeed
from master.records import AgentRec, FrameworkRec, TaskRec
from master.validation import task_resources
from protocol import agent_channel as ac
from protocol import mesos
from protocol.evolve import evolve
from protocol.resources import Resources
from protocol.task_states import TaskState, can_transition, for_framework, is_terminal
from protocol.usage import TaskUsage

if TYPE_CHECKING:
    from master.drain_book import DrainBook
    from master.maintenance_rules import MaintenanceRules
    from master.offer_book import OfferBook

__pure__ = True


class TaskHost(Protocol):
    """What the task book needs of the core: the records, the settings and counters, the operator
    feed, the offer book (resources recovered), the drain book (a draining agent waits for its
    tasks), the maintenance rules (inverse offers for a new task on a DRAINING machine) and the
    core's two ways to send."""

    cfg: StateConfig
    counters: dict[str, int]
    frameworks: dict[str, FrameworkRec]
    agents: dict[str, AgentRec]
    finished_counts: dict[TaskState, int]
    agent_unavailability: dict[str, mesos.Unavailability]
    feed: OperatorFeed
    offer_book: OfferBook
    drain_book: DrainBook
    maintenance_rules: MaintenanceRules

    def _send(self, fw: FrameworkRec, event: mesos.Event, fx: list[Effect]) -> None: ...
    def _to_agent(self, agent_id: str, body: ac.Body, fx: list[Effect]) -> bool: ...
    def recovering(self) -> bool: ...


class TaskBook:
    """Tasks: launch, status updates, kill, acknowledgement, reconciliation, over a ``TaskHost``."""

    __slots__ = ("core",)

    def __init__(self, core: TaskHost) -> None:
        self.core = core

    def add(
        self,
        fw: FrameworkRec,
        ag: AgentRec,
        tk: mesos.TaskInfo,
        group_executor: mesos.ExecutorInfo | None,
        now: float,
        fx: list[Effect],
        resources: Resources | None = None,
    ) -> None:
        core = self.core
        executor = group_executor or tk.executor
        role = "*"
        for r in tk.resources:
            if r.allocation_info is not None and r.allocation_info.role:
                role = r.allocation_info.role
                break
        else:
            role = fw.roles[0]
        rec = TaskRec(
            framework_id=fw.framework_id,
            task_id=tk.task_id.value,
            agent_id=ag.agent_id,
            name=tk.name,
            state=TS.TASK_STAGING,
            resources=resources if resources is not None else task_resources(tk),
            role=role,
            executor_id=executor.executor_id.value if executor else None,
            info=tk if tk.agent_id is not None else evolve(tk, agent_id=mesos.AgentID(ag.agent_id)),
        )
        fw.tasks[rec.task_id] = rec
        ag.tasks.add((fw.framework_id, rec.task_id))
        if core.agent_unavailability and ag.agent_id in core.agent_unavailability:
            core.maintenance_rules.inverse_soon(now)  # a framework newly on a DRAINING machine: an inverse offer
        if executor is not None:
            fw.executors[(ag.agent_id, executor.executor_id.value)] = executor
        core.feed.task_added(rec, fx)

    def finish(
        self,
        fw: FrameworkRec,
        task: TaskRec,
        state: TaskState,
        now: float,
        fx: list[Effect],
        *,
        recover: bool,
        reason: mesos.Reason | None = None,
        message: str = "",
        status: mesos.TaskStatus | None = None,
    ) -> None:
        """Move a task to its terminal state and out of the live set."""
        core = self.core
        task.move(state)
        if status is None:
            status = mesos.TaskStatus(
                task_id=mesos.TaskID(task.task_id),
                state=state,
                source=S.SOURCE_MASTER,
                reason=reason,
                message=message or None,
                agent_id=mesos.AgentID(task.agent_id),
                timestamp=now,
            )
            task.statuses.append(status)
        core.feed.task_updated(task, state, status, now, fx)
        fw.tasks.pop(task.task_id, None)
        fw.completed[task.task_id] = task
        while len(fw.completed) > core.cfg.completed_tasks_per_framework:
            _, old = fw.completed.popitem(last=False)
            if old.status_update_uuid is not None and old.acked_uuid != old.status_update_uuid:
                # its terminal update is not acknowledged yet: the framework's ACKNOWLEDGE must
                # still find it (else the agent resends forever); bounded separately
                fw.awaiting_ack[old.task_id] = old
                while len(fw.awaiting_ack) > core.cfg.awaiting_ack_per_framework:
                    fw.awaiting_ack.popitem(last=False)
        ag = core.agents.get(task.agent_id)
        if ag is not None:
            ag.tasks.discard((fw.framework_id, task.task_id))
        core.finished_counts[state] = core.finished_counts.get(state, 0) + 1
        if recover:
            core.offer_book.alloc_event(
                ae.ResourcesRecovered(
                    framework_id=fw.framework_id, agent_id=task.agent_id, task_id=task.task_id, resources=task.resources
                ),
                now,
                fx,
            )

    def master_update(
        self,
        fw: FrameworkRec,
        task_id: str,
        state: TaskState,
        reason: mesos.Reason | None,
        message: str,
        now: float,
        fx: list[Effect],
        agent_id: str | None = None,
        executor_id: str | None = None,
    ) -> mesos.TaskStatus:
        """A master-generated update: SOURCE_MASTER, no uuid (never acknowledged)."""
        core = self.core
        shown = for_framework(state, fw.partition_aware)
        status = self.master_status(task_id, shown, reason, message, now, agent_id, executor_id)
        if shown is TS.TASK_ERROR:
            core.counters["tasks_error"] += 1
        elif shown is TS.TASK_DROPPED:
            core.counters["tasks_dropped"] += 1
        elif shown is TS.TASK_LOST:
            core.counters["tasks_lost"] += 1
        core._send(fw, mesos.Event.make_update(status), fx)
        return status

    @staticmethod
    def master_status(
        task_id: str,
        shown: TaskState,
        reason: mesos.Reason | None,
        message: str,
        now: float,
        agent_id: str | None = None,
        executor_id: str | None = None,
    ) -> mesos.TaskStatus:
        """The status the master writes for a task (SOURCE_MASTER, no uuid), sent or not."""
        return mesos.TaskStatus(
            task_id=mesos.TaskID(task_id),
            state=shown,
            message=message or None,
            source=S.SOURCE_MASTER,
            reason=reason,
            agent_id=mesos.AgentID(agent_id) if agent_id else None,
            executor_id=mesos.ExecutorID(executor_id) if executor_id else None,
            timestamp=now,
            unreachable_time=mesos.TimeInfo(nanoseconds=int(now * 1e9)) if shown is TS.TASK_UNREACHABLE else None,
        )

    def unknown_pending(self, agent_id: str | None) -> bool:
        """During the re-registration window, a task we do not know may live on an agent that has
        not come back yet: give no answer about it."""
        core = self.core
        if agent_id is not None:
            ag = core.agents.get(agent_id)
            return ag is not None and ag.phase is AgentPhase.RECOVERED
        return core.recovering()

    def status_update(self, ag: AgentRec, upd: ac.StatusUpdateMsg, now: float, fx: list[Effect]) -> None:
        core = self.core
        fid = upd.framework_id.value
        status = upd.status
        if status.agent_id is None or status.agent_id.value != ag.agent_id:
            status = evolve(status, agent_id=mesos.AgentID(ag.agent_id))
        tid = status.task_id.value
        fw = core.frameworks.get(fid)
        if fw is None:
            # the framework is gone: acknowledge on its behalf so the agent stops resending
            if status.uuid is not None:
                core._to_agent(ag.agent_id, ac.AcknowledgeMsg(framework_id=upd.framework_id, task_id=status.task_id, uuid=status.uuid), fx)
            return
        new_state = upd.latest_state or status.state
        task = fw.tasks.get(tid)
        if task is None:
            task = fw.finished(tid)
        if task is None:
            task = TaskRec(
                framework_id=fid,
                task_id=tid,
                agent_id=ag.agent_id,
                name=tid,
                state=TS.TASK_STAGING,
                resources=EMPTY,
                role=fw.roles[0],
                executor_id=status.executor_id.value if status.executor_id else None,
            )
            fw.tasks[tid] = task
            ag.tasks.add((fid, tid))
            core.feed.task_added(task, fx)
        if task.task_id in fw.tasks and task.state is not new_state:
            if can_transition(task.state, new_state):
                core.counters["valid_status_updates"] += 1
                task.statuses.append(status)
                if is_terminal(new_state):
                    self.finish(fw, task, new_state, now, fx, recover=True, status=status)
                else:
                    task.move(new_state)
                    core.feed.task_updated(task, new_state, status, now, fx)
            else:
                core.counters["invalid_status_updates"] += 1
        else:
            core.counters["valid_status_updates"] += 1
            if not task.statuses or task.statuses[-1].uuid != status.uuid:
                task.statuses.append(status)
        task.status_update_state = status.state
        task.status_update_uuid = status.uuid
        if task.lost_reported:
            # the framework was told TASK_LOST (its terminal update) when the agent became
            # unreachable: what the agent says now (the kill on its return, or how the task ended
            # meanwhile) is acknowledged on its behalf, never a second terminal update
            if status.uuid is not None:
                task.acked_uuid = status.uuid
                core._to_agent(ag.agent_id, ac.AcknowledgeMsg(framework_id=upd.framework_id, task_id=status.task_id, uuid=status.uuid), fx)
            if ag.drain is not None:
                core.drain_book.progress(ag, now, fx)
            return
        shown = for_framework(status.state, fw.partition_aware)
        if shown is TS.TASK_KILLING and "TASK_KILLING_STATE" not in fw.capabilities:
            # frameworks without TASK_KILLING_STATE never see it; acknowledge on their behalf
            if status.uuid is not None:
                core._to_agent(ag.agent_id, ac.AcknowledgeMsg(framework_id=upd.framework_id, task_id=status.task_id, uuid=status.uuid), fx)
            return
        if shown is not status.state:
            status = evolve(status, state=shown)
        core._send(fw, mesos.Event.make_update(status), fx)
        if ag.drain is not None:
            core.drain_book.progress(ag, now, fx)

    def usage_report(self, ag: AgentRec, rep: ac.UsageReport) -> None:
        """Live usage of the agent's tasks: kept on each task it runs (shown by ``/state``)."""
        for e in rep.tasks:
            fw = self.core.frameworks.get(e.framework_id.value)
            task = fw.tasks.get(e.task_id.value) if fw is not None else None
            if task is None or task.agent_id != ag.agent_id:
                continue
            task.usage = TaskUsage(
                cpu_seconds=max(0.0, e.cpu_seconds),
                mem_rss_bytes=max(0, e.mem_rss_bytes),
                mem_peak_bytes=max(0, e.mem_peak_bytes),
                disk_used_bytes=e.disk_used_bytes if e.disk_used_bytes >= 0 else None,
                timestamp=e.timestamp,
            )

    def kill(self, fw: FrameworkRec, kill: mesos.Kill, now: float, fx: list[Effect]) -> None:
        tid = kill.task_id.value
        task = fw.tasks.get(tid)
        if task is None:
            done = fw.finished(tid)
            if done is not None:
                return  # already terminal; the framework has (or will get) its terminal update
            agent_id = kill.agent_id.value if kill.agent_id else None
            if self.unknown_pending(agent_id):
                return  # its agent may still come back: no answer (Mesos)
            self.master_update(fw, tid, TS.TASK_UNKNOWN, R.REASON_RECONCILIATION, "Task unknown to the master", now, fx, agent_id)
            return
        if task.state is TS.TASK_UNREACHABLE:
            return
        grace = None
        if kill.kill_policy is not None and kill.kill_policy.grace_period is not None:
            grace = max(0.0, kill.kill_policy.grace_period.nanoseconds / 1e9)
        self.core._to_agent(
            task.agent_id,
            ac.KillTask(framework_id=mesos.FrameworkID(fw.framework_id), task_id=kill.task_id, grace_seconds=grace),
            fx,
        )

    def acknowledge(self, fw: FrameworkRec, ack: mesos.Acknowledge, now: float, fx: list[Effect]) -> None:
        core = self.core
        tid = ack.task_id.value
        task = fw.tasks.get(tid) or fw.finished(tid)
        if task is None or task.agent_id != ack.agent_id.value:
            core.counters["dropped_messages"] += 1
            return  # not this framework's task on that agent (S17): ignored
        if ack.uuid == task.status_update_uuid:
            task.acked_uuid = task.status_update_uuid  # (the object already held, not a copy)
            # its last update is acknowledged: forgotten now, like an evicted completed task
            fw.awaiting_ack.pop(tid, None)
        core._to_agent(
            task.agent_id,
            ac.AcknowledgeMsg(framework_id=fw.info.id or mesos.FrameworkID(fw.framework_id), task_id=ack.task_id, uuid=ack.uuid),
            fx,
        )
        core.drain_book.check(task.agent_id, now, fx)  # a draining agent waits for its acknowledgements

    def reconcile(self, fw: FrameworkRec, tasks: Iterable[mesos.ReconcileTask], now: float, fx: list[Effect]) -> None:
        wanted = list(tasks)
        if not wanted:  # implicit: every task the master knows for this framework
            for task in fw.tasks.values():
                self.reconcile_known(fw, task, now, fx)
            return
        for rt in wanted:
            tid = rt.task_id.value
            known = fw.tasks.get(tid) or fw.finished(tid)
            if known is not None:
                self.reconcile_known(fw, known, now, fx)
                continue
            agent_id = rt.agent_id.value if rt.agent_id else None
            if self.unknown_pending(agent_id):
                continue
            ag = self.core.agents.get(agent_id) if agent_id else None
            if ag is not None and ag.phase is AgentPhase.UNREACHABLE:
                state = TS.TASK_UNREACHABLE
            elif ag is not None and ag.reachable:
                state = TS.TASK_GONE
            else:
                state = TS.TASK_UNKNOWN
            self.master_update(fw, tid, state, R.REASON_RECONCILIATION, "Reconciliation: task unknown", now, fx, agent_id)

    def reconcile_known(self, fw: FrameworkRec, task: TaskRec, now: float, fx: list[Effect]) -> None:
        latest = task.latest
        status = mesos.TaskStatus(
            task_id=mesos.TaskID(task.task_id),
            state=for_framework(task.state, fw.partition_aware),
            message="Reconciliation: latest task state",
            source=S.SOURCE_MASTER,
            reason=R.REASON_RECONCILIATION,
            agent_id=mesos.AgentID(task.agent_id),
            executor_id=mesos.ExecutorID(task.executor_id) if task.executor_id else None,
            timestamp=now,
            healthy=latest.healthy if latest else None,
            data=latest.data if latest else None,
            labels=latest.labels if latest else None,
            container_status=latest.container_status if latest else None,
        )
        self.core._send(fw, mesos.Event.make_update(status), fx)

    def counts(self) -> dict[TaskState, int]:
        core = self.core
        counts: dict[TaskState, int] = dict.fromkeys(TaskState, 0)
        for fw in core.frameworks.values():
            for t in fw.tasks.values():
                counts[t.state] += 1
        for st, n in core.finished_counts.items():
            counts[st] += n
        return counts

    def used_resources(self) -> Resources:
        return Resources.sum(t.resources for fw in self.core.frameworks.values() for t in fw.tasks.values() if t.state is not TS.TASK_UNREACHABLE)
