"""The maintenance rules of the master's pure core (``MasterState.maintenance_rules``):
schedule updates, machines going DOWN and coming back UP, inverse offers and the frameworks'
answers (the data and the validation are in ``master.maintenance``: the core's ``maintenance``
(``MaintenanceBook``) and ``inverse`` (``InverseOfferBook``); see its docstring for Mesos'
rules). The component reaches them, and the books it tells, through ``MaintenanceHost``.

* A schedule update persists the book, then every agent whose unavailability changed (newly
  DRAINING, another window, back UP) has its inverse offers rescinded and its answers forgotten,
  and its outstanding offers rescinded so they are made again with (or without) the
  ``unavailability``.
* START_MAINTENANCE: each agent on the machines is told to shut down (its frameworks' executors
  and tasks are shut down, ``Refused``, connection closed) and removed: its tasks become
  TASK_GONE (TASK_LOST for frameworks that are not PARTITION_AWARE), frameworks get FAILURE. While
  the machine is DOWN its agents are refused (``master.agents``).
* Inverse offers: on every allocation pass (and when an answer's filter expires), each connected
  framework with a task or an executor on an agent of a DRAINING machine that has no outstanding
  inverse offer there and no unexpired filter gets one (an ``INVERSE_OFFERS`` event, as Mesos 1.x
  sends them to v1 schedulers). ACCEPT/DECLINE_INVERSE_OFFERS record the answer (UNKNOWN until
  then) and set a filter (``refuse_seconds``, 5 s by default as Mesos); the answer is a hint for
  the operator, nothing else changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from master import registry_ops as ops
from master.accept_checks import sane_refuse
from master.allocator import events as ae
from master.events import (
    CloseAgent,
    Effect,
    MaintenanceScheduleUpdated,
    MaintenanceStarted,
    MaintenanceStopped,
    Persist,
    SendToAgent,
)
from master.lifecycles import AgentPhase
from master.maintenance import InverseOfferBook, InverseOfferRec, Machine, MaintenanceBook
from master.read_model import MaintenanceEvent
from master.records import AgentRec, FrameworkRec
from protocol import agent_channel as ac
from protocol import mesos

if TYPE_CHECKING:
    from master.agents import AgentBook
    from master.offer_book import OfferBook

__pure__ = True


class MaintenanceHost(Protocol):
    """What the maintenance rules need of the core: the maintenance records (the modes, the
    inverse offers, each agent's unavailability, when to make inverse offers next), the agents
    and frameworks, the counters, the offer book (the allocator, agent URLs), the agent book
    (an agent on a machine going DOWN is removed) and the core's way to send."""

    counters: dict[str, int]
    frameworks: dict[str, FrameworkRec]
    agents: dict[str, AgentRec]
    conns: dict[int, str]
    maintenance: MaintenanceBook
    inverse: InverseOfferBook
    agent_unavailability: dict[str, mesos.Unavailability]
    inverse_due: float | None
    offer_book: OfferBook
    agent_book: AgentBook

    def _send(self, fw: FrameworkRec, event: mesos.Event, fx: list[Effect]) -> None: ...


class MaintenanceRules:
    """Machines and inverse offers, over a ``MaintenanceHost``."""

    __slots__ = ("core",)

    def __init__(self, core: MaintenanceHost) -> None:
        self.core = core

    def recover(self, encoded: str) -> None:
        """The registry's maintenance modes after a (re)start (the last ``MaintenanceSet``)."""
        try:
            self.core.maintenance = MaintenanceBook.decode(encoded)
        except (ValueError, KeyError, TypeError):
            self.core.maintenance = MaintenanceBook()  # (never written so: only a damaged registry)

    def problem(self, ev: MaintenanceEvent) -> str | None:
        """Why the machine modes do not allow ``ev`` now (answered 400), or None."""
        book = self.core.maintenance
        match ev:
            case MaintenanceScheduleUpdated():
                return book.update_problem(ev.schedule)
            case MaintenanceStarted():
                return book.down_problem(ev.machines)
            case MaintenanceStopped():
                return book.up_problem(ev.machines)

    def status(self) -> mesos.ClusterStatus:
        """Mesos' ``ClusterStatus``: each DRAINING machine with its frameworks' answers to the
        inverse offers of its agents, and the DOWN machines."""
        core = self.core
        book = core.maintenance
        per_machine: dict[Machine, list[mesos.InverseOfferStatus]] = {}
        if book.schedule.windows:
            for ag in core.agents.values():
                hit = book.machine_of(ag.hostname, ag.ip)
                if hit is not None and hit[0] not in book.down:
                    per_machine.setdefault(hit[0], []).extend(core.inverse.agent_statuses(ag.agent_id))
        return book.status(sorted(per_machine.items()))

    def unavailability_of(self, agent_id: str) -> mesos.Unavailability | None:
        """The agent's unavailability while its machine is DRAINING (its offers carry it)."""
        return self.core.agent_unavailability.get(agent_id)

    def schedule(self) -> mesos.MaintenanceSchedule:
        return self.core.maintenance.schedule.to_mesos()

    def inverse_offers_of(self, framework_id: str) -> tuple[mesos.InverseOffer, ...]:
        """The framework's outstanding inverse offers (GET_FRAMEWORKS)."""
        core = self.core
        if not core.inverse.outstanding:
            return ()
        return tuple(
            self.mesos_inverse_offer(r.offer_id, r.framework_id, r.agent_id, r.unavailability)
            for r in core.inverse.outstanding.values()
            if r.framework_id == framework_id
        )

    def apply(self, ev: MaintenanceEvent, now: float, fx: list[Effect]) -> None:
        core = self.core
        if self.problem(ev) is not None:
            return  # the edge answered the operator; the modes moved since: no change
        book = core.maintenance
        match ev:
            case MaintenanceScheduleUpdated():
                book.schedule = ev.schedule
            case MaintenanceStarted():
                book.start(ev.machines)
            case MaintenanceStopped():
                book.stop(ev.machines)
        fx.append(Persist((ops.MaintenanceSet(book.encode()),)))
        if isinstance(ev, MaintenanceStarted):
            for ag in sorted(core.agents.values(), key=lambda a: a.agent_id):
                m = book.is_down(ag.hostname, ag.ip)
                if m is not None:
                    self.machine_down(ag, m, now, fx)
        self.refresh(now, fx)
        self.make_inverse_offers(now, fx)

    def refresh(self, now: float, fx: list[Effect]) -> None:
        """Each agent's unavailability after the book changed; an agent whose unavailability
        changed has its inverse offers rescinded (answers forgotten) and its offers made again."""
        core = self.core
        old = core.agent_unavailability
        new: dict[str, mesos.Unavailability] = {}
        book = core.maintenance
        if book.schedule.windows:
            for ag in core.agents.values():
                if ag.phase is AgentPhase.REMOVED:
                    continue
                hit = book.machine_of(ag.hostname, ag.ip)
                if hit is not None and hit[0] not in book.down:
                    new[ag.agent_id] = hit[1].unavailability()
        core.agent_unavailability = new
        for aid in sorted(set(old) | set(new)):
            if old.get(aid) == new.get(aid):
                continue
            self.rescind_inverse(core.inverse.drop_agent(aid), fx)
            rec = core.agents.get(aid)
            if rec is not None and rec.in_allocator and not rec.draining:
                # its offers go back and are made again, carrying the new unavailability
                core.offer_book.alloc_event(ae.AgentDeactivated(agent_id=aid, reason="maintenance schedule changed"), now, fx)
                core.offer_book.alloc_event(ae.AgentReactivated(agent_id=aid), now, fx)

    def machine_down(self, ag: AgentRec, m: Machine, now: float, fx: list[Effect]) -> None:
        """START_MAINTENANCE: the agent is told to shut down and removed (Mesos)."""
        core = self.core
        reason = f"Machine '{m.label()}' is DOWN for maintenance"
        aid = ag.agent_id
        executors_of = {f.framework_id for f in core.frameworks.values() for (a, _) in f.executors if a == aid}
        if ag.conn_id is not None and ag.reachable:
            for fid in sorted({fid for fid, _ in ag.tasks} | executors_of):
                fx.append(SendToAgent(ag.conn_id, ac.ShutdownFramework(framework_id=mesos.FrameworkID(fid))))
            fx.append(SendToAgent(ag.conn_id, ac.Refused(message=reason)))
            fx.append(CloseAgent(ag.conn_id, reason))
        if ag.conn_id is not None:
            core.conns.pop(ag.conn_id, None)
            ag.conn_id = None
        if ag.in_allocator:
            core.offer_book.alloc_event(ae.AgentRemoved(agent_id=aid, reason=reason), now, fx)
            ag.in_allocator = False
        for fid in executors_of:
            fw = core.frameworks[fid]
            for key in [k for k in fw.executors if k[0] == aid]:
                del fw.executors[key]
        was_listed = ag.phase is not AgentPhase.UNREACHABLE
        core.counters["slave_removals"] += 1
        core.agent_book.remove(ag, now, fx)
        if was_listed:
            for fw in core.frameworks.values():
                if fw.connected:
                    core._send(fw, mesos.Event.make_failure(mesos.AgentID(aid)), fx)

    def joined(self, ag: AgentRec, now: float) -> None:
        """An agent (re-)registered: whether it is on a DRAINING machine, and with what
        unavailability (its offers carry it; its frameworks are sent inverse offers)."""
        core = self.core
        unav = None
        if not core.maintenance.empty():
            hit = core.maintenance.machine_of(ag.hostname, ag.ip)
            if hit is not None and hit[0] not in core.maintenance.down:
                unav = hit[1].unavailability()
        if unav is None:
            core.agent_unavailability.pop(ag.agent_id, None)
        else:
            core.agent_unavailability[ag.agent_id] = unav
            self.inverse_soon(now)

    def mesos_inverse_offer(
        self, offer_id: str, framework_id: str, agent_id: str, unavailability: mesos.Unavailability
    ) -> mesos.InverseOffer:
        core = self.core
        ag = core.agents.get(agent_id)
        return mesos.InverseOffer(
            id=mesos.OfferID(offer_id),
            framework_id=mesos.FrameworkID(framework_id),
            unavailability=unavailability,
            url=core.offer_book.agent_url(ag) if ag is not None else None,
            agent_id=mesos.AgentID(agent_id),
        )

    def make_inverse_offers(self, now: float, fx: list[Effect]) -> None:
        """Inverse offers to every connected framework using resources on an agent of a DRAINING
        machine that has none outstanding there and no unexpired filter (one event per framework)."""
        core = self.core
        core.inverse_due = None
        if not core.agent_unavailability:
            return
        wanted: list[tuple[str, str, mesos.Unavailability]] = []
        executors: dict[str, set[str]] = {}
        for f in core.frameworks.values():
            for aid, _ in f.executors:
                if aid in core.agent_unavailability:
                    executors.setdefault(aid, set()).add(f.framework_id)
        for aid, unav in sorted(core.agent_unavailability.items()):
            ag = core.agents.get(aid)
            if ag is None or not ag.reachable:
                continue
            users = {fid for fid, _ in ag.tasks} | executors.get(aid, set())
            for fid in sorted(users):
                fw = core.frameworks.get(fid)
                if fw is not None and fw.connected:
                    wanted.append((aid, fid, unav))
        per_fw: dict[str, list[mesos.InverseOffer]] = {}
        for rec in core.inverse.make(wanted, now):
            per_fw.setdefault(rec.framework_id, []).append(
                self.mesos_inverse_offer(rec.offer_id, rec.framework_id, rec.agent_id, rec.unavailability)
            )
        for fid, ios in per_fw.items():
            core._send(core.frameworks[fid], mesos.Event.make_inverse_offers(tuple(ios)), fx)
        self.inverse_soon(core.inverse.next_deadline(now))

    def inverse_soon(self, at: float | None) -> None:
        core = self.core
        if at is not None and (core.inverse_due is None or at < core.inverse_due):
            core.inverse_due = at

    def inverse_answer(
        self, fw: FrameworkRec, ids: tuple[mesos.OfferID, ...], accept: bool, filters: mesos.Filters | None, now: float
    ) -> None:
        """ACCEPT/DECLINE_INVERSE_OFFERS: the answer is recorded (a hint for the operator) and no
        new inverse offer for that agent is made for ``refuse_seconds`` (default 5 s); unknown or
        foreign ids are ignored."""
        core = self.core
        refuse = sane_refuse((filters or mesos.Filters()).effective_refuse_seconds())
        status = mesos.InverseOfferStatusValue.ACCEPT if accept else mesos.InverseOfferStatusValue.DECLINE
        core.inverse.answer(fw.framework_id, (i.value for i in ids), status, refuse, now)
        self.inverse_soon(core.inverse.next_deadline(now))

    def rescind_inverse(self, recs: Iterable[InverseOfferRec], fx: list[Effect]) -> None:
        core = self.core
        for rec in recs:
            fw = core.frameworks.get(rec.framework_id)
            if fw is not None and fw.connected:
                core._send(fw, mesos.Event.make_rescind_inverse_offer(mesos.OfferID(rec.offer_id)), fx)

    def agent_gone(self, agent_id: str, fx: list[Effect]) -> None:
        """The agent left the cluster (unreachable, removed): its inverse offers are rescinded."""
        core = self.core
        if core.inverse.outstanding or core.inverse.statuses:
            self.rescind_inverse(core.inverse.drop_agent(agent_id), fx)
        core.agent_unavailability.pop(agent_id, None)

    def framework_gone(self, fw: FrameworkRec, forget: bool) -> None:
        """The framework's stream closed (its inverse offers are void; new ones follow a
        re-subscription) or it was removed (``forget``: its answers too)."""
        core = self.core
        if core.inverse.outstanding or (forget and core.inverse.statuses):
            core.inverse.drop_framework(fw.framework_id, forget)
