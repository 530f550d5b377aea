"""The drain book of the master's pure core (``MasterState.drain_book``): Mesos' automatic
draining of an agent for maintenance. DRAIN_AGENT kills every task on the agent (now if it is
reachable, else when it re-registers) and the agent is DRAINING until they have all ended with
their updates acknowledged, then DRAINED (and gone with ``mark_gone``); DEACTIVATE_AGENT only stops
offers; REACTIVATE_AGENT ends either. The mode is persisted (``AgentDrainSet``).

The drain state lives on the agent's record (``AgentRec.draining``, ``drain``, ``drained``,
``drain_pending``, ``drain_reason``); the book reaches it, and the books it tells, through
``DrainHost``. The agent book calls ``kill`` and ``progress`` when a draining agent registers and
``gone`` before admitting one; the task and framework books call ``progress`` / ``check`` /
``check_all`` when a task on a draining agent ends or is acknowledged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from master import registry_ops as ops
from master.allocator import events as ae
from master.core_base import TS
from master.events import AgentDrainRequested, Effect, Persist
from master.lifecycles import AgentPhase
from master.records import AgentRec, DrainMode, FrameworkRec, TaskRec
from protocol import agent_channel as ac
from protocol import mesos
from protocol.task_states import is_terminal

if TYPE_CHECKING:
    from master.agents import AgentBook
    from master.offer_book import OfferBook

__pure__ = True

DRAINING_REASON = mesos.Reason.REASON_AGENT_DRAINING.value  # a drained task's TASK_KILLED reason


class DrainHost(Protocol):
    """What the drain book needs of the core: the agents and the frameworks whose tasks run
    there, the offer book (a draining agent is deactivated in the allocator), the agent book (a
    drained agent with ``mark_gone`` is marked unreachable) and the way to send to an agent."""

    frameworks: dict[str, FrameworkRec]
    agents: dict[str, AgentRec]
    offer_book: OfferBook
    agent_book: AgentBook

    def _to_agent(self, agent_id: str, body: ac.Body, fx: list[Effect]) -> bool: ...


class DrainBook:
    """Agents drained for maintenance, over a ``DrainHost``."""

    __slots__ = ("core",)

    def __init__(self, core: DrainHost) -> None:
        self.core = core

    def request(self, ev: AgentDrainRequested, now: float, fx: list[Effect]) -> None:
        """Mesos' automatic draining: DRAIN_AGENT kills every task on the agent (now if it is
        reachable, else when it re-registers) and it is DRAINING until they have all ended with
        their updates acknowledged, then DRAINED (and gone with ``mark_gone``); DEACTIVATE_AGENT only
        stops offers; REACTIVATE_AGENT ends either. The mode is persisted, so it holds across a
        master restart."""
        core = self.core
        ag = core.agents.get(ev.agent_id)
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
        fx.append(Persist((self.op(ag),)))
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
            core.offer_book.alloc_event(alloc_ev, now, fx)
        self.kill(ag, fx)
        self.progress(ag, now, fx)

    @staticmethod
    def op(ag: AgentRec) -> ops.AgentDrainSet:
        d = ag.drain
        return ops.AgentDrainSet(
            ag.agent_id, ag.draining, kill=d is not None, max_grace=d.max_grace if d else None,
            mark_gone=d.mark_gone if d else False, drained=ag.drained,
        )

    def kill(self, ag: AgentRec, fx: list[Effect]) -> None:
        """Kill every live task on a draining, reachable agent: TASK_KILLED with
        REASON_AGENT_DRAINING, after at most the drain's grace (the task's kill policy if shorter)."""
        core = self.core
        if ag.drain is None or ag.drained or not ag.reachable:
            return
        for fid, tid in sorted(ag.tasks):
            fw = core.frameworks.get(fid)
            task = fw.tasks.get(tid) if fw else None
            if task is None or is_terminal(task.state) or task.state is TS.TASK_UNREACHABLE:
                continue
            ag.drain_pending.add((fid, tid))
            core._to_agent(
                ag.agent_id,
                ac.KillTask(
                    framework_id=mesos.FrameworkID(fid), task_id=mesos.TaskID(tid),
                    grace_seconds=_drain_grace(task, ag.drain.max_grace), reason=DRAINING_REASON,
                ),
                fx,
            )

    def check(self, agent_id: str, now: float, fx: list[Effect]) -> None:
        """A fact touched a task on ``agent_id`` (an update, an acknowledgement, a removal)."""
        ag = self.core.agents.get(agent_id)
        if ag is not None and ag.drain is not None:
            self.progress(ag, now, fx)

    def check_all(self, now: float, fx: list[Effect]) -> None:
        """A framework went away: the draining agents that waited for its tasks (rare: a scan)."""
        for ag in [a for a in self.core.agents.values() if a.drain is not None and a.drain_pending]:
            self.progress(ag, now, fx)

    def progress(self, ag: AgentRec, now: float, fx: list[Effect]) -> None:
        """DRAINING -> DRAINED once no task on the agent is live and every one that was there has
        its last update acknowledged (or its framework is gone); then gone with ``mark_gone``."""
        if ag.drain is None or ag.drained or not ag.reachable:
            return
        if ag.tasks:  # (only live and unreachable tasks are in it: not drained, no scan)
            ag.drain_pending |= ag.tasks
            return
        for key in sorted(ag.drain_pending):
            if self.settled(key):
                ag.drain_pending.discard(key)
        if ag.drain_pending:
            return
        ag.drained = True
        fx.append(Persist((self.op(ag),)))
        if ag.drain.mark_gone:
            self.core.agent_book.mark_unreachable(ag, now, "marked gone by the operator: drained", fx)

    def settled(self, key: tuple[str, str]) -> bool:
        fw = self.core.frameworks.get(key[0])
        if fw is None:
            return True
        if key[1] in fw.tasks:
            return False  # live (or unreachable)
        task = fw.finished(key[1])
        return task is None or task.status_update_uuid is None or task.acked_uuid == task.status_update_uuid

    def gone(self, ag: AgentRec) -> bool:
        """Marked gone by the operator (drained with ``mark_gone``): it may not register again
        until REACTIVATE_AGENT."""
        return ag.drain is not None and ag.drain.mark_gone and ag.drained


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
