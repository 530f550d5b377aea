"""Property: whatever facts arrive in whatever order, the tracker never breaks the task table,
emits exactly one terminal status per task, and never spawns a task twice."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.tasks import (
    EmitStatus,
    Exited,
    KillReason,
    KillTask,
    LaunchTask,
    LimitExceeded,
    ShutdownFramework,
    SignalTask,
    Spawned,
    SpawnFailed,
    SpawnTask,
    TaskTracker,
    Tick,
)
from agent.taskspec import CommandSpec, TaskSpec
from protocol.task_states import check_transition, is_terminal

TIDS = ["a", "b", "c"]


def spec(tid: str, killing: bool) -> TaskSpec:
    return TaskSpec("f", tid, tid, CommandSpec(argv=("true",)), grace=1.0, killing_state=killing)


event = st.one_of(
    st.tuples(st.just("launch"), st.sampled_from(TIDS), st.booleans()),
    st.tuples(st.just("spawned"), st.sampled_from(TIDS), st.integers(1, 100)),
    st.tuples(st.just("spawn_failed"), st.sampled_from(TIDS), st.none()),
    st.tuples(st.just("exited"), st.sampled_from(TIDS), st.one_of(st.none(), st.integers(0, 255))),
    st.tuples(st.just("kill"), st.sampled_from(TIDS), st.sampled_from(list(KillReason))),
    st.tuples(st.just("limit"), st.sampled_from(TIDS), st.none()),
    st.tuples(st.just("shutdown"), st.just(""), st.none()),
    st.tuples(st.just("tick"), st.just(""), st.floats(0, 3)),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(event, max_size=30))
def test_tracker_invariants(events: list) -> None:
    tr = TaskTracker(default_grace=1.0)
    now = 0.0
    emitted: dict[str, list] = {t: [] for t in TIDS}
    spawns: dict[str, int] = dict.fromkeys(TIDS, 0)
    spawned_pid: set[str] = set()
    for kind, tid, arg in events:
        if kind == "launch":
            eff = tr.handle(LaunchTask(spec(tid, arg)), now)
        elif kind == "spawned":
            # the shell only reports a spawn for a task it was asked to spawn, once
            if spawns[tid] != 1 or tid in spawned_pid:
                continue
            spawned_pid.add(tid)
            eff = tr.handle(Spawned("f", tid, arg), now)
        elif kind == "spawn_failed":
            if spawns[tid] != 1 or tid in spawned_pid:
                continue
            spawned_pid.add(tid)
            eff = tr.handle(SpawnFailed("f", tid, "boom"), now)
        elif kind == "exited":
            if tid not in spawned_pid:
                continue
            eff = tr.handle(Exited("f", tid, arg), now)
        elif kind == "kill":
            eff = tr.handle(KillTask("f", tid, None, arg), now)
        elif kind == "limit":
            eff = tr.handle(LimitExceeded("f", tid, "too big"), now)
        elif kind == "shutdown":
            eff = tr.handle(ShutdownFramework("f"), now)
        else:
            now += arg
            eff = tr.handle(Tick(), now)
        for e in eff:
            if isinstance(e, SpawnTask):
                spawns[e.spec.task_id] += 1
            elif isinstance(e, EmitStatus):
                emitted[e.task_id].append(e.state)
            elif isinstance(e, SignalTask):
                assert e.task_id in spawned_pid  # only a spawned process is ever signalled
    for tid, states in emitted.items():
        assert spawns[tid] <= 1
        assert sum(1 for s in states if is_terminal(s)) <= 1
        for a, b in itertools.pairwise(states):
            check_transition(a, b)
        t = tr.get("f", tid)
        if t is not None and t.terminal:
            assert states and is_terminal(states[-1])
