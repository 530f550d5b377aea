"""A random run of the batch core, for tests that check what must hold after any sequence."""

from __future__ import annotations

import random

from frameworks.batch.core import BatchCore, Effect, Persist
from frameworks.batch.model import JobSpec, TaskPhase
from frameworks.batch.planner import OfferView
from protocol.resources import Resources
from protocol.task_states import TaskState

S = TaskState


class CoreWalk:
    """Random steps: submissions (arrays, retries, time limits, gangs, preemptible), placements,
    updates of every kind, unsent launches, time-limit ticks, cancels. ``dirty`` collects the
    jobs the effects ask to persist, as the service does."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.core = BatchCore()
        self.now = 0.0
        self.dirty: set[int] = set()

    def absorb(self, effects: list[Effect]) -> None:
        for e in effects:
            if isinstance(e, Persist):
                self.dirty.update(e.job_ids)

    def step(self) -> None:
        rng, core = self.rng, self.core
        self.now += rng.choice((0.0, 0.5, 3.0))
        roll = rng.random()
        live = [
            t
            for j in core.jobs.values()
            for t in j.tasks
            if t.phase in (TaskPhase.LAUNCHING, TaskPhase.RUNNING)
        ]
        if roll < 0.1 or not core.jobs:
            spec = JobSpec(
                name="w",
                argv=("true",),
                count=(count := rng.randint(2, 12)),
                cpus=1,
                max_retries=rng.randint(0, 2),
                preemptible=rng.random() < 0.3,
                time_limit=rng.choice((None, None, 5.0)),
                gang=(gang := min(count, rng.choice((0, 0, 0, 2, 3)))),
                # a gang without a policy: abort, or restart with retries; sometimes continue
                gang_policy="continue" if gang and rng.random() < 0.25 else None,
                ports=rng.choice((0, 0, 1)),
            )
            _, effects = core.submit(spec, self.now)
            self.absorb(effects)
        elif roll < 0.35 or not live:
            offers = [
                OfferView(
                    f"o{i}", f"a{i}", f"h{i}", "*",
                    Resources.of(cpus=rng.randint(1, 4), mem=1024, ports=((31000 + 100 * i, 31009 + 100 * i),)),
                )
                for i in range(rng.randint(0, 3))
            ]
            self.absorb(core.schedule(offers, self.now))
        elif roll < 0.38:
            self.absorb(core.launch_not_sent([rng.choice(live).task_id], self.now))
        elif roll < 0.4:
            self.absorb(core.tick(self.now))
        elif roll < 0.43:
            job = rng.choice(list(core.jobs.values()))
            if job.state.value in ("PENDING", "RUNNING"):
                self.absorb(core.cancel(job.job_id, self.now))
        else:
            task = rng.choice(live)
            state = rng.choice(
                (S.TASK_STARTING, S.TASK_RUNNING, S.TASK_RUNNING, S.TASK_FINISHED, S.TASK_FINISHED,
                 S.TASK_FAILED, S.TASK_LOST, S.TASK_DROPPED, S.TASK_KILLED)
            )
            reason = "REASON_CONTAINER_PREEMPTED" if rng.random() < 0.1 else None
            self.absorb(
                core.on_update(
                    task.task_id,
                    state,
                    self.now,
                    agent_id=f"a{rng.randint(0, 2)}",
                    exit_code=rng.choice((None, 0, 1)),
                    message=rng.choice((None, "boom")),
                    reason=reason,
                )
            )
