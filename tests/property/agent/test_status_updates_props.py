"""Property: whatever order acks, ticks and updates arrive in, each stream is sent in order,
every update is checkpointed before its first send, and nothing follows a terminal ack."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.status_updates import (
    AckForwarded,
    Acknowledged,
    CheckpointUpdate,
    Paused,
    Resumed,
    SendUpdate,
    StatusUpdateManager,
    StreamDone,
    Tick,
    Update,
    UpdateGenerated,
)
from protocol.task_states import TaskState as S

STATES = [S.TASK_STARTING, S.TASK_RUNNING, S.TASK_KILLING, S.TASK_FINISHED, S.TASK_FAILED]

ops = st.lists(
    st.one_of(
        st.tuples(st.just("gen"), st.sampled_from(["a", "b"]), st.sampled_from(STATES)),
        st.tuples(st.just("ack"), st.sampled_from(["a", "b"]), st.integers(0, 12)),
        st.tuples(st.just("tick"), st.just(""), st.floats(0, 30)),
        st.tuples(st.just("pause"), st.just(""), st.booleans()),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_stream_invariants(seq: list) -> None:
    m = StatusUpdateManager()
    m.handle(Resumed(), 0.0)
    now = 0.0
    n = 0
    generated: dict[str, list[Update]] = {"a": [], "b": []}
    checkpointed: set[bytes] = set()
    sent_order: dict[str, list[bytes]] = {"a": [], "b": []}
    acked: set[bytes] = set()  # acknowledged uuids: never sent again
    done_at: dict[str, int] = {}  # task -> number of its updates generated when its stream ended
    for op, task, arg in seq:
        if op == "gen":
            n += 1
            u = Update("f", task, n.to_bytes(16, "big"), arg)
            generated[task].append(u)
            eff = m.handle(UpdateGenerated(u), now)
        elif op == "ack":
            eff = m.handle(Acknowledged("f", task, int(arg).to_bytes(16, "big")), now)
            acked.update(e.uuid for e in eff if isinstance(e, AckForwarded))
        elif op == "tick":
            now += arg
            eff = m.handle(Tick(), now)
        else:
            eff = m.handle(Paused() if arg else Resumed(), now)
        for e in eff:
            if isinstance(e, CheckpointUpdate):
                checkpointed.add(e.update.uuid)
            elif isinstance(e, SendUpdate):
                assert e.update.uuid in checkpointed
                assert e.update.uuid not in acked  # after its ack an update is never sent again
                # after the terminal ack a task id only comes back as a new stream (id reuse)
                assert [u.uuid for u in generated[e.update.task_id]].index(e.update.uuid) >= done_at.get(
                    e.update.task_id, 0
                )
                sent = sent_order[e.update.task_id]
                if not sent or sent[-1] != e.update.uuid:
                    sent.append(e.update.uuid)
            elif isinstance(e, StreamDone):
                done_at[e.task_id] = len(generated[e.task_id])
    for task, sent in sent_order.items():
        uuids = [u.uuid for u in generated[task]]
        # sends follow generation order (as a subsequence)
        positions = [uuids.index(x) for x in sent]
        assert positions == sorted(positions)
