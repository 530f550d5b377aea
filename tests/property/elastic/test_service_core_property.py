"""Random stories against the framework's pure core, with a small model of the cluster: the
offers are each agent's free capacity, launches use it, the model delivers updates (running,
killed, failed, revoked, lost) in any order. Invariants after every step:

* launches fit: no agent ever runs more than its capacity (regular and revocable separately);
* a scheduling round never takes a job below its minimum once it holds it, nor leaves it above
  its maximum (kills on the way count as gone);
* kills only name live workers; every worker the model runs is known to the core.
"""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frameworks.elastic.effects import Kill, Launch, OfferSlot
from frameworks.elastic.jobs import Phase
from frameworks.elastic.service_core import ElasticCore
from frameworks.elastic.spec import from_mapping
from protocol.resources import Resources
from protocol.task_states import TaskState

SHAPE = Resources.of(cpus=1, mem=100)


@attrs.define
class Task:
    task_id: str
    agent: str
    resources: Resources
    state: str = "staging"  # staging / running / killing / gone


@attrs.define
class World:
    agents: dict[str, Resources]
    tasks: dict[str, Task] = attrs.field(factory=dict)

    def used(self, agent: str) -> Resources:
        return Resources.sum(
            t.resources for t in self.tasks.values() if t.agent == agent and t.state != "gone"
        )

    def offers(self) -> list[OfferSlot]:
        out = []
        for a, total in self.agents.items():
            free = total - self.used(a)
            if free:
                out.append(OfferSlot(f"o-{a}", a, a, free))
        return out


def spec(i: int, lo: int, hi: int, prio: int) -> Any:
    return from_mapping(
        {
            "name": f"j{i}",
            "priority": prio,
            "worker": {"command": "run", "cpus": 1, "mem": 100},
            "scaling": {"min_workers": lo, "max_workers": hi},
        }
    )


action = st.one_of(
    st.tuples(st.just("submit"), st.integers(1, 3), st.integers(0, 3), st.integers(0, 1)),
    st.tuples(st.just("schedule")),
    st.tuples(st.just("schedule")),
    st.tuples(st.just("deliver"), st.integers(0, 50), st.sampled_from(["ok", "fail", "revoke", "lost"])),
    st.tuples(st.just("deliver"), st.integers(0, 50), st.just("ok")),
    st.tuples(st.just("scale"), st.integers(0, 5), st.integers(1, 6)),
    st.tuples(st.just("cancel"), st.integers(0, 5)),
    st.tuples(st.just("tick"), st.floats(0.1, 40.0)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    regular=st.lists(st.integers(0, 4), min_size=1, max_size=3),
    revocable=st.lists(st.integers(0, 2), min_size=3, max_size=3),
    actions=st.lists(action, max_size=60),
)
def test_core_invariants(regular: list[int], revocable: list[int], actions: list[tuple[Any, ...]]) -> None:
    agents = {}
    for i, n in enumerate(regular):
        total = Resources.of(cpus=n, mem=100 * n + 1)
        if revocable[i]:
            total = total + Resources.of(cpus=revocable[i], mem=100 * revocable[i]).as_revocable()
        agents[f"a{i}"] = total
    world = World(agents)
    core = ElasticCore(max_worker_failures=4, backoff_initial=1.0, revive_grace=2.0)
    now = 0.0
    submitted = 0
    for act in actions:
        kind = act[0]
        if kind == "submit":
            lo, extra, prio = act[1], act[2], act[3]
            core.submit(spec(submitted, lo, lo + extra, prio), now)
            submitted += 1
        elif kind == "tick":
            now += act[1]
        elif kind == "scale" and core.jobs:
            job = core.jobs.get(act[1] % len(core.jobs) + 1)
            if job is not None and not job.terminal:
                core.scale(job.job_id, now, max_workers=max(act[2], job.spec.scaling.min_workers))
        elif kind == "cancel" and core.jobs:
            job = core.jobs.get(act[1] % len(core.jobs) + 1)
            if job is not None and not job.terminal:
                apply(world, core.cancel(job.job_id, now))
        elif kind == "deliver":
            live = [t for t in world.tasks.values() if t.state != "gone"]
            if live:
                deliver(world, core, live[act[1] % len(live)], act[2], now)
        elif kind == "schedule":
            before = {j.job_id: j.counted() for j in core.jobs.values()}
            effects = core.schedule(world.offers(), now)
            apply(world, effects)
            for j in core.jobs.values():
                if j.terminal or j.finished:
                    continue
                lo, hi = j.spec.scaling.min_workers, j.spec.scaling.max_workers
                assert j.counted() <= hi, (j.job_id, j.counted(), hi)
                if before.get(j.job_id, 0) >= lo:
                    assert j.counted() >= lo, (j.job_id, before[j.job_id], j.counted(), lo)
        check(world, core)


def apply(world: World, effects: list[Any]) -> None:
    for e in effects:
        if isinstance(e, Launch):
            for w in e.tasks:
                assert w.task_id not in world.tasks
                world.tasks[w.task_id] = Task(w.task_id, e.agent_id, w.resources)
        elif isinstance(e, Kill):
            t = world.tasks.get(e.task_id)
            assert t is not None and t.state != "gone", f"kill of unknown or ended task {e.task_id}"
            t.state = "killing"


def deliver(world: World, core: ElasticCore, t: Task, what: str, now: float) -> None:
    if t.state == "staging" and what == "ok":
        t.state = "running"
        apply(world, core.on_update(t.task_id, TaskState.TASK_RUNNING, now))
        return
    if t.state == "killing":
        t.state = "gone"
        apply(world, core.on_update(t.task_id, TaskState.TASK_KILLED, now))
        return
    if what == "fail":
        t.state = "gone"
        apply(world, core.on_update(t.task_id, TaskState.TASK_FAILED, now, message="exit 1"))
    elif what == "revoke" and t.resources.revocable():
        t.state = "gone"
        apply(
            world, core.on_update(t.task_id, TaskState.TASK_KILLED, now, reason="REASON_CONTAINER_PREEMPTED")
        )
    elif what == "lost":
        t.state = "gone"
        apply(world, core.on_update(t.task_id, TaskState.TASK_LOST, now, reason="REASON_AGENT_REMOVED"))


def check(world: World, core: ElasticCore) -> None:
    for a, total in world.agents.items():
        used = world.used(a)
        assert total.contains(used), f"agent {a} over-committed: {used} > {total}"
    known = {w.task_id: w for j in core.jobs.values() for w in j.workers.values()}
    for t in world.tasks.values():
        if t.state != "gone":
            assert t.task_id in known and known[t.task_id].phase is not Phase.ENDED
