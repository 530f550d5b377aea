"""ACCEPT rules of the master's pure core: every ACCEPT is validated against the allocator's
offer book and agent state, semantic problems become TASK_ERROR / TASK_DROPPED (LOST) updates,
valid launches become RUN_TASKS to the agent."""

from __future__ import annotations

import attrs

from master import registry_ops as ops
from master.allocator import decisions as ad
from master.allocator import events as ae
from master.core_base import EMPTY, OFFER_PROBLEMS, TS, CoreBase, R, _sane_refuse
from master.events import (
    Effect,
    Persist,
)
from master.records import FrameworkRec
from master.validation import check_executor, check_task, parse_resources, task_resources
from protocol import agent_channel as ac
from protocol import mesos
from protocol.acls import task_info_user, task_problem
from protocol.resources import ResourceError, Resources

__pure__ = True


class AcceptRules(CoreBase):
    def _accept(self, fw: FrameworkRec, accept: mesos.Accept, now: float, fx: list[Effect]) -> None:
        fid = fw.framework_id
        offer_ids = tuple(o.value for o in accept.offer_ids)
        refuse = _sane_refuse(accept.filters.refuse_seconds if accept.filters else None)
        book = [self.alloc.offer(oid) for oid in offer_ids]
        offers_valid = bool(offer_ids) and all(o is not None and o.framework_id == fid for o in book)
        offer_agent = book[0].agent_id if offers_valid and book[0] is not None else None
        if offer_agent is not None:
            ag_ = self.agents.get(offer_agent)
            if ag_ is None or not ag_.reachable or ag_.conn_id is None:
                offers_valid, offer_agent = False, None  # the agent is gone: like a stale offer
        offered = Resources.sum(o.resources for o in book if o is not None) if offers_valid else EMPTY

        seen: set[str] = set()
        new_execs: set[str] = set()  # executors started by this ACCEPT (their resources count once)
        alloc_ops: list[ae.Operation] = []
        # (operation index, tasks, executor for LAUNCH_GROUP, group?)
        launches: list[tuple[list[mesos.TaskInfo], mesos.ExecutorInfo | None, bool]] = []
        all_tasks: list[mesos.TaskInfo] = []
        has_reservation_ops = False
        remaining = offered

        def error(task: mesos.TaskInfo, msg: str) -> None:
            self._master_update(fw, task.task_id.value, TS.TASK_ERROR, R.REASON_TASK_INVALID, msg, now, fx, offer_agent)

        for op in accept.operations:
            t = op.type
            if t is mesos.OperationType.LAUNCH and op.launch is not None:
                all_tasks.extend(op.launch.task_infos)
            elif t is mesos.OperationType.LAUNCH_GROUP and op.launch_group is not None:
                all_tasks.extend(op.launch_group.task_group.tasks)
            elif t in (mesos.OperationType.RESERVE, mesos.OperationType.UNRESERVE):
                has_reservation_ops = True

        if not offers_valid:
            # invalid, stale, foreign, duplicate or mixed offers: the allocator rejects the whole
            # ACCEPT (and returns the resources); every task is DROPPED (LOST if not partition-aware)
            result = self.alloc.accept(
                ae.OffersAccepted(framework_id=fid, offer_ids=offer_ids, operations=(), refuse_seconds=refuse), now
            )
            reason = result.reason if isinstance(result, ad.Rejected) else "Offer is no longer valid"
            self._decisions(result.decisions, now, fx)
            self.counters["invalid_offers"] += 1
            for task in all_tasks:
                self._master_update(
                    fw, task.task_id.value, TS.TASK_DROPPED, R.REASON_INVALID_OFFERS, f"Invalid offers: {reason}", now, fx
                )
            return

        for op in accept.operations:
            t = op.type
            if t is mesos.OperationType.LAUNCH and op.launch is not None:
                good: list[mesos.TaskInfo] = []
                for task in op.launch.task_infos:
                    if (denied := self._user_problem(fw, task, None)) is not None:
                        self._master_update(fw, task.task_id.value, TS.TASK_ERROR, R.REASON_TASK_UNAUTHORIZED, denied, now, fx, offer_agent)
                        continue
                    msg = self._check_launch(fw, task, offer_agent, seen, in_group=False)
                    if msg is None and not has_reservation_ops:
                        need = self._need(fw, offer_agent, task, new_execs)
                        if not remaining.contains(need):
                            msg = f"Task uses more resources ({need}) than offered and unused ({remaining})"
                        else:
                            remaining = remaining - need
                    if msg is not None:
                        error(task, msg)
                        continue
                    seen.add(task.task_id.value)
                    good.append(task)
                if good:
                    launches.append((good, None, False))
                    counted: set[str] = set()
                    alloc_ops.extend(
                        ae.Launch(task_id=tk.task_id.value, resources=self._need(fw, offer_agent, tk, counted))
                        for tk in good
                    )
            elif t is mesos.OperationType.LAUNCH_GROUP and op.launch_group is not None:
                lg = op.launch_group
                tasks = list(lg.task_group.tasks)
                denied = next((p for tk in tasks if (p := self._user_problem(fw, tk, lg.executor)) is not None), None)
                if denied is not None:
                    for task in tasks:
                        self._master_update(
                            fw, task.task_id.value, TS.TASK_ERROR, R.REASON_TASK_GROUP_UNAUTHORIZED, denied, now, fx, offer_agent
                        )
                    continue
                msg = check_executor(lg.executor)
                if msg is None and not tasks:
                    msg = "task group is empty"
                for task in tasks:
                    if msg is not None:
                        break
                    msg = self._check_launch(fw, task, offer_agent, seen, in_group=True)
                    seen.add(task.task_id.value)
                if msg is None and not has_reservation_ops:
                    need = Resources.sum(task_resources(tk) for tk in tasks) + Resources.from_mesos(lg.executor.resources)
                    if not remaining.contains(need):
                        msg = f"Task group uses more resources ({need}) than offered and unused ({remaining})"
                    else:
                        remaining = remaining - need
                if msg is not None:
                    for task in tasks:
                        error(task, msg)
                    continue
                launches.append((tasks, lg.executor, True))
                ex_res = Resources.from_mesos(lg.executor.resources)
                for i, tk in enumerate(tasks):
                    res = task_resources(tk) + (ex_res if i == 0 else EMPTY)
                    alloc_ops.append(ae.Launch(task_id=tk.task_id.value, resources=res))
            elif t is mesos.OperationType.RESERVE and op.reserve is not None:
                try:
                    alloc_ops.append(ae.Reserve(resources=Resources.from_mesos(op.reserve.resources)))
                except (ResourceError, TypeError, ValueError):
                    continue
            elif t is mesos.OperationType.UNRESERVE and op.unreserve is not None:
                try:
                    alloc_ops.append(ae.Unreserve(resources=Resources.from_mesos(op.unreserve.resources)))
                except (ResourceError, TypeError, ValueError):
                    continue
            # CREATE/DESTROY and others: not supported, ignored

        result = self.alloc.accept(
            ae.OffersAccepted(framework_id=fid, offer_ids=offer_ids, operations=tuple(alloc_ops), refuse_seconds=refuse),
            now,
        )
        if isinstance(result, ad.Rejected):
            self._decisions(result.decisions, now, fx)
            if result.code in OFFER_PROBLEMS:
                state, why = TS.TASK_DROPPED, R.REASON_INVALID_OFFERS
            else:
                state, why = TS.TASK_ERROR, R.REASON_TASK_INVALID
            for tasks, _, _ in launches:
                for task in tasks:
                    self._master_update(fw, task.task_id.value, state, why, result.reason, now, fx, offer_agent)
            return
        assert offer_agent is not None
        self._decisions(result.decisions, now, fx)
        ag = self.agents[offer_agent]
        if result.reserved or result.unreserved:
            res = ag.reservations
            for r in result.reserved:
                res = res + r
            for r in result.unreserved:
                res = res - r
            ag.reservations = res
            fx.append(Persist((ops.ReservationsSet(offer_agent, str(res)),)))
        res_of = {lt.task_id: lt.resources for lt in result.launched}
        launched_ids = set(res_of)
        for tasks, executor, group in launches:
            agent_ref = mesos.AgentID(offer_agent)
            tasks = [
                tk if tk.agent_id is not None else attrs.evolve(tk, agent_id=agent_ref)
                for tk in tasks
                if tk.task_id.value in launched_ids
            ]
            if not tasks:
                continue
            for tk in tasks:
                self._add_task(fw, ag, tk, executor, now, fx, res_of.get(tk.task_id.value))
            # the agent is connected (checked above, nothing in between can disconnect it)
            self._to_agent(
                offer_agent,
                ac.RunTasks(
                    framework_id=mesos.FrameworkID(fid),
                    framework_info=fw.info,
                    tasks=tuple(tasks),
                    executor=executor,
                    group=group,
                ),
                fx,
            )

    def _user_problem(self, fw: FrameworkRec, task: mesos.TaskInfo, group_executor: mesos.ExecutorInfo | None) -> str | None:
        """``run_tasks``: may the framework's principal run ``task`` as its user? (None: yes)"""
        acls = self.cfg.acls
        if acls.allows_everything:
            return None
        problem = task_problem(acls, fw.principal, task_info_user(task, fw.info.user, group_executor))
        if problem is not None:
            self.unauthorized += 1
        return problem

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

    def _check_launch(
        self, fw: FrameworkRec, task: mesos.TaskInfo, offer_agent: str | None, seen: set[str], *, in_group: bool
    ) -> str | None:
        msg = check_task(task, in_group=in_group)
        if msg is not None:
            return msg
        tid = task.task_id.value
        if tid in fw.tasks or tid in seen:
            return f"Task has duplicate ID: {tid}"
        if fw.finished(tid) is not None:
            # a replayed ACCEPT on a fresh offer must not run a finished task again (I2)
            return f"Task has duplicate ID: {tid} (a task with this ID already ran)"
        if task.agent_id is not None and task.agent_id.value != offer_agent:
            return f"Task uses agent {task.agent_id.value} but the offers are for agent {offer_agent}"
        for r in (task.resources, task.executor.resources if task.executor else ()):
            for res in r:
                if res.allocation_info is not None and res.allocation_info.role not in fw.roles:
                    return f"Task uses resources allocated to role {res.allocation_info.role!r} not held by the framework"
        return None
