"""The elastic framework's decisions: jobs and their worker tasks in, effects out (pure).

The service shell (``service.py``) feeds it driver facts (task updates, the offers it holds),
coordinator progress and API requests, and executes what comes back: ``StartCoordinator``,
``Launch`` (worker tasks on one offer), ``Kill``, ``WorkerGone`` (tell the coordinator at once),
``DeclareDemand`` (REQUEST), ``Decline``, ``StopCoordinator`` and ``Persist``.

One scheduling round (``schedule(offers, now)``):

1. offers are counted in *worker slots* of the largest live job shape, regular and revocable
   separately; capacity on its way back counts as free already - workers being killed, and
   workers that ended until an offer of their agent grows by their resources (``on_offers``) - so
   a round neither asks for the same capacity twice nor takes a worker from a running job for a
   slot that is about to be offered back;
2. ``policy.plan`` decides every job's target (start at the minimum, water-fill, rebalance);
3. shrinks become kills (revocable workers first, newest first); a started job's minimum is
   placed whole or not at all (gang); grows are placed one worker at a time, on revocable
   resources when the plan says so;
4. the standing demand: the gang of the minimum for a pending job, ``max - current`` units for a
   running one; nothing wanted at all -> idle offers are declined.

Worker endings: killed by us (scale down; only workers we decided to kill), revoked
(``REASON_CONTAINER_PREEMPTED``, or ``REASON_AGENT_DRAINING``: its agent drained), lost (agent gone, unreachable, invalid offer), failed (non-zero
exit, or a kill we did not ask for such as the agent's memory limit; backoff before replacing,
longer for repeats of the same cause, the job fails after ``max_worker_failures`` failures in a
row without training progress), finished.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from frameworks.client.demand import Demand
from frameworks.client.placement import pick
from frameworks.elastic import policy
from frameworks.elastic.effects import (
    DeclareDemand,
    Decline,
    Effect,
    Kill,
    Launch,
    OfferSlot,
    Persist,
    Returning,
    Revive,
    StartCoordinator,
    StopCoordinator,
    WorkerGone,
    WorkerLaunch,
)
from frameworks.elastic.jobs import (
    HISTORY,
    Ending,
    Job,
    JobConflict,
    NoSuchJob,
    Phase,
    ServiceError,
    Worker,
    classify,
    failure_cause,
    job_from_dict,
)
from frameworks.elastic.slots import count_slots, pick_revocable, reference_shape
from frameworks.elastic.spec import JobSpec
from frameworks.elastic.state import IllegalTransition, JobState, Transition
from protocol.placement import Tentative
from protocol.resources import Resources
from protocol.task_states import TaskState, is_terminal

__pure__ = True

Placed = tuple[OfferSlot, Resources, bool]  # a worker's offer, its resources, revocable or not


class ElasticCore:
    def __init__(
        self,
        *,
        max_worker_failures: int = 10,
        backoff_initial: float = 1.0,
        backoff_max: float = 30.0,
        decline_refuse_seconds: float = 2.0,
        margin: float = 0.0,
        revive_grace: float = 5.0,
        return_grace: float = 5.0,
        failure_window: float = 300.0,
    ) -> None:
        self.jobs: dict[int, Job] = {}
        self.next_job_id = 1
        self.max_worker_failures = max_worker_failures
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.decline_refuse_seconds = decline_refuse_seconds
        self.margin = margin
        self._tasks: dict[str, int] = {}  # task id -> job id (live and recent workers)
        self.last_plan: policy.Plan | None = None
        self.declined = False  # offers were declined (with a filter) since the last REVIVE
        self.revive_grace = revive_grace
        self.hold_shrinks_until = 0.0
        # slots of ended workers not offered back yet (until an offer from their agent arrives,
        # at most ``return_grace`` seconds): counted as free, like the slots of workers being killed
        self.returning: list[Returning] = []
        self.return_grace = return_grace
        self._offered: dict[str, dict[str, float]] = {}  # offer id -> scalars of its last OFFERS event
        # failures with the same cause within this long of each other count as repeats
        self.failure_window = failure_window

    # --- requests -------------------------------------------------------------------------------------

    def submit(self, spec: JobSpec, now: float, user: str | None = None) -> tuple[int, list[Effect]]:
        job = Job(self.next_job_id, spec, now, user=user)
        self.next_job_id += 1
        job.reason = "pending: waiting for offers"
        self.jobs[job.job_id] = job
        return job.job_id, [Persist((job.job_id,))]

    def job(self, job_id: int) -> Job:
        try:
            return self.jobs[job_id]
        except KeyError:
            raise NoSuchJob(f"no elastic job {job_id}") from None

    def scale(
        self, job_id: int, now: float, max_workers: int | None = None, min_workers: int | None = None
    ) -> list[Effect]:
        job = self.job(job_id)
        if job.terminal:
            raise JobConflict(f"job {job_id} is {job.state.value.lower()}")
        lo = job.spec.scaling.min_workers if min_workers is None else min_workers
        hi = job.spec.scaling.max_workers if max_workers is None else max_workers
        if lo < 1:
            raise ServiceError(f"min_workers must be at least 1, got {lo}")
        if hi < lo:
            raise ServiceError(f"max_workers must be at least min_workers ({lo}), got {hi}")
        job.spec = attrs.evolve(
            job.spec, scaling=attrs.evolve(job.spec.scaling, min_workers=lo, max_workers=hi)
        )
        return [Persist((job_id,))]

    def cancel(self, job_id: int, now: float) -> list[Effect]:
        job = self.job(job_id)
        if job.terminal:
            raise JobConflict(f"job {job_id} is already {job.state.value.lower()}")
        out: list[Effect] = self._kill_all(job, "job cancelled", now)
        self._move(job, JobState.CANCELLED, "cancelled by request", now)
        job.reason = "cancelled"
        out += self._settle(job, now)
        out.append(Persist((job_id,)))
        return out

    def set_coordinator(self, job_id: int, port: int, url: str) -> list[Effect]:
        job = self.job(job_id)
        job.coordinator_port, job.coordinator_url = port, url
        return [Persist((job_id,))]

    # --- facts -----------------------------------------------------------------------------------------

    def on_update(
        self,
        task_id: str,
        state: TaskState,
        now: float,
        *,
        reason: str | None = None,
        message: str | None = None,
        agent_id: str | None = None,
    ) -> list[Effect]:
        job_id = self._tasks.get(task_id)
        job = self.jobs.get(job_id) if job_id is not None else None
        w = job.workers.get(task_id) if job is not None else None
        if job is None or w is None or not w.live:
            if not is_terminal(state) and state is not TaskState.TASK_UNREACHABLE:
                return [Kill(task_id, agent_id, "unknown worker task")]  # an orphan: not ours any more
            return []
        w.state = state.value
        if message:
            w.message = message
        if reason:
            w.reason = reason
        out: list[Effect] = []
        if is_terminal(state):
            out += self._ended(job, w, classify(state, reason, w.kill_asked), now)
        elif state is TaskState.TASK_UNREACHABLE:
            if w.phase is not Phase.KILLING:
                w.to(Phase.UNREACHABLE)
                job.bump("unreachable")
        elif state is TaskState.TASK_KILLING:
            # ours (phase KILLING already) or the agent's own (a limit, a revocation): the latter
            # keeps counting until its terminal update says what happened; never KILLed again by us
            pass
        elif state is TaskState.TASK_RUNNING:
            if w.phase is Phase.UNREACHABLE or (job.terminal and w.phase is not Phase.KILLING):
                # back from a partition after being written off: not needed
                out.append(self._kill(w, "came back after being counted out", now))
            elif w.phase is Phase.STAGING:
                w.to(Phase.RUNNING)
                w.running_at = now
        out += self._settle(job, now)
        out.append(Persist((job.job_id,)))
        return out

    def on_offers(self, offers: Iterable[tuple[str, str, Resources]], now: float) -> None:
        """An OFFERS event: (offer id, agent id, resources) of new offers and of leases that changed
        (they shrink when we launch and grow when resources come back). What an offer grew by,
        compared with its previous event, brings back the slots of workers that ended on its agent:
        those are no longer in transit."""
        for offer_id, agent_id, res in offers:
            new = res.flatten().scalars()
            old = self._offered.get(offer_id, {})
            self._offered[offer_id] = new
            grown = {k: v - old.get(k, 0.0) for k, v in new.items() if v - old.get(k, 0.0) > 1e-9}
            keep: list[Returning] = []
            for r in self.returning:
                if r.agent_id == agent_id and all(grown.get(k, 0.0) >= v - 1e-9 for k, v in r.need.items()):
                    for k, v in r.need.items():
                        grown[k] -= v
                else:
                    keep.append(r)
            self.returning = keep

    def on_progress(self, job_id: int, status: Mapping[str, Any], now: float) -> list[Effect]:
        """The coordinator's ``status()``: progress figures, and whether every shard is done."""
        job = self.jobs.get(job_id)
        if job is None:
            return []
        prog = status.get("progress", {})
        shards = status.get("shards", {})
        before = job.progress.get("completed_total", 0)
        job.progress = {
            "generation": status.get("generation"),
            "world_size": status.get("world_size"),
            "samples_per_second": prog.get("samples_per_second"),
            "samples_total": prog.get("samples_total"),
            "loss": prog.get("loss"),
            "accuracy": prog.get("accuracy"),
            "reports": dict(prog.get("reports", {})),
            "progress": shards.get("progress"),
            "epoch": shards.get("epoch"),
            "epochs": shards.get("epochs"),
            "completed_total": shards.get("completed_total", 0),
            "set_aside": shards.get("set_aside", 0),
        }
        out: list[Effect] = []
        if job.terminal:  # the final figures of a job that has ended
            return [Persist((job_id,))]
        if (job.progress["completed_total"] or 0) > (before or 0):
            job.failures = 0
        if status.get("finished") and not job.finished:
            job.finished = True
            job.reason = "finishing: every shard is done; workers are exiting"
            out.append(Persist((job_id,)))
        out += self._settle(job, now)
        return out

    # --- the scheduling round ------------------------------------------------------------------------

    def schedule(self, offers: Sequence[OfferSlot], now: float) -> list[Effect]:
        out: list[Effect] = []
        active = [j for j in self.jobs.values() if not j.terminal and not j.finished]
        touched: set[int] = set()
        if self.declined and self.demands():
            # something is wanted again: first get the declined capacity back, and take nothing
            # from running jobs until those offers had a chance to arrive
            out.append(Revive())
            self.declined = False
            self.hold_shrinks_until = now + self.revive_grace
        elif offers:
            self.hold_shrinks_until = 0.0  # the offers are back: decide with them in view
        if active:
            ref = reference_shape(j.shape() for j in active)
            free = count_slots(offers, ref)
            # capacity on its way back counts as free: workers being killed, and workers that ended
            # whose resources no offer shows yet (without them a round between a kill's terminal
            # update and the offer that returns its slot sees too little capacity and takes a
            # worker from a running job that the returning slot would have covered)
            self.returning = [r for r in self.returning if now - r.since < self.return_grace]
            held = {o.offer_id for o in offers}
            self._offered = {k: v for k, v in self._offered.items() if k in held}
            releasing_reg = sum(
                1 for j in active for w in j.workers.values() if w.phase is Phase.KILLING and not w.revocable
            ) + sum(1 for r in self.returning if not r.revocable)
            releasing_rev = sum(
                1 for j in active for w in j.workers.values() if w.phase is Phase.KILLING and w.revocable
            ) + sum(1 for r in self.returning if r.revocable)
            views = []
            for j in sorted(active, key=lambda j: j.job_id):
                reg, rev = j.counted(False), j.counted(True)
                lo, hi = j.spec.scaling.min_workers, j.spec.scaling.max_workers
                if reg + rev == 0 and (now < j.backoff_until or j.state is JobState.STARTING):
                    continue  # waiting out a failure backoff (or its gang is on its way): not a candidate
                if now < j.backoff_until:
                    hi = max(lo, reg + rev)  # no growth while backing off
                views.append(
                    policy.JobView(
                        str(j.job_id),
                        lo,
                        hi,
                        reg,
                        rev,
                        j.spec.priority,
                        j.spec.scaling.revocable_ok,
                        order=j.submitted_at + j.job_id * 1e-9,
                    )
                )
            plan = policy.plan(
                views,
                policy.Capacity(free.regular + releasing_reg, free.revocable + releasing_rev),
                self.margin,
            )
            self.last_plan = plan
            avail = {o.offer_id: o.available for o in offers}
            # 1. shrinks (while a REVIVE is pending only down to the maximum: taking capacity for
            # other jobs waits until the declined offers had a chance to come back)
            holding = now < self.hold_shrinks_until
            for ch in plan.changes:
                job = self.jobs[int(ch.job_id)]
                rev, reg = max(0, -ch.revocable), max(0, -ch.regular)
                if holding:
                    over = max(0, job.counted() - job.spec.scaling.max_workers)
                    rev = min(rev, over)
                    reg = min(reg, over - rev)
                if rev:
                    out += self._shrink(job, rev, True, "scaled down by the policy", now)
                    touched.add(job.job_id)
                if reg:
                    out += self._shrink(job, reg, False, "scaled down by the policy", now)
                    touched.add(job.job_id)
            # 2. starts: the whole minimum or nothing
            for jid in plan.started:
                job = self.jobs[int(jid)]
                out += self._start(job, offers, avail, now)
                touched.add(job.job_id)
            # 3. grows
            for ch in plan.changes:
                job = self.jobs[int(ch.job_id)]
                if ch.job_id in plan.started or job.counted() == 0:
                    continue
                if ch.revocable > 0:
                    out += self._grow(job, ch.revocable, True, offers, avail, now)
                    touched.add(job.job_id)
                if ch.regular > 0:
                    out += self._grow(job, ch.regular, False, offers, avail, now)
                    touched.add(job.job_id)
            # reasons
            for j in active:
                new = self._reason(j, plan, now)
                if new != j.reason:
                    j.reason = new
                    touched.add(j.job_id)
        for j in self.jobs.values():
            before = j.state
            out += self._settle(j, now)
            if j.state is not before:
                touched.add(j.job_id)
        demands = self.demands()
        out.append(DeclareDemand(demands))
        if not demands and offers:
            out.append(Decline(tuple(o.offer_id for o in offers), self.decline_refuse_seconds))
            self.declined = True
        if touched:
            out.append(Persist(tuple(sorted(touched))))
        return out

    def demands(self) -> tuple[tuple[str, Demand], ...]:
        out: list[tuple[str, Demand]] = []
        for j in sorted(self.jobs.values(), key=lambda j: j.job_id):
            if j.terminal or j.finished:
                continue
            lo, hi = j.spec.scaling.min_workers, j.spec.scaling.max_workers
            role = j.spec.role if j.spec.role != "*" else None
            have = j.counted()
            if have == 0 and j.state is not JobState.STARTING:
                out.append(
                    (
                        f"job-{j.job_id}",
                        Demand(
                            j.shape(),
                            lo,
                            gang_id=f"elastic-{j.job_id}",
                            gang_min=lo,
                            priority=j.spec.priority or None,
                            role=role,
                        ),
                    )
                )
            elif have < hi:
                out.append(
                    (
                        f"job-{j.job_id}",
                        Demand(
                            j.shape(),
                            hi - have,
                            revocable_ok=j.spec.scaling.revocable_ok,
                            priority=j.spec.priority or None,
                            role=role,
                        ),
                    )
                )
        return tuple(out)

    # --- helpers ------------------------------------------------------------------------------------------

    def _reason(self, job: Job, plan: policy.Plan, now: float) -> str:
        hi = job.spec.scaling.max_workers
        have = job.counted()
        if now < job.backoff_until:
            n = max(job.failures, job.same_failures)
            cause = f" ({job.same_failures}x {job.last_failure})" if job.last_failure else ""
            return (
                f"backing off after {n} worker failure(s) in a row{cause}; "
                f"retrying in {job.backoff_until - now:.1f}s"
            )
        if job.state is JobState.STARTING:
            return f"starting: the gang of {job.spec.scaling.min_workers} is launching"
        if have >= hi:
            return ""
        why = plan.reasons.get(str(job.job_id))
        if why:
            return why
        target = plan.targets.get(str(job.job_id))
        if target is not None and target.total > have:
            return f"growing to {target.total}: waiting for offers that fit a worker ({job.shape()})"
        return "waiting for capacity"

    def _new_worker(
        self, job: Job, offer: OfferSlot, res: Resources, revocable: bool, now: float
    ) -> WorkerLaunch:
        idx = job.next_index
        job.next_index += 1
        task_id = f"elastic-{job.job_id}-w{idx}"
        w = Worker(
            task_id, job.job_id, idx, offer.agent_id, offer.hostname, str(res), revocable, Phase.STAGING, now
        )
        job.workers[task_id] = w
        self._tasks[task_id] = job.job_id
        job.bump("launched")
        return WorkerLaunch(job.job_id, task_id, idx, res, revocable)

    def _launches(
        self, job: Job, placed: list[Placed], now: float
    ) -> list[Effect]:
        by_offer: dict[str, tuple[OfferSlot, list[WorkerLaunch]]] = {}
        for offer, res, rev in placed:
            entry = by_offer.setdefault(offer.offer_id, (offer, []))
            entry[1].append(self._new_worker(job, offer, res, rev, now))
        out: list[Effect] = []
        if job.coordinator_url is None:
            out.append(StartCoordinator(job.job_id))
        out += [Launch(o.offer_id, o.agent_id, tuple(ws)) for o, ws in by_offer.values()]
        return out

    def _place_one(
        self, job: Job, revocable: bool, offers: Sequence[OfferSlot], draft: Tentative[str, Placed]
    ) -> Placed | None:
        shape = job.shape()
        role = job.spec.role if job.spec.role != "*" else None
        # spread: agents holding fewer of this job's workers first
        per_agent: dict[str, int] = {}
        for w in job.workers.values():
            if w.counted:
                per_agent[w.agent_id] = per_agent.get(w.agent_id, 0) + 1
        for o in sorted(offers, key=lambda o: per_agent.get(o.agent_id, 0)):
            have = draft.get(o.offer_id)
            if have is None:
                continue
            chosen = pick_revocable(have, shape, role) if revocable else pick(have, shape, role)
            if chosen is not None:
                placed = (o, chosen, revocable)
                draft.place(o.offer_id, chosen, placed)
                return placed
        return None

    def _start(
        self, job: Job, offers: Sequence[OfferSlot], avail: dict[str, Resources], now: float
    ) -> list[Effect]:
        if now < job.backoff_until:
            return []
        n = job.spec.scaling.min_workers
        draft: Tentative[str, Placed] = Tentative(avail)  # the gang of its minimum: all or nothing
        for _ in range(n):
            if self._place_one(job, False, offers, draft) is None:
                draft.discard()
                return []  # not all of the minimum fits yet: take nothing
        out = self._launches(job, draft.commit(avail), now)
        if job.state is JobState.PENDING:
            self._move(job, JobState.STARTING, f"launching the gang of its minimum ({n} workers)", now)
        return out

    def _grow(
        self,
        job: Job,
        count: int,
        revocable: bool,
        offers: Sequence[OfferSlot],
        avail: dict[str, Resources],
        now: float,
    ) -> list[Effect]:
        if now < job.backoff_until:
            return []
        draft: Tentative[str, Placed] = Tentative(avail)  # as many as fit: all of them are kept
        for _ in range(count):
            if self._place_one(job, revocable, offers, draft) is None:
                break
        placed = draft.commit(avail)
        return self._launches(job, placed, now) if placed else []

    def _shrink(self, job: Job, count: int, revocable: bool, why: str, now: float) -> list[Effect]:
        victims = sorted(
            (w for w in job.workers.values() if w.counted and w.revocable is revocable),
            key=lambda w: (w.phase is Phase.RUNNING, -w.index),  # not-yet-running, then newest first
        )[:count]
        return [self._kill(w, why, now) for w in victims]

    def _kill(self, w: Worker, why: str, now: float) -> Kill:
        w.to(Phase.KILLING)
        w.killed_at = now
        w.kill_asked = True
        return Kill(w.task_id, w.agent_id, why)

    def _kill_all(self, job: Job, why: str, now: float) -> list[Effect]:
        return [self._kill(w, why, now) for w in job.live_workers() if w.phase is not Phase.KILLING]

    def resend_kills(self, now: float, after: float = 10.0) -> list[Kill]:
        """KILL again the workers asked to go more than ``after`` seconds ago that are still there
        (the call may have been lost, e.g. while the master was away)."""
        out: list[Kill] = []
        for j in self.jobs.values():
            for w in j.live_workers():
                if (
                    w.phase is Phase.KILLING
                    and w.kill_asked
                    and (w.killed_at is None or now - w.killed_at >= after)
                ):
                    out.append(self._kill(w, "still running after an earlier kill", now))
        return out

    def forget_kills(self) -> None:
        """After a (re)subscription: every pending kill is sent again on the next round."""
        for j in self.jobs.values():
            for w in j.live_workers():
                if w.phase is Phase.KILLING:
                    w.killed_at = None

    def _ended(self, job: Job, w: Worker, ending: Ending, now: float) -> list[Effect]:
        if ending in (Ending.KILLED, Ending.FAILED, Ending.FINISHED) and w.phase is not Phase.UNREACHABLE:
            # ended on a live agent: the master will offer its resources again
            need = job.shape().flatten().scalars()
            self.returning.append(Returning(w.task_id, w.agent_id, w.revocable, now, need))
        w.to(Phase.ENDED)
        w.ending = ending
        w.ended_at = now
        del job.workers[w.task_id]
        job.ended.append(w)
        del job.ended[:-HISTORY]
        job.bump(ending.value)
        out: list[Effect] = [
            WorkerGone(job.job_id, w.task_id, failure_cause(w) if ending is Ending.FAILED else None)
        ]
        if ending is Ending.FINISHED and job.finished:
            return out
        if ending in (Ending.FAILED, Ending.FINISHED) and not job.terminal:
            job.failures += 1
            if ending is Ending.FAILED:
                cause = failure_cause(w)
                recent = job.last_failure_at is not None and now - job.last_failure_at < self.failure_window
                job.same_failures = job.same_failures + 1 if cause == job.last_failure and recent else 1
                job.last_failure, job.last_failure_at = cause, now
            # repeats of one cause back off further even while training progresses between them
            # (a worker killed for its memory every few seconds is not relaunched in a tight loop)
            n = max(job.failures, job.same_failures if ending is Ending.FAILED else 0)
            delay = min(self.backoff_max, self.backoff_initial * 2 ** (n - 1))
            job.backoff_until = now + delay
            if job.failures >= self.max_worker_failures:
                out += self._kill_all(job, "job failed", now)
                self._move(
                    job,
                    JobState.FAILED,
                    f"{job.failures} worker failures in a row without progress; last: {w.message or w.state}",
                    now,
                )
                job.reason = job.life.story[-1].reason
        return out

    def _move(self, job: Job, new: JobState, why: str, now: float) -> Transition | None:
        if job.state is new:
            return None
        try:
            step = job.life.move(new, why, now)
        except IllegalTransition:
            return None
        if new is JobState.RUNNING and job.started_at is None:
            job.started_at = now
        if step.new in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED):
            job.ended_at = now
        return step

    def _settle(self, job: Job, now: float) -> list[Effect]:
        """Move the job's lifecycle to match its workers."""
        out: list[Effect] = []
        live = job.live_workers()
        if job.terminal:
            if not live and job.coordinator_url is not None:
                out.append(StopCoordinator(job.job_id))
                job.coordinator_url = None
            return out
        counted = job.counted()
        in_flight = any(w.phase in (Phase.STAGING, Phase.KILLING) for w in live)
        lo = job.spec.scaling.min_workers
        if job.finished and not live:
            for step in (JobState.RUNNING, JobState.SUCCEEDED):
                self._move(job, step, "every shard is done and the workers exited", now)
            if job.state is not JobState.SUCCEEDED:  # finished from PENDING (e.g. a restored job)
                self._move(job, JobState.STARTING, "restored finished", now)
                self._move(job, JobState.RUNNING, "restored finished", now)
                self._move(job, JobState.SUCCEEDED, "every shard is done", now)
            job.reason = "finished: every shard is done"  # not "" (shown as "at its maximum")
            out += self._settle(job, now)
            return out
        state = job.state
        if state is JobState.STARTING:
            if job.running() >= lo:
                self._move(job, JobState.RUNNING, f"its minimum of {lo} workers is running", now)
            elif counted == 0:
                self._move(job, JobState.PENDING, "the gang of its minimum did not start", now)
        elif state in (JobState.RUNNING, JobState.SCALING):
            if counted == 0 and not any(w.phase is Phase.KILLING for w in live):
                self._move(job, JobState.PENDING, "lost all of its workers; waiting to start again", now)
            elif state is JobState.RUNNING and in_flight:
                self._move(job, JobState.SCALING, "workers are being added or removed", now)
            elif state is JobState.SCALING and not in_flight:
                self._move(job, JobState.RUNNING, f"settled at {counted} workers", now)
        return out

    # --- persistence --------------------------------------------------------------------------------------

    def restore(self, record: Mapping[str, Any]) -> Job:
        job = job_from_dict(record)
        self.jobs[job.job_id] = job
        self.next_job_id = max(self.next_job_id, job.job_id + 1)
        for w in job.workers.values():
            self._tasks[w.task_id] = job.job_id
        return job

    def stale_workers(self, now: float, after: float = 30.0) -> list[tuple[str, str]]:
        """(task id, agent id) of workers launched more than ``after`` seconds ago that never
        reported running: worth an explicit reconciliation."""
        return [
            (w.task_id, w.agent_id)
            for j in self.jobs.values()
            for w in j.live_workers()
            if w.phase is Phase.STAGING and now - w.launched_at >= after
        ]

    def known_tasks(self) -> list[tuple[str, str]]:
        """(task id, agent id) of every live worker: what to reconcile after a restart."""
        return [(w.task_id, w.agent_id) for j in self.jobs.values() for w in j.live_workers()]


# --- records --------------------------------------------------------------------------------------------
