"""ACKNOWLEDGE_MANY (Agora): each entry handled exactly like one ACKNOWLEDGE, on virtual time."""

from __future__ import annotations

from master.testing import Harness, offers, task, to_agent, updates
from protocol import agent_channel as ac
from protocol import mesos
from protocol.task_states import TaskState

TS = TaskState


def _launch(h: Harness, fid: str, sid: str, offer: mesos.Offer, *tids: str) -> None:
    op = mesos.Operation.make_launch(*(task(t) for t in tids))
    h.call(fid, sid, mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,), (op,)))


def _ack(agent_id: str, tid: str, uuid: bytes) -> mesos.Acknowledge:
    return mesos.Acknowledge(agent_id=mesos.AgentID(agent_id), task_id=mesos.TaskID(tid), uuid=uuid)


def _many(fid: str, *acks: mesos.Acknowledge) -> mesos.Call:
    return mesos.Call(
        type=mesos.CallType.ACKNOWLEDGE_MANY,
        framework_id=mesos.FrameworkID(fid),
        acknowledge_many=mesos.AcknowledgeMany(acknowledgements=acks),
    )


def test_entries_are_forwarded_to_their_agents_and_bad_ones_ignored() -> None:
    h = Harness()
    fid, sid = h.subscribe()
    a1, c1 = h.agent()
    a2, c2 = h.agent()
    os_ = {o.agent_id.value: o for o in offers(h.allocate(), sid)}
    _launch(h, fid, sid, os_[a1], "t1", "t2")
    _launch(h, fid, sid, os_[a2], "t3")
    sts = []
    for conn, tid, u in ((c1, "t1", b"1" * 16), (c1, "t2", b"2" * 16), (c2, "t3", b"3" * 16)):
        (st,) = updates(h.status(conn, fid, tid, TS.TASK_RUNNING, uuid=u), sid)
        sts.append(st)
    before = h.state.counters["dropped_messages"]
    fx = h.call(
        fid,
        sid,
        _many(
            fid,
            _ack(a1, "t1", b"1" * 16),
            _ack(a2, "t2", b"2" * 16),  # wrong agent for t2 (S17): ignored like a single ACKNOWLEDGE
            _ack(a1, "nope", b"9" * 16),  # unknown task: ignored
            _ack(a2, "t3", b"3" * 16),
            _ack(a1, "t2", b"2" * 16),
        ),
    )
    acks = [(e.conn_id, e.body.task_id.value, e.body.uuid) for e in fx if isinstance(e.body, ac.AcknowledgeMsg)]  # type: ignore[union-attr]
    assert acks == [(c1, "t1", b"1" * 16), (c2, "t3", b"3" * 16), (c1, "t2", b"2" * 16)]
    assert h.state.counters["dropped_messages"] == before + 2
    assert h.state.calls["ACKNOWLEDGE_MANY"] == 1


def test_same_effects_as_the_single_acknowledges() -> None:
    def run(batched: bool) -> list[tuple[int, str, bytes]]:
        h = Harness()
        fid, sid = h.subscribe()
        _aid, conn = h.agent()
        (offer,) = offers(h.allocate(), sid)
        _launch(h, fid, sid, offer, "a", "b")
        sts = [updates(h.status(conn, fid, t, TS.TASK_FINISHED, uuid=t.encode() * 16), sid)[0] for t in ("a", "b")]
        if batched:
            fx = h.call(fid, sid, mesos.Call.make_acknowledge_many(mesos.FrameworkID(fid), sts))
        else:
            fx = [e for st in sts for e in h.call(fid, sid, mesos.Call.make_acknowledge(mesos.FrameworkID(fid), st))]
        return [(conn, m.task_id.value, m.uuid) for m in to_agent(fx, ac.AcknowledgeMsg)]

    assert run(True) == run(False) == [(1, "a", b"a" * 16), (1, "b", b"b" * 16)]


def test_late_ack_of_a_task_pushed_out_of_completed_still_reaches_the_agent() -> None:
    h = Harness(completed_tasks_per_framework=2)
    fid, sid = h.subscribe()
    _aid, conn = h.agent()
    (offer,) = offers(h.allocate(), sid)
    tids = [f"t{i}" for i in range(5)]
    _launch(h, fid, sid, offer, *tids)
    sts = [updates(h.status(conn, fid, t, TS.TASK_FINISHED, uuid=t.encode().ljust(16, b"x")), sid)[0] for t in tids]
    fw = h.state.frameworks[fid]
    assert list(fw.completed) == ["t3", "t4"] and list(fw.awaiting_ack) == ["t0", "t1", "t2"]
    fx = h.call(fid, sid, mesos.Call.make_acknowledge_many(mesos.FrameworkID(fid), sts))
    assert [m.task_id.value for m in to_agent(fx, ac.AcknowledgeMsg)] == tids
    assert not fw.awaiting_ack  # acknowledged: forgotten
    # an acknowledged task leaves completed for good when pushed out
    h.status(conn, fid, "t3", TS.TASK_FINISHED, uuid=b"t3".ljust(16, b"x"))
    assert fw.finished("t0") is None


def test_ack_from_the_stream_that_just_closed_is_still_forwarded() -> None:
    h = Harness()
    fid, sid = h.subscribe()
    _aid, conn = h.agent()
    (offer,) = offers(h.allocate(), sid)
    _launch(h, fid, sid, offer, "t1")
    (st,) = updates(h.status(conn, fid, "t1", TS.TASK_RUNNING), sid)
    from master.events import StreamClosed

    h.feed(StreamClosed(stream_id=sid))
    fx = h.call(fid, sid, mesos.Call.make_acknowledge_many(mesos.FrameworkID(fid), [st]))
    assert [m.task_id.value for m in to_agent(fx, ac.AcknowledgeMsg)] == ["t1"]
