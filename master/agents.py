"""The agent book of the master's pure core (``MasterState.agent_book``): registration and
re-registration (tasks merged back, allocations recovered), the agent's messages, its connection
lost, unreachability, removal, operator (un)reservations, and the agents' timers (pings, ping
timeouts, the re-registration window, unreachable agents removed for good: ``tick``). The agent's
status updates are the task book's (``master.task_book``); maintenance drain (DRAIN_AGENT /
DEACTIVATE_AGENT / REACTIVATE_AGENT) the drain book's (``master.drain_book``); machines going
DOWN are the maintenance rules' (``master.maintenance_rules``).

The records are ``AgentRec`` (``master.records``) in the core's ``agents``, with ``conns`` (agent
connection -> agent id); the book reaches them, and the books it tells, through ``AgentHost``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from master import registry_ops as ops
from master.alloc_port import AllocatorPort
from master.allocator import events as ae
from master.core_base import EMPTY, TS, R, StateConfig, _attr_dict, _attrs_from_string, _attrs_string
from master.events import (
    CloseAgent,
    Effect,
    Persist,
    SendToAgent,
)
from master.lifecycles import AgentPhase, FrameworkPhase
from master.maintenance import MaintenanceBook
from master.operator_events import OperatorFeed
from master.ratelimit import TokenBucket
from master.records import AgentRec, DrainMode, FrameworkRec, TaskRec
from protocol import agent_channel as ac
from protocol import mesos
from protocol.acls import agent_problem
from protocol.ids import new_agent_id
from protocol.resources import ResourceError, Resources
from protocol.task_states import is_terminal

if TYPE_CHECKING:
    from master.drain_book import DrainBook
    from master.framework_book import FrameworkBook
    from master.maintenance_rules import MaintenanceRules
    from master.offer_book import OfferBook
    from master.task_book import TaskBook

__pure__ = True

PING_BATCH = 0.1  # agents whose ping is due within this fraction of ping_interval are pinged together


class AgentHost(Protocol):
    """What the agent book needs of the core: the records (agents and their connections, the
    frameworks whose tasks run there, the removed ids, the principals agent ids are bound to),
    the settings, counters and deadlines it moves, the operator feed, the other books (offers:
    the allocator; tasks: updates and endings; frameworks: one learnt from an agent; maintenance:
    DOWN machines, unavailability; drain: a registering agent's drain goes on), the rate limit on markings and removals (``removal_bucket``)
    and the core's ways to send and to set a deadline."""

    master_id: str
    epoch: int
    alloc: AllocatorPort
    cfg: StateConfig
    counters: dict[str, int]
    frameworks: dict[str, FrameworkRec]
    agents: dict[str, AgentRec]
    conns: dict[int, str]
    removed_framework_ids: set[str]
    removed_agent_ids: set[str]
    agent_principals: dict[str, str]
    agent_seq: int
    unauthorized: int
    maintenance_refused: int
    recovery_deadline: float | None
    removal_bucket: TokenBucket
    maintenance: MaintenanceBook
    feed: OperatorFeed
    offer_book: OfferBook
    task_book: TaskBook
    framework_book: FrameworkBook
    maintenance_rules: MaintenanceRules
    drain_book: DrainBook

    def _send(self, fw: FrameworkRec, event: mesos.Event, fx: list[Effect]) -> None: ...
    def _to_agent(self, agent_id: str, body: ac.Body, fx: list[Effect]) -> bool: ...
    def _touch(self, deadline: float) -> None: ...
    def recovering(self) -> bool: ...


class AgentBook:
    """Agents: registration, messages, unreachability, removal, timers, over an ``AgentHost``."""

    __slots__ = ("core",)

    def __init__(self, core: AgentHost) -> None:
        self.core = core

    def recover(self, entries: Iterable[ops.AgentEntry], principals: Iterable[tuple[str, str]], now: float) -> None:
        """The registry's agents after a (re)start: RECOVERED (with ``agent_reregister_timeout``
        to re-register) or still UNREACHABLE; the principal each agent id is bound to."""
        core = self.core
        for e in entries:
            try:
                total = Resources.parse(e.resources)
                reservations = Resources.parse(e.reservations) if e.reservations else EMPTY
            except ResourceError:
                total, reservations = EMPTY, EMPTY
            phase = AgentPhase.UNREACHABLE if e.unreachable_since is not None else AgentPhase.RECOVERED
            core.agents[e.agent_id] = AgentRec(
                agent_id=e.agent_id,
                hostname=e.hostname,
                port=e.port,
                total=total,
                phase=phase,
                registered_time=e.registered_at,
                attributes=_attrs_from_string(e.attributes),
                unreachable_since=e.unreachable_since,
                reservations=reservations,
                draining=e.draining,
                drain=DrainMode(e.drain_max_grace, e.drain_mark_gone) if e.drain_kill else None,
                drained=e.drained,
            )
        if any(a.phase is AgentPhase.RECOVERED for a in core.agents.values()):
            core.recovery_deadline = now + core.cfg.agent_reregister_timeout
        core.agent_principals.update(principals)

    # --- timers (``MasterState`` calls ``tick`` when housekeeping is due) -----------------------

    def tick(self, now: float, fx: list[Effect]) -> None:
        """The agents' timers, in this order: pings (agents due within ``PING_BATCH`` of a ping
        interval are pinged now too, so one scan serves them all: pings of agents that registered
        over a few seconds would otherwise each cost a scan of every agent); agents that missed
        their pings for ``ping_timeout`` and, once the re-registration window has passed, RECOVERED
        agents that did not come back: marked unreachable, longest silent first, as fast as
        ``removal_bucket`` allows (the rest wait for the next tick); the window closed once no
        agent is RECOVERED; agents unreachable for ``unreachable_gc`` removed for good (Mesos
        ``registry_max_agent_age``)."""
        core = self.core
        cfg = core.cfg
        ping_by = now + cfg.ping_interval * PING_BATCH
        for ag in core.agents.values():
            if not ag.reachable:
                continue
            if ag.conn_id is not None and ping_by >= ag.next_ping:
                ag.ping_seq += 1
                ag.next_ping = now + cfg.ping_interval
                fx.append(SendToAgent(ag.conn_id, ac.Ping(seq=ag.ping_seq)))
        overdue = [ag for ag in core.agents.values() if ag.reachable and now - ag.last_seen >= cfg.ping_timeout]
        if core.recovery_deadline is not None and now >= core.recovery_deadline:
            overdue += [ag for ag in core.agents.values() if ag.phase is AgentPhase.RECOVERED]
        for ag in sorted(overdue, key=lambda a: a.last_seen):
            if not core.removal_bucket.take(now):
                core.counters["slave_unreachable_scheduled"] += 1
                break
            self.mark_unreachable(ag, now, "agent missed its pings" if ag.reachable else "agent did not re-register", fx)
        if core.recovery_deadline is not None and not core.recovering():
            core.recovery_deadline = None
        for ag in list(core.agents.values()):
            if (
                ag.phase is AgentPhase.UNREACHABLE
                and ag.unreachable_since is not None
                and ag.unreachable_since + cfg.unreachable_gc <= now
            ):
                self.remove(ag, now, fx)

    def next_deadline(self) -> float | None:
        """The earliest of the agents' timers (one scan): a connected agent's next ping, a
        reachable agent's ping timeout (not before ``removal_bucket`` allows a marking), an
        unreachable agent's removal; None without any."""
        core = self.core
        ping_timeout, gc_after = core.cfg.ping_timeout, core.cfg.unreachable_gc
        removal_ok = core.removal_bucket.available_at()  # markings are rate limited
        first: float | None = None
        for ag in core.agents.values():
            if ag.reachable:
                d = max(ag.last_seen + ping_timeout, removal_ok)
                if ag.conn_id is not None and ag.next_ping < d:
                    d = ag.next_ping
            elif ag.phase is AgentPhase.UNREACHABLE and ag.unreachable_since is not None:
                d = ag.unreachable_since + gc_after
            else:
                continue
            if first is None or d < first:
                first = d
        return first

    def window_deadline(self) -> float | None:
        """When the re-registration window's end is acted on: its deadline, not before
        ``removal_bucket`` allows a marking; None when no window is open."""
        core = self.core
        if core.recovery_deadline is None:
            return None
        return max(core.recovery_deadline, core.removal_bucket.available_at())

    def reservation_problem(self, agent_id: str, resources: Resources, reserve: bool) -> str | None:
        """Why an operator (un)reservation cannot be applied now, or None."""
        core = self.core
        ag = core.agents.get(agent_id)
        if ag is None or not ag.in_allocator:
            return f"Agent {agent_id} is not registered"
        dynamic = resources.reserved()
        if dynamic.is_empty() or dynamic != resources:
            return "Resources must all carry a dynamic reservation"
        view = core.alloc.agent_view(agent_id)
        if view is None:
            return f"Agent {agent_id} is unknown to the allocator"
        if reserve:
            if not view.free.contains(resources.unreserve()):
                return f"Agent {agent_id} has no free unreserved {resources.unreserve()}"
        elif not ag.reservations.contains(resources) or not view.free.contains(resources):
            return f"{resources} is not reserved and free on agent {agent_id}"
        return None

    def operator_reservation(self, agent_id: str, resources: Resources, reserve: bool, now: float, fx: list[Effect]) -> None:
        core = self.core
        if self.reservation_problem(agent_id, resources, reserve) is not None:
            return  # the edge already answered the operator; the state moved since: no change
        ag = core.agents[agent_id]
        ag.reservations = ag.reservations + resources if reserve else ag.reservations - resources
        fx.append(Persist((ops.ReservationsSet(agent_id, str(ag.reservations)),)))
        core.offer_book.alloc_event(ae.AgentUpdated(agent_id=agent_id, total=self.alloc_total(ag)), now, fx)

    def register(
        self, conn_id: int, reg: ac.Register, now: float, fx: list[Effect], principal: str | None = None,
        ip: str | None = None,
    ) -> None:
        core = self.core
        claimed = reg.agent_id.value if reg.agent_id is not None else None
        problem = agent_problem(
            core.cfg.acls, core.cfg.authenticate_agents, principal, claimed,
            core.agent_principals.get(claimed) if claimed is not None else None,
        )
        if problem is not None:
            # refused before anything changes: an agent already registered under this id (and its
            # tasks) are not touched
            core.unauthorized += 1
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
        ag = core.agents.get(aid) if aid is not None else None
        if ag is not None and core.drain_book.gone(ag):
            fx.append(SendToAgent(conn_id, ac.Refused(message=f"agent {aid} was drained and marked gone by the operator")))
            fx.append(CloseAgent(conn_id, "agent marked gone"))
            return
        ip = _plain_ip(ip, reg.hostname)
        down = core.maintenance.is_down(reg.hostname, ip) if not core.maintenance.empty() else None
        if down is not None:
            # Mesos: an agent on a machine in maintenance (DOWN) is told to shut down, never
            # admitted; what it still runs is killed (the frameworks were told GONE/LOST)
            for fid in sorted({rt.framework_id.value for rt in reg.tasks if not is_terminal(rt.state)}):
                fx.append(SendToAgent(conn_id, ac.ShutdownFramework(framework_id=mesos.FrameworkID(fid))))
            core.maintenance_refused += 1
            fx.append(SendToAgent(conn_id, ac.Refused(message=f"Machine '{down.label()}' is DOWN for maintenance")))
            fx.append(CloseAgent(conn_id, "machine DOWN for maintenance"))
            return
        if ag is not None and ag.conn_id is not None and ag.conn_id != conn_id and now - ag.last_seen < core.cfg.ping_timeout:
            # one live connection per agent id: a second process holding the id (and perhaps its
            # credential) must not take over a connected agent and have its tasks reported LOST.
            # The first is gone once its connection closes or it misses its ping deadline; the
            # agent retries with backoff until then (a restarted agent's old socket closes at once).
            core.counters["agent_takeovers_refused"] = core.counters.get("agent_takeovers_refused", 0) + 1
            fx.append(SendToAgent(conn_id, ac.Refused(
                message=f"agent {aid} is connected on another connection; retry once that one is gone")))
            fx.append(CloseAgent(conn_id, "agent id already connected"))
            return
        if aid is None:
            aid = new_agent_id(core.master_id, core.agent_seq)
            core.agent_seq += 1
        fx.append(
            Persist(
                (ops.AgentAdmitted(aid, reg.hostname, reg.port, str(total), _attrs_string(reg.attributes), now),)
            )
        )
        if principal is not None and aid not in core.agent_principals:
            core.agent_principals[aid] = principal  # the id belongs to this credential from now on
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
            core.agents[aid] = ag
            core.counters["slave_registrations"] += 1
            was_unreachable = False
            same_conn = False
        else:
            was_unreachable = ag.phase is AgentPhase.UNREACHABLE
            same_conn = ag.conn_id == conn_id
            if ag.conn_id is not None and ag.conn_id != conn_id:
                core.conns.pop(ag.conn_id, None)
                fx.append(CloseAgent(ag.conn_id, "agent re-registered on a new connection"))
            ag.move(AgentPhase.REGISTERED)
            ag.hostname, ag.port, ag.total, ag.attributes = reg.hostname, reg.port, total, reg.attributes
            ag.reregistered_time = now
            ag.unreachable_since = None
            core.counters["slave_reregistrations"] += 1
        ag.conn_id = conn_id
        ag.ip = ip
        core.maintenance_rules.joined(ag, now)
        ag.last_seen = now
        ag.next_ping = now + core.cfg.ping_interval
        core._touch(min(ag.next_ping, now + core.cfg.ping_timeout))
        ag.version = reg.version
        ag.capabilities = reg.capabilities
        core.conns[conn_id] = aid
        fx.append(
            SendToAgent(
                conn_id,
                ac.Registered(
                    agent_id=mesos.AgentID(aid),
                    master_id=core.master_id,
                    epoch=core.epoch,
                    ping_interval=core.cfg.ping_interval,
                    ping_timeout=core.cfg.ping_timeout,
                ),
            )
        )
        if ag.in_allocator:
            core.offer_book.alloc_event(ae.AgentRemoved(agent_id=aid, reason="agent re-registered"), now, fx)
        core.offer_book.alloc_event(
            ae.AgentAdded(agent_id=aid, hostname=ag.hostname, total=self.alloc_total(ag), attributes=_attr_dict(ag.attributes)),
            now,
            fx,
        )
        ag.in_allocator = True
        if ag.draining:
            ag.move(AgentPhase.DRAINING)
            core.offer_book.alloc_event(ae.AgentDeactivated(agent_id=aid, reason="agent draining (maintenance)"), now, fx)
        core.feed.agent_added(ag, fx)
        self.merge_tasks(ag, reg, was_unreachable, same_conn, now, fx)
        if ag.drain is not None:  # draining: what it still runs is killed now
            core.drain_book.kill(ag, fx)
            core.drain_book.progress(ag, now, fx)
        if core.recovery_deadline is not None and not core.recovering():
            core.recovery_deadline = None

    def alloc_total(self, ag: AgentRec) -> Resources:
        return ag.effective_total

    def merge_tasks(
        self, ag: AgentRec, reg: ac.Register, was_unreachable: bool, same_conn: bool, now: float, fx: list[Effect]
    ) -> None:
        """A re-registering agent's tasks are merged back; their allocations are recovered."""
        core = self.core
        infos = {fi.id.value: fi for fi in reg.frameworks if fi.id is not None}
        reported: set[tuple[str, str]] = set()
        shutdown: set[str] = set()
        late = ag.agent_id in core.removed_agent_ids
        for rt in reg.tasks:
            fid, tid = rt.framework_id.value, rt.task_id.value
            if fid in core.removed_framework_ids:
                shutdown.add(fid)
                continue
            if late:
                # the agent was removed and its tasks reported GONE: they must not run on (policy)
                if not is_terminal(rt.state):
                    core._to_agent(ag.agent_id, ac.KillTask(framework_id=rt.framework_id, task_id=rt.task_id), fx)
                continue
            fw = core.frameworks.get(fid)
            if fw is None:
                info = infos.get(fid) or mesos.FrameworkInfo(user="", name="", id=rt.framework_id)
                deadline = now + max(float(info.failover_timeout or 0.0), core.cfg.agent_reregister_timeout)
                fw = core.framework_book.new(fid, info, FrameworkPhase.RECOVERED, now, deadline)
                core.frameworks[fid] = fw
                core.feed.framework_added(fw, fx)
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
                    core._to_agent(ag.agent_id, ac.KillTask(framework_id=rt.framework_id, task_id=rt.task_id), fx)
                task.resync(rt.state)
                if fw.partition_aware:
                    core.task_book.master_update(
                        fw, tid, rt.state, R.REASON_AGENT_REREGISTERED, "Agent re-registered", now, fx, ag.agent_id, task.executor_id
                    )
                core.feed.task_updated(task, rt.state, rt.status, now, fx)
            else:
                moved = task.state is not rt.state
                task.resync(rt.state)
                if moved:
                    core.feed.task_updated(task, rt.state, rt.status, now, fx)
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
                core.feed.task_added(task, fx)
            if rt.executor_id is not None:
                fw.executors.setdefault(
                    (ag.agent_id, rt.executor_id.value), mesos.ExecutorInfo(executor_id=rt.executor_id)
                )
            ag.tasks.add((fid, tid))
            core.offer_book.alloc_event(
                ae.AllocationRecovered(
                    framework_id=fid, agent_id=ag.agent_id, task_id=tid, resources=task.resources, role=task.role
                ),
                now,
                fx,
            )
        # tasks the master thought were here but the agent no longer has: lost
        for fid, tid in sorted(ag.tasks - reported):
            fw = core.frameworks.get(fid)
            task = fw.tasks.get(tid) if fw else None
            if fw is None or task is None:
                ag.tasks.discard((fid, tid))
                continue
            if task.state is TS.TASK_STAGING and same_conn:
                # a launch sent on this same connection may still be in flight (ReconcileRace):
                # keep the task and its allocation
                core.offer_book.alloc_event(
                    ae.AllocationRecovered(
                        framework_id=fid, agent_id=ag.agent_id, task_id=tid, resources=task.resources, role=task.role
                    ),
                    now,
                    fx,
                )
                continue
            if not task.lost_reported:  # (else the framework had its terminal update: LOST)
                core.task_book.master_update(fw, tid, TS.TASK_GONE, R.REASON_AGENT_REREGISTERED, "Task not on the agent", now, fx, ag.agent_id)
            core.task_book.finish(fw, task, TS.TASK_LOST, now, fx, recover=False)
        for fid in sorted(shutdown):
            core._to_agent(ag.agent_id, ac.ShutdownFramework(framework_id=mesos.FrameworkID(fid)), fx)
        core.removed_agent_ids.discard(ag.agent_id)

    def of_conn(self, conn_id: int) -> AgentRec | None:
        core = self.core
        aid = core.conns.get(conn_id)
        if aid is None:
            return None
        ag = core.agents.get(aid)
        if ag is None or ag.conn_id != conn_id:
            return None
        return ag

    def conn_lost(self, conn_id: int, now: float, fx: list[Effect]) -> None:
        core = self.core
        ag = self.of_conn(conn_id)
        core.conns.pop(conn_id, None)
        if ag is None:
            return
        ag.conn_id = None
        # keep it registered until the ping timeout: it will likely reconnect (N2)
        if ag.in_allocator:
            core.offer_book.alloc_event(ae.AgentDeactivated(agent_id=ag.agent_id, reason="agent disconnected"), now, fx)

    def message(self, conn_id: int, body: ac.Body, now: float, fx: list[Effect]) -> None:
        core = self.core
        ag = self.of_conn(conn_id)
        if ag is None:
            core.counters["dropped_messages"] += 1
            return
        ag.last_seen = now
        match body:
            case ac.Pong():
                pass
            case ac.StatusUpdateMsg():
                core.task_book.status_update(ag, body, now, fx)
            case ac.SlackEstimate():
                try:
                    slack = Resources.from_mesos(body.resources).flatten()
                except (ResourceError, TypeError, ValueError):
                    return
                ag.slack = slack
                core.offer_book.alloc_event(ae.AgentSlackEstimated(agent_id=ag.agent_id, slack=slack), now, fx)
            case ac.UsageReport():
                core.task_book.usage_report(ag, body)
            case ac.ExecutorMessageMsg():
                fw = core.frameworks.get(body.framework_id.value)
                if fw is not None:
                    core._send(fw, mesos.Event.make_message(mesos.AgentID(ag.agent_id), body.executor_id, body.data), fx)
            case ac.ExecutorExited():
                fw = core.frameworks.get(body.framework_id.value)
                if fw is not None:
                    fw.executors.pop((ag.agent_id, body.executor_id.value), None)
                    core._send(
                        fw, mesos.Event.make_failure(mesos.AgentID(ag.agent_id), body.executor_id, body.status), fx
                    )
            case ac.Register():
                self.register(conn_id, body, now, fx)
            case ac.Unregister():  # retiring (SIGUSR1): offer nothing more on it; it goes soon
                if ag.in_allocator:
                    core.offer_book.alloc_event(ae.AgentDeactivated(agent_id=ag.agent_id, reason=body.reason or "agent is retiring"), now, fx)
            case _:
                core.counters["dropped_messages"] += 1

    def remove(self, ag: AgentRec, now: float, fx: list[Effect]) -> None:
        core = self.core
        fx.append(Persist((ops.AgentRemoved(ag.agent_id),)))
        core.maintenance_rules.agent_gone(ag.agent_id, fx)
        if ag.phase is not AgentPhase.UNREACHABLE:  # (its unreachability was published already)
            core.feed.agent_removed(ag.agent_id, fx)
        ag.move(AgentPhase.REMOVED)
        for fid, tid in sorted(ag.tasks):
            fw = core.frameworks.get(fid)
            task = fw.tasks.get(tid) if fw else None
            if fw is None or task is None:
                continue
            if not task.lost_reported:  # (else the framework had its one terminal update: LOST)
                core.task_book.master_update(fw, tid, TS.TASK_GONE, R.REASON_AGENT_REMOVED, "Agent removed", now, fx, ag.agent_id)
                # its terminal update is this GONE (LOST): what the agent reports of it if it comes
                # back (the kill) is acknowledged on the framework's behalf, not sent
                task.lost_reported = True
            core.task_book.finish(fw, task, TS.TASK_GONE, now, fx, recover=False)
        del core.agents[ag.agent_id]
        core.removed_agent_ids.add(ag.agent_id)

    def mark_unreachable(self, ag: AgentRec, now: float, reason: str, fx: list[Effect]) -> None:
        core = self.core
        fx.append(Persist((ops.AgentMarkedUnreachable(ag.agent_id, now),)))
        core.maintenance_rules.agent_gone(ag.agent_id, fx)
        ag.move(AgentPhase.UNREACHABLE)
        ag.unreachable_since = now
        core._touch(now + core.cfg.unreachable_gc)
        core.counters["slave_removals"] += 1
        core.feed.agent_removed(ag.agent_id, fx)
        if ag.conn_id is not None:
            core.conns.pop(ag.conn_id, None)
            fx.append(CloseAgent(ag.conn_id, reason))
            ag.conn_id = None
        if ag.in_allocator:
            core.offer_book.alloc_event(ae.AgentRemoved(agent_id=ag.agent_id, reason=reason), now, fx)
            ag.in_allocator = False
        for fid, tid in sorted(ag.tasks):
            fw = core.frameworks.get(fid)
            task = fw.tasks.get(tid) if fw else None
            if fw is None or task is None or task.state is TS.TASK_UNREACHABLE:
                continue
            task.move(TS.TASK_UNREACHABLE)
            message = f"Agent {ag.agent_id} is unreachable: {reason}"
            if task.lost_reported:
                # unreachable again before the kill on its return landed: the framework had its
                # one terminal update (LOST) the first time; only the operator feed hears of it
                status = core.task_book.master_status(tid, TS.TASK_UNREACHABLE, R.REASON_AGENT_REMOVED, message, now, ag.agent_id, task.executor_id)
            else:
                task.lost_reported = not fw.partition_aware  # it sees TASK_LOST: its one terminal update
                status = core.task_book.master_update(fw, tid, TS.TASK_UNREACHABLE, R.REASON_AGENT_REMOVED, message, now, fx, ag.agent_id, task.executor_id)
            core.feed.task_updated(task, TS.TASK_UNREACHABLE, status, now, fx)
        for fw in core.frameworks.values():
            if fw.connected:
                core._send(fw, mesos.Event.make_failure(mesos.AgentID(ag.agent_id)), fx)


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


def _role_of(resources: tuple[mesos.Resource, ...], default: str) -> str:
    """The role a task's resources were allocated to (``allocation_info``, as offered to
    MULTI_ROLE frameworks), else ``default``."""
    for r in resources:
        if r.allocation_info is not None and r.allocation_info.role:
            return r.allocation_info.role
    return default
