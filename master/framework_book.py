"""The framework book of the master's pure core (``MasterState.framework_book``): a framework's
life as the master sees it. SUBSCRIBE (new, re-subscribed, failed over to a new stream, or a
recovered one coming back), UPDATE_FRAMEWORK, REQUEST (demands for the allocator), the stream
closing (DISCONNECTED until ``failover_timeout``), the cap on abandoned subscriptions, and
removal (teardown, failover timeout, abandoned: its tasks KILLED, its executors shut down).

The records are ``FrameworkRec`` (``master.records``) in the core's ``frameworks``, with
``streams`` (stream id -> framework id); the book reaches them, and the books it tells, through
``FrameworkHost``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

import attrs

from master import registry_ops as ops
from master.allocator import events as ae
from master.allocator.constraints import ConstraintError
from master.core_base import TS, R, StateConfig, roles_of
from master.events import (
    CloseStream,
    Effect,
    Persist,
    SendEvent,
    SubscribeReceived,
)
from master.lifecycles import FrameworkPhase
from master.offer_constraints import min_allocatable, offer_constraints
from master.operator_events import OperatorFeed
from master.read_model import FrameworkView
from master.records import FrameworkRec
from protocol import agent_channel as ac
from protocol import codec, mesos
from protocol.acls import subscribe_problem
from protocol.ids import new_framework_id, role_error
from protocol.mesos.scheduler import OfferConstraints
from protocol.resources import ResourceError, Resources

if TYPE_CHECKING:
    from master.drain_book import DrainBook
    from master.maintenance_rules import MaintenanceRules
    from master.offer_book import OfferBook
    from master.task_book import TaskBook

__pure__ = True

_WAITING = (FrameworkPhase.DISCONNECTED, FrameworkPhase.RECOVERED)  # phases with a failover deadline


class FrameworkHost(Protocol):
    """What the framework book needs of the core: the records (frameworks, their streams, the
    removed ids, the completed ones), the settings, counters and the master's identity, the
    operator feed, the other books (offers: the allocator; tasks: a removed framework's tasks
    end; drain: a draining agent may be drained once its tasks ended; maintenance: inverse
    offers follow a framework's stream) and the core's ways to send and to set a deadline."""

    master_id: str
    master_info: mesos.MasterInfo
    cfg: StateConfig
    counters: dict[str, int]
    calls: dict[str, int]
    unauthorized: int
    framework_seq: int
    frameworks: dict[str, FrameworkRec]
    completed_frameworks: deque[FrameworkRec]
    removed_framework_ids: set[str]
    streams: dict[str, str]
    agent_unavailability: dict[str, mesos.Unavailability]
    feed: OperatorFeed
    offer_book: OfferBook
    task_book: TaskBook
    drain_book: DrainBook
    maintenance_rules: MaintenanceRules

    def _to_agent(self, agent_id: str, body: ac.Body, fx: list[Effect]) -> bool: ...
    def _touch(self, deadline: float) -> None: ...


class FrameworkBook:
    """Frameworks: subscription, update, demands, disconnection, removal, over a ``FrameworkHost``."""

    __slots__ = ("core",)

    def __init__(self, core: FrameworkHost) -> None:
        self.core = core

    def recover(self, entries: Iterable[ops.FrameworkEntry], removed: Iterable[str], now: float) -> None:
        """The registry's frameworks after a (re)start: RECOVERED until their deadline (the one
        persisted when they disconnected, else their failover timeout, at least the agents'
        re-registration window, from now); the ids removed for good."""
        core = self.core
        grace = core.cfg.agent_reregister_timeout
        for f in entries:
            try:
                info = codec.decode_msgpack(mesos.FrameworkInfo, f.info)
            except codec.DecodeError:
                continue
            deadline = f.deadline if f.deadline is not None else now + max(f.failover_timeout, grace)
            core.frameworks[f.framework_id] = self.new(f.framework_id, info, FrameworkPhase.RECOVERED, f.registered_at, deadline)
        core.removed_framework_ids |= set(removed)

    # --- timers (``MasterState`` calls ``tick`` when housekeeping is due) -----------------------

    def tick(self, now: float, fx: list[Effect]) -> None:
        """Failover deadlines: a DISCONNECTED or RECOVERED framework whose deadline has passed is
        removed ("Framework failover timeout"), in the order the frameworks were added."""
        for fw in list(self.core.frameworks.values()):
            if fw.deadline is not None and fw.deadline <= now and fw.phase in _WAITING:
                self.remove(fw, now, "Framework failover timeout", fx)

    def next_deadline(self) -> float | None:
        """The earliest failover deadline of a DISCONNECTED or RECOVERED framework (one scan)."""
        first: float | None = None
        for fw in self.core.frameworks.values():
            d = fw.deadline
            if d is not None and fw.phase in _WAITING and (first is None or d < first):
                first = d
        return first

    def new(
        self, fid: str, info: mesos.FrameworkInfo, phase: FrameworkPhase, now: float, deadline: float | None = None
    ) -> FrameworkRec:
        roles = roles_of(info)
        caps = frozenset(c.type.value for c in info.capabilities if c.type is not None)
        return FrameworkRec(
            framework_id=fid,
            info=attrs.evolve(info, id=mesos.FrameworkID(fid)),
            phase=phase,
            roles=roles,
            capabilities=caps,
            registered_time=now,
            principal=info.principal,
            deadline=deadline,
        )

    def subscribe_error(self, stream_id: str, message: str, fx: list[Effect]) -> None:
        fx.append(SendEvent(stream_id, mesos.Event.make_error(message)))
        fx.append(CloseStream(stream_id, message))

    def subscribe(self, ev: SubscribeReceived, now: float, fx: list[Effect]) -> None:
        core = self.core
        info = ev.subscribe.framework_info
        core.calls["SUBSCRIBE"] = core.calls.get("SUBSCRIBE", 0) + 1
        err = self.check_info(info)
        if err:
            self.subscribe_error(ev.stream_id, err, fx)
            return
        fid = info.id.value if info.id is not None else None
        if fid is not None and fid in core.removed_framework_ids:
            self.subscribe_error(ev.stream_id, f"Framework {fid} has been removed", fx)
            return
        fw = core.frameworks.get(fid) if fid is not None else None
        problem = subscribe_problem(
            core.cfg.acls, core.cfg.authenticate_frameworks, ev.authenticated, info.principal,
            roles_of(info), fw.principal if fw is not None else None, fw is not None,
        )
        if problem is not None:
            core.unauthorized += 1
            self.subscribe_error(ev.stream_id, problem, fx)
            return
        if fw is not None and fw.principal != info.principal and fw.phase is not FrameworkPhase.RECOVERED:
            self.subscribe_error(ev.stream_id, "Framework principal changed on re-subscription", fx)
            return
        try:
            constraints = offer_constraints(ev.subscribe.offer_constraints, roles_of(info))
        except ConstraintError as e:
            self.subscribe_error(ev.stream_id, str(e), fx)
            return
        if fid is None:
            fid = new_framework_id(core.master_id, core.framework_seq)
            core.framework_seq += 1
        info = attrs.evolve(info, id=mesos.FrameworkID(fid))
        failover = float(info.failover_timeout or 0.0)
        fx.append(Persist((ops.FrameworkAdded(fid, codec.encode_msgpack(info), failover, now),)))
        added = fw is None
        if fw is None:
            fw = self.new(fid, info, FrameworkPhase.SUBSCRIBED, now)
            core.frameworks[fid] = fw
        else:
            if fw.stream_id is not None:
                # failover: the superseded stream is closed; its calls no longer match
                fw.last_stream_id = fw.stream_id
                core.streams.pop(fw.stream_id, None)
                fx.append(CloseStream(fw.stream_id, "framework failed over to a new connection"))
            fresh = self.new(fid, info, FrameworkPhase.SUBSCRIBED, fw.registered_time)
            fw.info, fw.roles, fw.capabilities, fw.principal = fresh.info, fresh.roles, fresh.capabilities, fresh.principal
            fw.move(FrameworkPhase.SUBSCRIBED)
            fw.reregistered_time = now
            fw.deadline = None
        fw.stream_id = ev.stream_id
        core.streams[ev.stream_id] = fid
        if core.agent_unavailability:
            # inverse offers sent to an earlier stream are void: the new one gets them again
            core.maintenance_rules.framework_gone(fw, forget=False)
            core.maintenance_rules.inverse_soon(now)
        if added:
            core.feed.framework_added(fw, fx)
        else:
            core.feed.framework_updated(fw, fx)
        fx.append(
            SendEvent(
                ev.stream_id,
                mesos.Event.make_subscribed(mesos.FrameworkID(fid), core.master_info, core.cfg.heartbeat_interval),
            )
        )
        fx.append(SendEvent(ev.stream_id, mesos.Event.make_heartbeat()))
        # (re-)adding updates roles/capabilities and activates it in the allocator; allocations of
        # tasks agents reported before the framework came back were recovered at re-registration
        core.offer_book.alloc_event(
            ae.FrameworkAdded(
                framework_id=fid,
                roles=fw.roles,
                capabilities=fw.capabilities,
                active=True,
                suppressed_roles=frozenset(ev.subscribe.suppressed_roles),
                offer_constraints=constraints,
                min_allocatable=min_allocatable(info.offer_filters),
            ),
            now,
            fx,
        )

    def check_info(self, info: mesos.FrameworkInfo) -> str | None:
        multi = any(c.type is mesos.CapabilityType.MULTI_ROLE for c in info.capabilities)
        if multi and info.role is not None and info.roles:
            return "'FrameworkInfo.role' must not be set when 'FrameworkInfo.roles' is used (MULTI_ROLE)"
        if not multi and info.roles:
            return "'FrameworkInfo.roles' requires the MULTI_ROLE capability"
        for role in (info.roles if multi else (info.role or "*",)):
            err = role_error(role)
            if err:
                return f"invalid role: {err}"
        if len(set(info.roles)) != len(info.roles):
            return "'FrameworkInfo.roles' contains duplicates"
        try:
            min_allocatable(info.offer_filters)
        except ValueError as e:
            return f"'FrameworkInfo.offer_filters': {e}"
        ft = info.failover_timeout
        if ft is not None and (not math.isfinite(ft) or ft < 0):
            return "'FrameworkInfo.failover_timeout' must be a finite non-negative number"
        if info.id is not None:
            from protocol.ids import valid_path_id

            if not valid_path_id(info.id.value):
                return "invalid framework ID"
        return None

    def update_problem(
        self, fw: FrameworkView, info: mesos.FrameworkInfo, constraints: OfferConstraints | None = None
    ) -> str | None:
        """Why an UPDATE_FRAMEWORK cannot apply ``info`` and ``constraints`` (Mesos' rules: a valid
        FrameworkInfo whose principal, user and checkpoint are the ones it subscribed with, offer
        constraints the allocator can evaluate for its roles), or None."""
        core = self.core
        err = self.check_info(info)
        if err:
            return err
        try:
            offer_constraints(constraints, roles_of(info))
        except ConstraintError as e:
            return str(e)
        old = fw.info
        for name in ("principal", "user", "checkpoint"):
            if getattr(info, name) != getattr(old, name):
                return f"Updating 'FrameworkInfo.{name}' is unsupported"
        roles = set(roles_of(info))
        problem = subscribe_problem(
            core.cfg.acls, core.cfg.authenticate_frameworks, fw.principal, info.principal, tuple(sorted(roles)),
            fw.principal, True,
        )
        return problem

    def update(self, fw: FrameworkRec, uf: mesos.UpdateFramework, now: float, fx: list[Effect]) -> None:
        """UPDATE_FRAMEWORK: the new FrameworkInfo (roles, capabilities, name, failover timeout,
        labels, ...) and suppressed roles take effect without re-subscribing (the shell checked
        ``update_framework_problem``)."""
        core = self.core
        fid = fw.framework_id
        info = attrs.evolve(uf.framework_info, id=mesos.FrameworkID(fid))
        try:
            constraints = offer_constraints(uf.offer_constraints, roles_of(info))
        except ConstraintError:
            return  # the shell refuses such a call (``update_framework_problem``)
        fresh = self.new(fid, info, FrameworkPhase.SUBSCRIBED, fw.registered_time)
        fw.info, fw.roles, fw.capabilities = fresh.info, fresh.roles, fresh.capabilities
        fx.append(Persist((ops.FrameworkAdded(fid, codec.encode_msgpack(info), float(info.failover_timeout or 0.0), now),)))
        core.feed.framework_updated(fw, fx)
        core.offer_book.alloc_event(
            ae.FrameworkAdded(
                framework_id=fid, roles=fw.roles, capabilities=fw.capabilities, active=True,
                suppressed_roles=frozenset(uf.suppressed_roles),
                offer_constraints=constraints,
                min_allocatable=min_allocatable(info.offer_filters),
            ),
            now,
            fx,
        )

    def request(self, fw: FrameworkRec, requests: Iterable[mesos.Request], now: float, fx: list[Effect]) -> None:
        demands: list[ae.Demand] = []
        for r in requests:
            try:
                shape = Resources.from_mesos(r.resources)
            except (ResourceError, TypeError, ValueError):
                continue
            if shape.is_empty():
                continue
            count = r.count if r.count is not None and 0 < r.count <= 100_000 else 1
            ports = r.ports if isinstance(r.ports, int) and 0 < r.ports <= 65_535 else 0
            demands.append(
                ae.Demand(
                    shape=shape,
                    count=count,
                    gang_id=r.gang_id,
                    gang_min=r.gang_min,
                    revocable_ok=bool(r.revocable_ok),
                    priority=r.priority or 0,
                    role=r.role if r.role in fw.roles else None,
                    ports=ports,
                )
            )
        self.core.offer_book.alloc_event(ae.DemandDeclared(framework_id=fw.framework_id, demands=tuple(demands)), now, fx)

    def stream_closed(self, stream_id: str, now: float, fx: list[Effect]) -> None:
        core = self.core
        fid = core.streams.pop(stream_id, None)
        if fid is None:
            return
        fw = core.frameworks.get(fid)
        if fw is None or fw.stream_id != stream_id or fw.phase is not FrameworkPhase.SUBSCRIBED:
            return
        fw.move(FrameworkPhase.DISCONNECTED)
        fw.last_stream_id, fw.stream_id = fw.stream_id, None
        fw.unregistered_time = now
        fw.deadline = now + fw.failover_timeout
        core.maintenance_rules.framework_gone(fw, forget=False)
        core._touch(fw.deadline)
        fx.append(Persist((ops.FrameworkDisconnected(fid, fw.deadline),)))
        core.feed.framework_updated(fw, fx)
        core.offer_book.alloc_event(ae.FrameworkDeactivated(framework_id=fid), now, fx)
        if _never_ran(fw):
            self.trim_abandoned(fw.principal, now, fx)

    def trim_abandoned(self, principal: str | None, now: float, fx: list[Effect]) -> None:
        """Abandoned subscriptions (disconnected, never ran a task: nothing to fail over to) keep
        their ``failover_timeout`` as in Mesos, but at most ``abandoned_frameworks_per_principal``
        of them per principal (or per anonymous client) are kept: beyond that the oldest is
        removed, so a client subscribing and walking away repeatedly cannot keep hundreds of
        frameworks listed for their whole failover timeout."""
        core = self.core
        cap = core.cfg.abandoned_frameworks_per_principal
        idle = [
            f for f in core.frameworks.values()
            if f.phase is FrameworkPhase.DISCONNECTED and f.principal == principal and _never_ran(f)
        ]
        if len(idle) <= cap:
            return
        idle.sort(key=lambda f: (f.unregistered_time or 0.0, f.framework_id))
        for f in idle[: len(idle) - cap]:
            self.remove(
                f, now, f"Framework abandoned: disconnected without having run a task, beyond the {cap} kept per principal", fx,
            )

    def remove(self, fw: FrameworkRec, now: float, reason: str, fx: list[Effect]) -> None:
        core = self.core
        fid = fw.framework_id
        fx.append(Persist((ops.FrameworkRemoved(fid, now),)))
        if fw.stream_id is not None:
            core.streams.pop(fw.stream_id, None)
            fx.append(CloseStream(fw.stream_id, reason))
            fw.stream_id = None
        fw.move(FrameworkPhase.REMOVED)
        fw.unregistered_time = now
        fw.deadline = None
        core.maintenance_rules.framework_gone(fw, forget=True)
        agents = {t.agent_id for t in fw.tasks.values()} | {aid for (aid, _) in fw.executors}
        for aid in sorted(agents):
            core._to_agent(aid, ac.ShutdownFramework(framework_id=mesos.FrameworkID(fid)), fx)
        for task in list(fw.tasks.values()):
            core.task_book.finish(
                fw, task, TS.TASK_KILLED, now, fx, recover=False, reason=R.REASON_FRAMEWORK_REMOVED, message=reason
            )
        fw.executors.clear()
        core.offer_book.alloc_event(ae.FrameworkRemoved(framework_id=fid), now, fx)
        del core.frameworks[fid]
        core.removed_framework_ids.add(fid)
        core.completed_frameworks.append(fw)
        core.counters["frameworks_removed"] += 1
        core.feed.framework_removed(fw, fx)
        core.drain_book.check_all(now, fx)  # its tasks ended: a draining agent may be drained now


def _never_ran(fw: FrameworkRec) -> bool:
    """The framework has no task and never had one the master remembers, nor an executor."""
    return not fw.tasks and not fw.completed and not fw.awaiting_ack and not fw.executors
