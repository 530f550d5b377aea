"""ACCEPT rules of the master's pure core: every ACCEPT is validated against the allocator's
offer book and agent state by the chain of checks in ``master/accept_checks.py`` (each returns
a rejection code; ``OUTCOME`` maps it to TASK_ERROR / TASK_DROPPED (LOST) and a reason), valid
launches go to the allocator and become RUN_TASKS to the agent."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Protocol

import attrs

from master import registry_ops as ops
from master.accept_checks import (
    OUTCOME,
    LaunchScope,
    Refused,
    Rejection,
    agent_problem,
    allocator_rejection,
    fits,
    group_problem,
    offers_problem,
    sane_refuse,
    task_refused,
    user_problem,
)
from master.alloc_port import AllocatorPort
from master.allocator import decisions as ad
from master.allocator import events as ae
from master.events import (
    Effect,
    Persist,
)
from master.records import EMPTY, AgentRec, FrameworkRec
from master.validation import parse_resources, task_resources
from protocol import agent_channel as ac
from protocol import mesos
from protocol.evolve import evolve
from protocol.resources import ResourceError, Resources

__pure__ = True

if TYPE_CHECKING:
    from master.core_base import StateConfig
    from master.offer_book import OfferBook
    from master.task_book import TaskBook

OT = mesos.OperationType
# the tasks of one LAUNCH or LAUNCH_GROUP that passed the checks: (tasks, group executor, group?)
Launch = tuple[list[mesos.TaskInfo], "mesos.ExecutorInfo | None", bool]


@attrs.define(slots=True, eq=False)
class _Plan:
    """One ACCEPT's operations as the checks go: what passed so far and what the offers still hold."""

    scope: LaunchScope
    reserving: bool  # it also (un)reserves: the allocator checks the resources
    remaining: Resources
    new_execs: set[str] = attrs.field(factory=set)  # executors started by this ACCEPT (counted once)
    launches: list[Launch] = attrs.field(factory=list)
    alloc_ops: list[ae.Operation] = attrs.field(factory=list)


class AcceptHost(Protocol):
    """What ACCEPT needs of the core (``MasterState``): the allocator, the agents, the settings
    and counters, the task book (report an update, launch a task), the offer book (act on
    allocator decisions) and the core's way to reach an agent."""

    alloc: AllocatorPort
    agents: dict[str, AgentRec]
    cfg: StateConfig
    counters: dict[str, int]
    unauthorized: int
    task_book: TaskBook
    offer_book: OfferBook

    def _to_agent(self, agent_id: str, body: ac.Body, fx: list[Effect]) -> bool: ...


class AcceptBook:
    """The ACCEPT component of the core (``MasterState.accepts``), over an ``AcceptHost``."""

    __slots__ = ("core",)

    def __init__(self, core: AcceptHost) -> None:
        self.core = core

    def accept(self, fw: FrameworkRec, accept: mesos.Accept, now: float, fx: list[Effect]) -> None:
        """1. the offers, 2./3. each operation's checks, 4. the allocator, then launch."""
        fid = fw.framework_id
        offer_ids = tuple(o.value for o in accept.offer_ids)
        refuse = sane_refuse(accept.filters.refuse_seconds if accept.filters else None)
        book = [self.core.alloc.offer(oid) for oid in offer_ids]
        refused = offers_problem(book, fid)
        ag: AgentRec | None = None
        if refused is None:
            first = book[0]
            assert first is not None
            ag = self.core.agents.get(first.agent_id)
            refused = agent_problem(ag is not None and ag.reachable, ag is not None and ag.conn_id is not None)
        if refused is not None or ag is None:
            self._reject_offers(fw, accept, offer_ids, refuse, now, fx)
            return
        offer_agent = ag.agent_id
        offered = Resources.sum(o.resources for o in book if o is not None)
        launches, alloc_ops = self._check_operations(fw, accept, offer_agent, offered, now, fx)
        result = self.core.alloc.accept(
            ae.OffersAccepted(framework_id=fid, offer_ids=offer_ids, operations=tuple(alloc_ops), refuse_seconds=refuse),
            now,
        )
        self.core.offer_book.decisions(result.decisions, now, fx)
        if isinstance(result, ad.Rejected):
            refused = Refused(allocator_rejection(result.code), result.reason)
            for tasks, _, _ in launches:
                for task in tasks:
                    self._refuse(fw, task.task_id.value, refused, now, fx, offer_agent)
            return
        self._launch(fw, ag, result, launches, now, fx)

    def _refuse(self, fw: FrameworkRec, task_id: str, refused: Refused, now: float, fx: list[Effect],
                agent_id: str | None) -> None:
        """The one place a rejection becomes a task update (``accept_checks.OUTCOME``)."""
        state, reason = OUTCOME[refused.code]
        self.core.task_book.master_update(fw, task_id, state, reason, refused.message, now, fx, agent_id)

    def _reject_offers(
        self, fw: FrameworkRec, accept: mesos.Accept, offer_ids: tuple[str, ...], refuse: float | None, now: float,
        fx: list[Effect],
    ) -> None:
        """Invalid, stale, foreign, duplicate or mixed offers (or their agent is gone): the
        allocator rejects the whole ACCEPT (and returns the resources); every task is DROPPED
        (LOST if not partition-aware)."""
        result = self.core.alloc.accept(
            ae.OffersAccepted(framework_id=fw.framework_id, offer_ids=offer_ids, operations=(), refuse_seconds=refuse),
            now,
        )
        reason = result.reason if isinstance(result, ad.Rejected) else "Offer is no longer valid"
        self.core.offer_book.decisions(result.decisions, now, fx)
        self.core.counters["invalid_offers"] += 1
        refused = Refused(Rejection.INVALID_OFFERS, f"Invalid offers: {reason}")
        for op in accept.operations:
            if op.type is OT.LAUNCH and op.launch is not None:
                tasks = op.launch.task_infos
            elif op.type is OT.LAUNCH_GROUP and op.launch_group is not None:
                tasks = op.launch_group.task_group.tasks
            else:
                continue
            for task in tasks:
                self._refuse(fw, task.task_id.value, refused, now, fx, None)

    def _check_operations(
        self, fw: FrameworkRec, accept: mesos.Accept, offer_agent: str, offered: Resources, now: float,
        fx: list[Effect],
    ) -> tuple[list[Launch], list[ae.Operation]]:
        """Run each operation's checks (refused tasks are reported here); what passed, as
        launches for the agent and operations for the allocator."""
        plan = _Plan(
            LaunchScope(offer_agent, fw.roles, fw.tasks, fw.finished),
            any(op.type is OT.RESERVE or op.type is OT.UNRESERVE for op in accept.operations),
            offered,
        )
        for op in accept.operations:
            t = op.type
            if t is OT.LAUNCH and op.launch is not None:
                self._check_launch(fw, plan, op.launch.task_infos, now, fx)
            elif t is OT.LAUNCH_GROUP and op.launch_group is not None:
                self._check_group(fw, plan, op.launch_group, now, fx)
            elif t is OT.RESERVE and op.reserve is not None:
                with contextlib.suppress(ResourceError, TypeError, ValueError):
                    plan.alloc_ops.append(ae.Reserve(resources=Resources.from_mesos(op.reserve.resources)))
            elif t is OT.UNRESERVE and op.unreserve is not None:
                with contextlib.suppress(ResourceError, TypeError, ValueError):
                    plan.alloc_ops.append(ae.Unreserve(resources=Resources.from_mesos(op.unreserve.resources)))
            # CREATE/DESTROY and others: not supported, ignored
        return plan.launches, plan.alloc_ops

    def _check_launch(
        self, fw: FrameworkRec, plan: _Plan, tasks: tuple[mesos.TaskInfo, ...], now: float, fx: list[Effect]
    ) -> None:
        """LAUNCH: each task alone (user, ``TASK_CHECKS``, then ``fits`` the running sum)."""
        scope = plan.scope
        offer_agent = scope.offer_agent
        good: list[mesos.TaskInfo] = []
        for task in tasks:
            refused = self._user_refused(fw, task, None, Rejection.UNAUTHORIZED)
            if refused is None:
                refused = task_refused(scope, task, False)
            if refused is None and not plan.reserving:
                need = self._need(fw, offer_agent, task, plan.new_execs)
                refused = fits(need, plan.remaining)
                if refused is None:
                    plan.remaining = plan.remaining - need
            if refused is not None:
                self._refuse(fw, task.task_id.value, refused, now, fx, offer_agent)
                continue
            scope.seen.add(task.task_id.value)
            good.append(task)
        if good:
            plan.launches.append((good, None, False))
            counted: set[str] = set()
            plan.alloc_ops.extend(
                ae.Launch(task_id=tk.task_id.value, resources=self._need(fw, offer_agent, tk, counted)) for tk in good
            )

    def _check_group(self, fw: FrameworkRec, plan: _Plan, lg: mesos.LaunchGroup, now: float, fx: list[Effect]) -> None:
        """LAUNCH_GROUP: all or nothing (every task's user, the executor, ``TASK_CHECKS`` for each
        task, then ``fits`` for the whole group)."""
        scope = plan.scope
        tasks = list(lg.task_group.tasks)
        refused = next(
            (r for tk in tasks if (r := self._user_refused(fw, tk, lg.executor, Rejection.GROUP_UNAUTHORIZED))), None
        )
        if refused is None:
            refused = group_problem(lg.executor, tasks)
        for task in tasks:
            if refused is not None:
                break
            refused = task_refused(scope, task, True)
            scope.seen.add(task.task_id.value)
        if refused is None and not plan.reserving:
            need = Resources.sum(task_resources(tk) for tk in tasks) + Resources.from_mesos(lg.executor.resources)
            refused = fits(need, plan.remaining, "Task group")
            if refused is None:
                plan.remaining = plan.remaining - need
        if refused is not None:
            for task in tasks:
                self._refuse(fw, task.task_id.value, refused, now, fx, scope.offer_agent)
            return
        plan.launches.append((tasks, lg.executor, True))
        ex_res = Resources.from_mesos(lg.executor.resources)
        for i, tk in enumerate(tasks):
            res = task_resources(tk) + (ex_res if i == 0 else EMPTY)
            plan.alloc_ops.append(ae.Launch(task_id=tk.task_id.value, resources=res))

    def _launch(
        self, fw: FrameworkRec, ag: AgentRec, result: ad.Accepted, launches: list[Launch], now: float, fx: list[Effect]
    ) -> None:
        """The allocator took the operations: record reservations and tasks, send RUN_TASKS."""
        offer_agent = ag.agent_id
        if result.reserved or result.unreserved:
            res = ag.reservations
            for r in result.reserved:
                res = res + r
            for r in result.unreserved:
                res = res - r
            ag.reservations = res
            fx.append(Persist((ops.ReservationsSet(offer_agent, str(res)),)))
        res_of = {lt.task_id: lt.resources for lt in result.launched}
        agent_ref = mesos.AgentID(offer_agent)
        for tasks, executor, group in launches:
            tasks = [
                tk if tk.agent_id is not None else evolve(tk, agent_id=agent_ref)
                for tk in tasks
                if tk.task_id.value in res_of
            ]
            if not tasks:
                continue
            add = self.core.task_book.add
            for tk in tasks:
                add(fw, ag, tk, executor, now, fx, res_of.get(tk.task_id.value))
            # the agent is connected (checked above, nothing in between can disconnect it)
            self.core._to_agent(
                offer_agent,
                ac.RunTasks(
                    framework_id=mesos.FrameworkID(fw.framework_id),
                    framework_info=fw.info,
                    tasks=tuple(tasks),
                    executor=executor,
                    group=group,
                ),
                fx,
            )

    def _user_refused(
        self, fw: FrameworkRec, task: mesos.TaskInfo, group_executor: mesos.ExecutorInfo | None, code: Rejection
    ) -> Refused | None:
        """``run_tasks`` for the framework's principal (counted in ``unauthorized``)."""
        refused = user_problem(self.core.cfg.acls, fw.principal, task, fw.info.user, group_executor, code)
        if refused is not None:
            self.core.unauthorized += 1
        return refused

    def _need(self, fw: FrameworkRec, agent_id: str | None, task: mesos.TaskInfo, started: set[str]) -> Resources:
        """What ``task`` takes from the offer: its resources, plus its executor's when that executor
        is not running on the agent yet and not started earlier in this ACCEPT (``started``)."""
        need = parse_resources(task.resources)
        ex = task.executor
        if ex is not None and ex.resources:
            eid = ex.executor_id.value
            if (str(agent_id), eid) not in fw.executors and eid not in started:
                need = need + parse_resources(ex.resources)
            started.add(eid)
        return need
