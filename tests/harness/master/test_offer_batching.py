"""One agent frame is one fact: the offer updates its status updates cause are coalesced into one
OFFERS event per framework (the latest form of each lease), after the updates; a lease updated
and then rescinded within one fact is rescinded, an offer made and rescinded at once never sent."""

from __future__ import annotations

from master.allocator import decisions as ad
from master.events import AgentMessagesReceived, SendEvent
from master.testing import Harness, events, framework_info, offers, task, updates
from protocol import agent_channel as ac
from protocol import mesos
from protocol.resources import Resources
from protocol.task_states import TaskState as TS


def _launch(h: Harness, fid: str, sid: str, o: mesos.Offer, n: int) -> list[str]:
    tasks = [task(f"t{i}", cpus=1, mem=64) for i in range(n)]
    op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=tuple(tasks)))
    h.call(fid, sid, mesos.Call.make_accept(mesos.FrameworkID(fid), (o.id,), (op,), mesos.Filters(refuse_seconds=0)))
    return [t.task_id.value for t in tasks]


def _status(fid: str, tid: str, state: TS, n: int) -> ac.StatusUpdateMsg:
    st = mesos.TaskStatus(task_id=mesos.TaskID(tid), state=state, source=mesos.Source.SOURCE_EXECUTOR,
                          uuid=bytes([n]) * 16)
    return ac.StatusUpdateMsg(framework_id=mesos.FrameworkID(fid), status=st)


def test_frame_of_updates_sends_one_offer_update() -> None:
    h = Harness(ping_interval=1e9, ping_timeout=1e9)
    _, conn = h.agent("cpus:4;mem:1024", hostname="h1")
    fid, sid = h.subscribe(framework_info("f", "REUSABLE_OFFERS"))
    (o,) = offers(h.allocate(), sid)
    tids = _launch(h, fid, sid, o, 3)
    msgs = [_status(fid, t, TS.TASK_RUNNING, i) for i, t in enumerate(tids)]
    msgs += [_status(fid, t, TS.TASK_FINISHED, 10 + i) for i, t in enumerate(tids)]
    fx = h.feed(AgentMessagesReceived(conn, tuple(msgs)))
    assert [(u.task_id.value, u.state) for u in updates(fx, sid)] == [
        *((t, TS.TASK_RUNNING) for t in tids), *((t, TS.TASK_FINISHED) for t in tids)
    ]
    evs = events(fx, sid, mesos.EventType.OFFERS)
    sent = offers(fx, sid)
    # the lease regrows with each FINISHED: one OFFERS event, its final form, after the updates
    assert len(evs) == 1 and len(sent) == 1
    assert Resources.from_mesos(sent[0].resources).scalar("cpus") == 4
    kinds = [e.event.type for e in fx if isinstance(e, SendEvent)]
    assert kinds.index(mesos.EventType.OFFERS) > max(i for i, k in enumerate(kinds) if k is mesos.EventType.UPDATE)


def test_same_as_one_message_at_a_time() -> None:
    def run(batched: bool) -> list[tuple[str, object]]:
        h = Harness(ping_interval=1e9, ping_timeout=1e9)
        _, conn = h.agent("cpus:4;mem:1024", hostname="h1")
        fid, sid = h.subscribe(framework_info("f", "REUSABLE_OFFERS"))
        (o,) = offers(h.allocate(), sid)
        tids = _launch(h, fid, sid, o, 2)
        msgs = [_status(fid, t, s, i * 2 + j) for i, t in enumerate(tids) for j, s in enumerate((TS.TASK_RUNNING, TS.TASK_FINISHED))]
        if batched:
            h.feed(AgentMessagesReceived(conn, tuple(msgs)))
        else:
            for m in msgs:
                h.agent_says(conn, m)
        fx = h.allocate()
        state = h.state
        fw = state.frameworks[fid]
        book = _book(state)
        assert book
        return [("tasks", sorted(fw.completed)), ("offers", [str(Resources.from_mesos(x.resources)) for x in offers(fx, sid)]),
                ("free", sorted(str(off.resources) for _, off in book))]

    assert run(True) == run(False)


def _book(state: object) -> list[tuple[str, ad.Offer]]:
    return [(o.offer_id, o) for o in state.alloc.outstanding_offers()]  # type: ignore[attr-defined]


def test_updated_then_rescinded_in_one_fact_is_rescinded() -> None:
    h = Harness(ping_interval=1e9, ping_timeout=1e9)
    h.agent("cpus:4;mem:1024", hostname="h1")
    fid, sid = h.subscribe(framework_info("f", "REUSABLE_OFFERS"))
    (o,) = offers(h.allocate(), sid)
    st = h.state
    book = st.alloc.offer(o.id.value)
    assert book is not None
    fx: list = []
    st.offer_book.batch = {}
    st.offer_book.decisions([ad.OfferUpdated(offer=book, reason="regrew"),
                             ad.OfferRescinded(offer_id=book.offer_id, framework_id=fid, agent_id=book.agent_id, reason="x")], 0.0, fx)
    batch, st.offer_book.batch = st.offer_book.batch, None
    st.offer_book.flush(batch, fx)
    evs = events(fx, sid)
    assert [e.type for e in evs] == [mesos.EventType.RESCIND]
    # created and rescinded within one fact: nothing at all
    fx = []
    st.offer_book.decisions([ad.OfferCreated(offer=book, reason="new"),
                             ad.OfferRescinded(offer_id=book.offer_id, framework_id=fid, agent_id=book.agent_id, reason="x")], 0.0, fx)
    assert events(fx, sid) == []


def test_offers_for_many_agents_are_split_into_bounded_events() -> None:
    from master.offer_book import OFFERS_PER_EVENT

    h = Harness(ping_interval=1e9, ping_timeout=1e9)
    n = OFFERS_PER_EVENT + 7
    for i in range(n):
        h.agent("cpus:1;mem:64", hostname=f"h{i}")
    _fid, sid = h.subscribe(framework_info("f"))
    fx = h.allocate()
    sizes = [len(e.offers.offers) for e in events(fx, sid, mesos.EventType.OFFERS) if e.offers]
    assert sizes == [OFFERS_PER_EVENT, 7]
