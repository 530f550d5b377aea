"""Priority preemption under way (pure): which tasks are evicted for which job, and what the
planner must keep for the preemptor meanwhile. Which victims to choose is the ``victims`` hook's
decision (``preempt.VictimPolicy``; ``frameworks.batch.preempt.choose`` by default); this module
feeds it the candidates and carries it out (kills, notes, events), one preemption at a time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from frameworks.batch.backfill import Reservation
from frameworks.batch.book import JobBook, event, note
from frameworks.batch.effects import Effect, Kill, Persist
from frameworks.batch.model import JobSpec
from frameworks.batch.planner import AgentCapacity, JobView, OfferView, Plan, job_order_key, matches
from frameworks.batch.preempt import Candidate, Need, VictimPolicy, choose
from frameworks.batch.records import JobRecord, TaskRecord, mark_unsaved
from frameworks.batch.timeline import offerless
from protocol.resources import Resources

__pure__ = True

# after the tasks evicted for a job have ended: how long their resources may take to come back
# into the offers before the job, still not placed, may preempt again
PREEMPT_SETTLE = 5.0
# a reservation of everything on an offer (a preemption's)
ALL: Mapping[str, float] = {"cpus": 1e12, "mem": 1e12, "gpus": 1e12, "disk": 1e12}


@attrs.define
class Preemption:
    """A preemption under way: the tasks being killed for the preemptor, their agents, and when
    the last of them ended."""

    victims: frozenset[str] = frozenset()
    agents: frozenset[str] = frozenset()
    ended_at: float | None = None
    jobs: frozenset[int] = frozenset()  # the victims' jobs


class Evictions:
    """The preemptions under way, by preemptor job."""

    def __init__(self, book: JobBook, preempt_queues: frozenset[str], victims: VictimPolicy = choose) -> None:
        self.book = book
        self.victims = victims
        # jobs of these queues preempt as if submitted with ``preempt`` (a per-queue setting)
        self.queues = preempt_queues
        self.under_way: dict[int, Preemption] = {}

    def preempts(self, spec: JobSpec) -> bool:
        return spec.preempt or spec.queue in self.queues

    def victim_agents(self) -> set[str]:
        return {a for pr in self.under_way.values() for a in pr.agents}

    def reservations(self, offers: Sequence[OfferView], round_at: float | None) -> list[Reservation]:
        """A preemption under way keeps what comes back on its victims' agents for its
        preemptor: the jobs after it in the order may not take it meanwhile."""
        out = []
        for pre, pr in self.under_way.items():
            job = self.book.live.get(pre)
            if job is None:
                continue
            hold = {o.offer_id: ALL for o in offers if o.agent_id in pr.agents and o.role == job.spec.queue}
            if hold:
                out.append(Reservation(pre, round_at or 0.0, hold))
        return out

    def decide(
        self,
        views: Sequence[JobView],
        offers: Sequence[OfferView],
        p: Plan,
        now: float,
        cluster: Sequence[AgentCapacity],
    ) -> list[Effect]:
        """One preemption at a time: while one is under way (its victims being killed, then
        ``PREEMPT_SETTLE`` seconds for their resources to come back into the offers) no other is
        decided. Otherwise the highest-priority preempting job that could not place what it
        needs gets the fewest lower-priority preemptible tasks evicted for it (the next one
        tries when nothing may be evicted for it)."""
        placed = {pl.job_id for pl in p.placements}
        for pre, pr in list(self.under_way.items()):
            if pre not in self.book.live or pre in placed:
                del self.under_way[pre]
                continue
            if any(self.book.active_task(tid) for tid in pr.victims):
                continue
            if pr.ended_at is None:
                pr.ended_at = now
            elif now - pr.ended_at >= PREEMPT_SETTLE:
                del self.under_way[pre]  # it still does not fit: it may preempt again
        if self.under_way:
            return []
        # (a job over a limit of its owner or queue waits for it, not for others' tasks)
        preempting = [
            v
            for v in views
            if v.blocked is None and v.pending and self.preempts(v.spec) and v.job_id not in p.limited
        ]
        for view in sorted(preempting, key=job_order_key):
            spec = view.spec
            got = len(p.placements_for(view.job_id))
            gang = spec.gang > 0 and not view.gang_started and view.active == 0
            count = spec.gang_size if gang else len(view.pending) - got
            if count <= 0 or (gang and got):
                continue
            effects = self._evict_for(view, count, offers, p, now, cluster)
            if effects:
                return effects  # (one for which nothing may be evicted lets the next one try)
        return []

    def _evict_for(
        self,
        view: JobView,
        count: int,
        offers: Sequence[OfferView],
        p: Plan,
        now: float,
        cluster: Sequence[AgentCapacity],
    ) -> list[Effect]:
        spec = view.spec
        free: dict[str, dict[str, float]] = {}
        own_hold: dict[str, Resources] = {}
        for pl in p.held_placements:
            if pl.job_id == view.job_id:
                own_hold[pl.offer_id] = own_hold.get(pl.offer_id, Resources.empty()) + pl.resources
        for o in [
            *offers,
            *offerless(self.book, cluster, offers),
        ]:  # (an agent full of victims may have no offer)
            if not matches(spec, o):
                continue
            left = p.free_after.get(o.offer_id, o.resources) + own_hold.get(o.offer_id, Resources.empty())
            usable = left.allocatable_to(spec.queue)
            if not spec.preemptible:
                usable = usable.non_revocable()
            agent = free.setdefault(o.agent_id, {})
            for k, v in usable.scalars().items():
                agent[k] = agent.get(k, 0.0) + v
        if not free:
            return []
        candidates: list[Candidate] = []
        # A preempting queue is the operator's setting: its jobs evict any user's tasks. A job's
        # own ``preempt`` (which its owner sets) evicts only tasks of the same owner.
        owner = None if spec.queue in self.queues else (self.book.jobs[view.job_id].user or "")
        for job in self.book.live.values():
            other = job.spec
            if (
                job.job_id == view.job_id
                or not other.preemptible
                or other.priority >= spec.priority
                or other.queue != spec.queue
                or (owner is not None and (job.user or "") != owner)
                or not job.active
                or job.aborting is not None
                or job.regrouping is not None
            ):
                continue
            shape = other.resources().scalars()
            for i in sorted(job.active):
                t = job.tasks[i]
                cur = t.current
                if t.killing is not None or cur is None or cur.agent_id is None:
                    continue
                if t.revocable and not spec.preemptible:
                    continue  # revocable resources would not help a job that may not use them
                candidates.append(
                    Candidate(
                        job.job_id,
                        i,
                        t.task_id,
                        cur.agent_id,
                        other.priority,
                        shape,
                        cur.started_at if cur.started_at is not None else now,
                        other.gang > 0,
                    )
                )
        need = Need(view.job_id, spec.priority, spec.resources().scalars(), count)
        victims = self.victims(need, free, candidates)
        if not victims:
            return []
        effects: list[Effect] = []
        by_job: dict[int, list[int]] = {}
        for victim in victims:
            job = self.book.jobs[victim.job_id]
            t = job.tasks[victim.index]
            t.killing = "preempt"
            t.preempted_by = view.job_id
            job.preempted_by = view.job_id
            mark_unsaved(job, victim.index)
            by_job.setdefault(victim.job_id, []).append(victim.index)
            cur = t.current
            effects.append(Kill(t.task_id, cur.agent_id if cur else None, f"preempted by job {view.job_id}"))
        for job_id, indexes in sorted(by_job.items()):
            job = self.book.jobs[job_id]
            what = f"task(s) {', '.join(map(str, indexes))} preempted by job {view.job_id}"
            note(job, now, f"job {view.job_id}", what)
            effects += [Persist((job_id,)), event("preempted", job, now, what)]
        self.under_way[view.job_id] = Preemption(
            frozenset(c.task_id for c in victims),
            frozenset(c.agent_id for c in victims),
            jobs=frozenset(c.job_id for c in victims),
        )
        pre = self.book.jobs[view.job_id]
        note(
            pre,
            now,
            "scheduler",
            f"preempting {len(victims)} task(s) of job(s) {', '.join(map(str, sorted(by_job)))}",
        )
        effects.append(Persist((view.job_id,)))
        return effects

    def resume(self, job: JobRecord, task: TaskRecord) -> None:
        """After a restart of the service: a task it was killing for a preemption keeps that
        preemption under way."""
        if task.killing != "preempt" or task.preempted_by is None:
            return
        cur = task.current
        pre = self.under_way.setdefault(task.preempted_by, Preemption())
        pre.victims |= {task.task_id}
        pre.jobs |= {job.job_id}
        if cur is not None and cur.agent_id is not None:
            pre.agents |= {cur.agent_id}

    def explain(self, placed: set[int]) -> None:
        """Each preemptor not placed this round says how its preemption stands."""
        for pre, pr in self.under_way.items():
            if pre in self.book.live and pre not in placed:
                left = sum(1 for tid in pr.victims if self.book.active_task(tid))
                of = ", ".join(str(j) for j in sorted(pr.jobs))
                self.book.live[pre].reason = (
                    f"preempting {left} task(s) of job(s) {of}"
                    if left
                    else "preempted tasks ended; waiting for their resources"
                )
