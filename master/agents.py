"""Agent rules of the master's pure core: registration and re-registration (tasks merged
back, allocations recovered), agent messages and status updates, unreachability, removal and
maintenance drain."""

from __future__ import annotations

import ipaddress

from master import registry_ops as ops
from master.allocator import events as ae
from master.core_base import EMPTY, TS, CoreBase, R, _attr_dict, _attrs_string
from master.events import (
    AgentDrainRequested,
    CloseAgent,
    Effect,
    Persist,
    SendToAgent,
)
from master.lifecycles import AgentPhase, FrameworkPhase
from master.records import AgentRec, DrainMode, TaskRec
from protocol import agent_channel as ac
from protocol import mesos
from protocol.acls import agent_problem
from protocol.evolve import evolve
from protocol.ids import new_agent_id
from protocol.resources import ResourceError, Resources
from protocol.task_states import can_transition, for_framework, is_terminal
from protocol.usage import TaskUsage

__pure__ = True

DRAINING_REASON = mesos.Reason.REASON_AGENT_DRAINING.value  # a drained task's TASK_KILLED reason


class AgentRules(CoreBase):
    def reservation_problem(self, agent_id: str, resources: Resources, reserve: bool) -> str | None:
        """Why an operator (un)reservation cannot be applied now, or None."""
        ag = self.agents.get(agent_id)
        if ag is None or not ag.in_allocator:
            return f"Agent {agent_id} is not registered"
        dynamic = resources.reserved()
        if dynamic.is_empty() or dynamic != resources:
            return "Resources must all carry a dynamic reservation"
        view = self.alloc.agent_view(agent_id)
        if view is None:
            return f"Agent {agent_id} is unknown to the allocator"
        if reserve:
            if not view.free.contains(resources.unreserve()):
                return f"Agent {agent_id} has no free unreserved {resources.unreserve()}"
        elif not ag.reservations.contains(resources) or not view.free.contains(resources):
            return f"{resources} is not reserved and free on agent {agent_id}"
        return None

    def _operator_reservation(self, agent_id: str, resources: Resources, reserve: bool, now: float, fx: list[Effect]) -> None:
        if self.reservation_problem(agent_id, resources, reserve) is not None:
            return  # the edge already answered the operator; the state moved since: no change
        ag = self.agents[agent_id]
        ag.reservations = ag.reservations + resources if reserve else ag.reservations - resources
        fx.append(Persist((ops.ReservationsSet(agent_id, str(ag.reservations)),)))
        self._alloc_event(ae.AgentUpdated(agent_id=agent_id, total=self._alloc_total(ag)), now, fx)

    # --- maintenance: DRAIN_AGENT / DEACTIVATE_AGENT / REACTIVATE_AGENT -------------------------

    def _drain(self, ev: AgentDrainRequested, now: float, fx: list[Effect]) -> None:
        """Mesos' automatic draining: DRAIN_AGENT kills every task on the agent (now if it is
        reachable, else when it re-registers) and it is DRAINING until they have all ended with
        their updates acknowledged, then DRAINED (and gone with ``mark_gone``); DEACTIVATE_AGENT only
        stops offers; REACTIVATE_AGENT ends either. The mode is persisted, so it holds across a
        master restart."""
        ag = self.agents.get(ev.agent_id)
        if ag is None or ag.phase is AgentPhase.REMOVED:
            return
        if not ev.draining:
            mode = None
        elif ev.kill:
            mode = DrainMode(ev.max_grace, ev.mark_gone)
        else:
            mode = ag.drain  # DEACTIVATE_AGENT of a draining agent: it goes on draining
        # a drained agent stays drained when drained again (nothing can have started there)
        ag.drained = ag.drained and mode is not None and ag.drain is not None
        if mode is None or ev.reason is not None or not ev.draining:
            ag.drain_reason = ev.reason if ev.draining else None
        ag.draining = ev.draining
        ag.drain = mode
        if mode is None:
            ag.drain_pending.clear()
        fx.append(Persist((self._drain_op(ag),)))
        if ag.phase in (AgentPhase.RECOVERED, AgentPhase.UNREACHABLE):
            return  # applied when it re-registers
        new = AgentPhase.DRAINING if ev.draining else AgentPhase.REGISTERED
        ag.move(new)
        if ag.in_allocator:
            alloc_ev: ae.Event = (
                ae.AgentDeactivated(agent_id=ag.agent_id, reason="agent draining (maintenance)")
                if ev.draining
                else ae.AgentReactivated(agent_id=ag.agent_id)
            )
            self._alloc_event(alloc_ev, now, fx)
        self._drain_kill(ag, fx)
        self._drain_progress(ag, now, fx)

    @staticmethod
    def _drain_op(ag: AgentRec) -> ops.AgentDrainSet:
        d = ag.drain
        return ops.AgentDrainSet(
            ag.agent_id, ag.draining, kill=d is not None, max_grace=d.max_grace if d else None,
            mark_gone=d.mark_gone if d else False, drained=ag.drained,
        )

    def _drain_kill(self, ag: AgentRec, fx: list[Effect]) -> None:
        """Kill every live task on a draining, reachable agent: TASK_KILLED with
        REASON_AGENT_DRAINING, after at most the drain's grace (the task's kill policy if shorter)."""
        if ag.drain is None or ag.drained or not ag.reachable:
            return
        for fid, tid in sorted(ag.tasks):
            fw = self.frameworks.get(fid)
            task = fw.tasks.get(tid) if fw else None
            if task is None or is_terminal(task.state) or task.state is TS.TASK_UNREACHABLE:
                continue
            ag.drain_pending.add((fid, tid))
            self._to_agent(
                ag.agent_id,
                ac.KillTask(
                    framework_id=mesos.FrameworkID(fid), task_id=mesos.TaskID(tid),
                    grace_seconds=_drain_grace(task, ag.drain.max_grace), reason=DRAINING_REASON,
                ),
                fx,
            )

    def _drain_check(self, agent_id: str, now: float, fx: list[Effect]) -> None:
        """A fact touched a task on ``agent_id`` (an update, an acknowledgement, a removal)."""
        ag = self.agents.get(agent_id)
        if ag is not None and ag.drain is not None:
            self._drain_progress(ag, now, fx)

    def _drain_check_all(self, now: float, fx: list[Effect]) -> None:
        """A framework went away: the draining agents that waited for its tasks (rare: a scan)."""
        for ag in [a for a in self.agents.values() if a.drain is not None and a.drain_pending]:
            self._drain_progress(ag, now, fx)

    def _drain_progress(self, ag: AgentRec, now: float, fx: list[Effect]) -> None:
        """DRAINING -> DRAINED once no task on the agent is live and every one that was there has
        its last update acknowledged (or its framework is gone); then gone with ``mark_gone``."""
        if ag.drain is None or ag.drained or not ag.reachable:
            return
        if ag.tasks:  # (only live and unreachable tasks are in it: not drained, no scan)
            ag.drain_pending |= ag.tasks
            return
        for key in sorted(ag.drain_pending):
            if self._drain_settled(key):
                ag.drain_pending.discard(key)
        if ag.drain_pending:
            return
        ag.drained = True
        fx.append(Persist((self._drain_op(ag),)))
        if ag.drain.mark_gone:
            self._mark_unreachable(ag, now, "marked gone by the operator: drained", fx)

    def _drain_settled(self, key: tuple[str, str]) -> bool:
        fw = self.frameworks.get(key[0])
        if fw is None:
            return True
        if key[1] in fw.tasks:
            return False  # live (or unreachable)
        task = fw.finished(key[1])
        return task is None or task.status_update_uuid is None or task.acked_uuid == task.status_update_uuid

    def _gone(self, ag: AgentRec) -> bool:
        """Marked gone by the operator (drained with ``mark_gone``): it may not register again
        until REACTIVATE_AGENT."""
        return ag.drain is not None and ag.drain.mark_gone and ag.drained

    def _agent_register(
        self, conn_id: int, reg: ac.Register, now: float, fx: list[Effect], principal: str | None = None,
        ip: str | None = None,
    ) -> None:
        claimed = reg.agent_id.value if reg.agent_id is not None else None
        problem = agent_problem(
            self.cfg.acls, self.cfg.authenticate_agents, principal, claimed,
            self.agent_principals.get(claimed) if claimed is not None else None,
        )
        if problem is not None:
            # refused before anything changes: an agent already registered under this id (and its
            # tasks) are not touched
            self.unauthorized += 1
            fx.append(SendToAgent(conn_id, ac.Refused(message=problem)))
            fx.append(CloseAgent(conn_id, "not authorized"))
            return
        try:
            total = Resources.from_mesos(reg.resources)
        except (ResourceError, TypeError, ValueError) as e:
            fx.append(SendToAgent(conn_id, ac.Refused(message=f"invalid resources: {e}")))
            fx.append(CloseAgent(conn_id, "invalid resources"))
            return
        if reg.agent_id is not None and not reg.agent_id.value:
            fx.append(SendToAgent(conn_id, ac.Refused(message="empty agent id")))
            fx.append(CloseAgent(conn_id, "empty agent id"))
            return
        aid = reg.agent_id.value if reg.agent_id is not None else None
        ag = self.agents.get(aid) if aid is not None else None
        if ag is not None and self._gone(ag):
            fx.append(SendToAgent(conn_id, ac.Refused(message=f"agent {aid} was drained and marked gone by the operator")))
            fx.append(CloseAgent(conn_id, "agent marked gone"))
            return
        ip = _plain_ip(ip, reg.hostname)
        down = self.maintenance.is_down(reg.hostname, ip) if not self.maintenance.empty() else None
        if down is not None:
            # Mesos: an agent on a machine in maintenance (DOWN) is told to shut down, never
            # admitted; what it still runs is killed (the frameworks were told GONE/LOST)
            for fid in sorted({rt.framework_id.value for rt in reg.tasks if not is_terminal(rt.state)}):
                fx.append(SendToAgent(conn_id, ac.ShutdownFramework(framework_id=mesos.FrameworkID(fid))))
            self.maintenance_refused += 1
            fx.append(SendToAgent(conn_id, ac.Refused(message=f"Machine '{down.label()}' is DOWN for maintenance")))
            fx.append(CloseAgent(conn_id, "machine DOWN for maintenance"))
            return
        if ag is not None and ag.conn_id is not None and ag.conn_id != conn_id and now - ag.last_seen < self.cfg.ping_timeout:
            # one live connection per agent id: a second process holding the id (and perhaps its
            # credential) must not take over a connected agent and have its tasks reported LOST.
            # The first is gone once its connection closes or it misses its ping deadline; the
            # agent retries with backoff until then (a restarted agent's old socket closes at once).
            self.counters["agent_takeovers_refused"] = self.counters.get("agent_takeovers_refused", 0) + 1
            fx.append(SendToAgent(conn_id, ac.Refused(
                message=f"agent {aid} is connected on another connection; retry once that one is gone")))
            fx.append(CloseAgent(conn_id, "agent id already connected"))
            return
        if aid is None:
            aid = new_agent_id(self.master_id, self.agent_seq)
            self.agent_seq += 1
        fx.append(
            Persist(
                (ops.AgentAdmitted(aid, reg.hostname, reg.port, str(total), _attrs_string(reg.attributes), now),)
            )
        )
        if principal is not None and aid not in self.agent_principals:
            self.agent_principals[aid] = principal  # the id belongs to this credential from now on
            fx.append(Persist((ops.AgentPrincipalBound(aid, principal),)))
        if ag is None:
            ag = AgentRec(
                agent_id=aid,
                hostname=reg.hostname,
                port=reg.port,
                total=total,
                phase=AgentPhase.REGISTERED,
                registered_time=now,
                attributes=reg.attributes,
            )
            self.agents[aid] = ag
            self.counters["slave_registrations"] += 1
            was_unreachable = False
            same_conn = False
        else:
            was_unreachable = ag.phase is AgentPhase.UNREACHABLE
            same_conn = ag.conn_id == conn_id
            if ag.conn_id is not None and ag.conn_id != conn_id:
                self.conns.pop(ag.conn_id, None)
                fx.append(CloseAgent(ag.conn_id, "agent re-registered on a new connection"))
            ag.move(AgentPhase.REGISTERED)
            ag.hostname, ag.port, ag.total, ag.attributes = reg.hostname, reg.port, total, reg.attributes
            ag.reregistered_time = now
            ag.unreachable_since = None
            self.counters["slave_reregistrations"] += 1
        ag.conn_id = conn_id
        ag.ip = ip
        self._maintenance_joined(ag, now)
        ag.last_seen = now
        ag.next_ping = now + self.cfg.ping_interval
        self._touch(min(ag.next_ping, now + self.cfg.ping_timeout))
        ag.version = reg.version
        ag.capabilities = reg.capabilities
        self.conns[conn_id] = aid
        fx.append(
            SendToAgent(
                conn_id,
                ac.Registered(
                    agent_id=mesos.AgentID(aid),
                    master_id=self.master_id,
                    epoch=self.epoch,
                    ping_interval=self.cfg.ping_interval,
                    ping_timeout=self.cfg.ping_timeout,
                ),
            )
        )
        if ag.in_allocator:
            self._alloc_event(ae.AgentRemoved(agent_id=aid, reason="agent re-registered"), now, fx)
        self._alloc_event(
            ae.AgentAdded(agent_id=aid, hostname=ag.hostname, total=self._alloc_total(ag), attributes=_attr_dict(ag.attributes)),
            now,
            fx,
        )
        ag.in_allocator = True
        if ag.draining:
            ag.move(AgentPhase.DRAINING)
            self._alloc_event(ae.AgentDeactivated(agent_id=aid, reason="agent draining (maintenance)"), now, fx)
        self.feed.agent_added(ag, fx)
        self._merge_tasks(ag, reg, was_unreachable, same_conn, now, fx)
        if ag.drain is not None:  # draining: what it still runs is killed now
            self._drain_kill(ag, fx)
            self._drain_progress(ag, now, fx)
        if self.recovery_deadline is not None and not self.recovering():
            self.recovery_deadline = None

    def _alloc_total(self, ag: AgentRec) -> Resources:
        return ag.effective_total

    def _merge_tasks(
        self, ag: AgentRec, reg: ac.Register, was_unreachable: bool, same_conn: bool, now: float, fx: list[Effect]
    ) -> None:
        """A re-registering agent's tasks are merged back; their allocations are recovered."""
        infos = {fi.id.value: fi for fi in reg.frameworks if fi.id is not None}
        reported: set[tuple[str, str]] = set()
        shutdown: set[str] = set()
        late = ag.agent_id in self.removed_agent_ids
        for rt in reg.tasks:
            fid, tid = rt.framework_id.value, rt.task_id.value
            if fid in self.removed_framework_ids:
                shutdown.add(fid)
                continue
            if late:
                # the agent was removed and its tasks reported GONE: they must not run on (policy)
                if not is_terminal(rt.state):
                    self._to_agent(ag.agent_id, ac.KillTask(framework_id=rt.framework_id, task_id=rt.task_id), fx)
                continue
            fw = self.frameworks.get(fid)
            if fw is None:
                info = infos.get(fid) or mesos.FrameworkInfo(user="", name="", id=rt.framework_id)
                deadline = now + max(float(info.failover_timeout or 0.0), self.cfg.agent_reregister_timeout)
                fw = self._new_framework(fid, info, FrameworkPhase.RECOVERED, now, deadline)
                self.frameworks[fid] = fw
                self.feed.framework_added(fw, fx)
            try:
                res = Resources.from_mesos(rt.resources)
            except (ResourceError, TypeError, ValueError):
                res = EMPTY
            reported.add((fid, tid))
            if is_terminal(rt.state):
                continue
            task = fw.tasks.get(tid)
            added = False
            if task is None:
                task = TaskRec(
                    framework_id=fid,
                    task_id=tid,
                    agent_id=ag.agent_id,
                    name=rt.name or tid,
                    state=rt.state,
                    resources=res,
                    role=_role_of(rt.resources, fw.roles[0]),
                    executor_id=rt.executor_id.value if rt.executor_id else None,
                )
                fw.tasks[tid] = task
                added = True
            elif task.state is TS.TASK_UNREACHABLE:
                if not fw.partition_aware:
                    # it was reported LOST already: kill it (Mesos policy for non-partition-aware)
                    self._to_agent(ag.agent_id, ac.KillTask(framework_id=rt.framework_id, task_id=rt.task_id), fx)
                task.resync(rt.state)
                if fw.partition_aware:
                    self._master_update(
                        fw, tid, rt.state, R.REASON_AGENT_REREGISTERED, "Agent re-registered", now, fx, ag.agent_id, task.executor_id
                    )
                self.feed.task_updated(task, rt.state, rt.status, now, fx)
            else:
                moved = task.state is not rt.state
                task.resync(rt.state)
                if moved:
                    self.feed.task_updated(task, rt.state, rt.status, now, fx)
            if rt.status is not None:
                task.statuses.append(rt.status)
            elif not task.statuses:
                # the agent holds no status for it any more (all acknowledged): its state as of
                # now, so that a task always has a status, as a Mesos agent's Task does
                task.statuses.append(mesos.TaskStatus(
                    task_id=rt.task_id, state=rt.state, source=mesos.Source.SOURCE_AGENT,
                    agent_id=mesos.AgentID(ag.agent_id), executor_id=rt.executor_id, timestamp=now,
                ))
            if added:
                self.feed.task_added(task, fx)
            if rt.executor_id is not None:
                fw.executors.setdefault(
                    (ag.agent_id, rt.executor_id.value), mesos.ExecutorInfo(executor_id=rt.executor_id)
                )
            ag.tasks.add((fid, tid))
            self._alloc_event(
                ae.AllocationRecovered(
                    framework_id=fid, agent_id=ag.agent_id, task_id=tid, resources=task.resources, role=task.role
                ),
                now,
                fx,
            )
        # tasks the master thought were here but the agent no longer has: lost
        for fid, tid in sorted(ag.tasks - reported):
            fw = self.frameworks.get(fid)
            task = fw.tasks.get(tid) if fw else None
            if fw is None or task is None:
                ag.tasks.discard((fid, tid))
                continue
            if task.state is TS.TASK_STAGING and same_conn:
                # a launch sent on this same connection may still be in flight (ReconcileRace):
                # keep the task and its allocation
                self._alloc_event(
                    ae.AllocationRecovered(
                        framework_id=fid, agent_id=ag.agent_id, task_id=tid, resources=task.resources, role=task.role
                    ),
                    now,
                    fx,
                )
                continue
            if not task.lost_reported:  # (else the framework had its terminal update: LOST)
                self._master_update(fw, tid, TS.TASK_GONE, R.REASON_AGENT_REREGISTERED, "Task not on the agent", now, fx, ag.agent_id)
            self._finish_task(fw, task, TS.TASK_LOST, now, fx, recover=False)
        for fid in sorted(shutdown):
            self._to_agent(ag.agent_id, ac.ShutdownFramework(framework_id=mesos.FrameworkID(fid)), fx)
        self.removed_agent_ids.discard(ag.agent_id)

    def _agent_conn_lost(self, conn_id: int, now: float, fx: list[Effect]) -> None:
        ag = self._agent_of_conn(conn_id)
        self.conns.pop(conn_id, None)
        if ag is None:
            return
        ag.conn_id = None
        # keep it registered until the ping timeout: it will likely reconnect (N2)
        if ag.in_allocator:
            self._alloc_event(ae.AgentDeactivated(agent_id=ag.agent_id, reason="agent disconnected"), now, fx)

    def _agent_message(self, conn_id: int, body: ac.Body, now: float, fx: list[Effect]) -> None:
        ag = self._agent_of_conn(conn_id)
        if ag is None:
            self.counters["dropped_messages"] += 1
            return
        ag.last_seen = now
        match body:
            case ac.Pong():
                pass
            case ac.StatusUpdateMsg():
                self._status_update(ag, body, now, fx)
            case ac.SlackEstimate():
                try:
                    slack = Resources.from_mesos(body.resources).flatten()
                except (ResourceError, TypeError, ValueError):
                    return
                ag.slack = slack
                self._alloc_event(ae.AgentSlackEstimated(agent_id=ag.agent_id, slack=slack), now, fx)
            case ac.UsageReport():
                self._usage_report(ag, body)
            case ac.ExecutorMessageMsg():
                fw = self.frameworks.get(body.framework_id.value)
                if fw is not None:
                    self._send(fw, mesos.Event.make_message(mesos.AgentID(ag.agent_id), body.executor_id, body.data), fx)
            case ac.ExecutorExited():
                fw = self.frameworks.get(body.framework_id.value)
                if fw is not None:
                    fw.executors.pop((ag.agent_id, body.executor_id.value), None)
                    self._send(
                        fw, mesos.Event.make_failure(mesos.AgentID(ag.agent_id), body.executor_id, body.status), fx
                    )
            case ac.Register():
                self._agent_register(conn_id, body, now, fx)
            case ac.Unregister():  # retiring (SIGUSR1): offer nothing more on it; it goes soon
                if ag.in_allocator:
                    self._alloc_event(ae.AgentDeactivated(agent_id=ag.agent_id, reason=body.reason or "agent is retiring"), now, fx)
            case _:
                self.counters["dropped_messages"] += 1

    def _usage_report(self, ag: AgentRec, rep: ac.UsageReport) -> None:
        """Live usage of the agent's tasks: kept on each task it runs (shown by ``/state``)."""
        for e in rep.tasks:
            fw = self.frameworks.get(e.framework_id.value)
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

    def _status_update(self, ag: AgentRec, upd: ac.StatusUpdateMsg, now: float, fx: list[Effect]) -> None:
        fid = upd.framework_id.value
        status = upd.status
        if status.agent_id is None or status.agent_id.value != ag.agent_id:
            status = evolve(status, agent_id=mesos.AgentID(ag.agent_id))
        tid = status.task_id.value
        fw = self.frameworks.get(fid)
        if fw is None:
            # the framework is gone: acknowledge on its behalf so the agent stops resending
            if status.uuid is not None:
                fx.append(SendToAgent(ag.conn_id, ac.AcknowledgeMsg(framework_id=upd.framework_id, task_id=status.task_id, uuid=status.uuid)))  # type: ignore[arg-type]
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
            self.feed.task_added(task, fx)
        if task.task_id in fw.tasks and task.state is not new_state:
            if can_transition(task.state, new_state):
                self.counters["valid_status_updates"] += 1
                task.statuses.append(status)
                if is_terminal(new_state):
                    self._finish_task(fw, task, new_state, now, fx, recover=True, status=status)
                else:
                    task.move(new_state)
                    self.feed.task_updated(task, new_state, status, now, fx)
            else:
                self.counters["invalid_status_updates"] += 1
        else:
            self.counters["valid_status_updates"] += 1
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
                self._to_agent(ag.agent_id, ac.AcknowledgeMsg(framework_id=upd.framework_id, task_id=status.task_id, uuid=status.uuid), fx)
            if ag.drain is not None:
                self._drain_progress(ag, now, fx)
            return
        shown = for_framework(status.state, fw.partition_aware)
        if shown is TS.TASK_KILLING and "TASK_KILLING_STATE" not in fw.capabilities:
            # frameworks without TASK_KILLING_STATE never see it; acknowledge on their behalf
            if status.uuid is not None:
                self._to_agent(ag.agent_id, ac.AcknowledgeMsg(framework_id=upd.framework_id, task_id=status.task_id, uuid=status.uuid), fx)
            return
        if shown is not status.state:
            status = evolve(status, state=shown)
        self._send(fw, mesos.Event.make_update(status), fx)
        if ag.drain is not None:
            self._drain_progress(ag, now, fx)

    # --- time -------------------------------------------------------------------------------------

    def _remove_agent(self, ag: AgentRec, now: float, fx: list[Effect]) -> None:
        fx.append(Persist((ops.AgentRemoved(ag.agent_id),)))
        self._inverse_agent_gone(ag.agent_id, fx)
        if ag.phase is not AgentPhase.UNREACHABLE:  # (its unreachability was published already)
            self.feed.agent_removed(ag.agent_id, fx)
        ag.move(AgentPhase.REMOVED)
        for fid, tid in sorted(ag.tasks):
            fw = self.frameworks.get(fid)
            task = fw.tasks.get(tid) if fw else None
            if fw is None or task is None:
                continue
            if not task.lost_reported:  # (else the framework had its one terminal update: LOST)
                self._master_update(fw, tid, TS.TASK_GONE, R.REASON_AGENT_REMOVED, "Agent removed", now, fx, ag.agent_id)
                # its terminal update is this GONE (LOST): what the agent reports of it if it comes
                # back (the kill) is acknowledged on the framework's behalf, not sent
                task.lost_reported = True
            self._finish_task(fw, task, TS.TASK_GONE, now, fx, recover=False)
        del self.agents[ag.agent_id]
        self.removed_agent_ids.add(ag.agent_id)

    def _mark_unreachable(self, ag: AgentRec, now: float, reason: str, fx: list[Effect]) -> None:
        fx.append(Persist((ops.AgentMarkedUnreachable(ag.agent_id, now),)))
        self._inverse_agent_gone(ag.agent_id, fx)
        ag.move(AgentPhase.UNREACHABLE)
        ag.unreachable_since = now
        self._touch(now + self.cfg.unreachable_gc)
        self.counters["slave_removals"] += 1
        self.feed.agent_removed(ag.agent_id, fx)
        if ag.conn_id is not None:
            self.conns.pop(ag.conn_id, None)
            fx.append(CloseAgent(ag.conn_id, reason))
            ag.conn_id = None
        if ag.in_allocator:
            self._alloc_event(ae.AgentRemoved(agent_id=ag.agent_id, reason=reason), now, fx)
            ag.in_allocator = False
        for fid, tid in sorted(ag.tasks):
            fw = self.frameworks.get(fid)
            task = fw.tasks.get(tid) if fw else None
            if fw is None or task is None or task.state is TS.TASK_UNREACHABLE:
                continue
            task.move(TS.TASK_UNREACHABLE)
            message = f"Agent {ag.agent_id} is unreachable: {reason}"
            if task.lost_reported:
                # unreachable again before the kill on its return landed: the framework had its
                # one terminal update (LOST) the first time; only the operator feed hears of it
                status = self._master_status(tid, TS.TASK_UNREACHABLE, R.REASON_AGENT_REMOVED, message, now, ag.agent_id, task.executor_id)
            else:
                task.lost_reported = not fw.partition_aware  # it sees TASK_LOST: its one terminal update
                status = self._master_update(fw, tid, TS.TASK_UNREACHABLE, R.REASON_AGENT_REMOVED, message, now, fx, ag.agent_id, task.executor_id)
            self.feed.task_updated(task, TS.TASK_UNREACHABLE, status, now, fx)
        for fw in self.frameworks.values():
            if fw.connected:
                self._send(fw, mesos.Event.make_failure(mesos.AgentID(ag.agent_id)), fx)

    # --- views used by the operator endpoints ------------------------------------------------------


def _plain_ip(ip: str | None, hostname: str) -> str:
    """The agent's IPv4 address as a maintenance schedule names it: the connection's (an
    IPv4-mapped IPv6 address unwrapped), else its hostname when that is an address."""
    for cand in (ip, hostname):
        if not cand:
            continue
        try:
            addr = ipaddress.ip_address(cand)
        except ValueError:
            continue
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            return str(addr.ipv4_mapped)
        return str(addr)
    return ""


def _drain_grace(task: TaskRec, max_grace: float | None) -> float | None:
    """The grace a drain gives a task: its kill policy's, capped at the drain's ``max_grace``
    (Mesos); None leaves it to the agent's default."""
    own = None
    kp = task.info.kill_policy if task.info is not None else None
    if kp is not None and kp.grace_period is not None:
        own = max(0.0, kp.grace_period.nanoseconds / 1e9)
    if max_grace is None:
        return own
    return max_grace if own is None else min(own, max_grace)


def _role_of(resources: tuple[mesos.Resource, ...], default: str) -> str:
    """The role a task's resources were allocated to (``allocation_info``, as offered to
    MULTI_ROLE frameworks), else ``default``."""
    for r in resources:
        if r.allocation_info is not None and r.allocation_info.role:
            return r.allocation_info.role
    return default
