"""The offer book (``master.offer_book.OfferBook``, the core's ``offer_book``) through its own
API: the allocator's decisions become OFFERS (at once outside a fact, batched within one), RESCIND
and agent REVOKE; offers to a framework that is not connected are dropped; a fact the allocator
refuses is recorded and changes nothing. The cluster around it is built through
``MasterState.handle`` (``Harness``)."""

from __future__ import annotations

from master.allocator import decisions as ad
from master.allocator import events as ae
from master.events import Effect, SendEvent, SendToAgent, StreamClosed
from master.testing import Harness, events, framework_info
from protocol import agent_channel as ac
from protocol import mesos
from protocol.resources import Resources

ET = mesos.EventType


def cluster() -> tuple[Harness, str, str, str, int]:
    h = Harness(ping_interval=1e9, ping_timeout=1e9)
    aid, conn = h.agent("cpus:4;mem:1024", hostname="h1")
    fid, sid = h.subscribe(framework_info("f"))
    return h, fid, sid, aid, conn


def offer(fid: str, aid: str, oid: str = "o-x", res: str = "cpus:1;mem:64") -> ad.Offer:
    return ad.Offer(offer_id=oid, framework_id=fid, role="*", agent_id=aid, hostname="h1",
                    resources=Resources.parse(res), created=0.0, idle_since=None, revocable=Resources(), reusable=False)


def test_an_offer_decided_outside_a_fact_is_sent_at_once_in_mesos_form() -> None:
    h, fid, sid, aid, _conn = cluster()
    fx: list[Effect] = []
    h.state.offer_book.decisions([ad.OfferCreated(offer=offer(fid, aid), reason="new")], h.now, fx)
    assert fx == [SendEvent(sid, mesos.Event.make_offers((mesos.Offer(
        id=mesos.OfferID("o-x"), framework_id=mesos.FrameworkID(fid), agent_id=mesos.AgentID(aid), hostname="h1",
        url=mesos.URL(scheme="http", address=mesos.Address(port=5051, hostname="h1"), path="/slave(1)"),
        resources=Resources.parse("cpus:1;mem:64").to_mesos(allocation_role="*"),
        allocation_info=mesos.AllocationInfo(role="*"),
    ),)))]
    assert h.state.offer_book.batch is None and h.state.offer_book.created == set()


def test_within_a_fact_an_offer_updated_twice_is_sent_once_in_its_latest_form() -> None:
    h, fid, sid, aid, _conn = cluster()
    book = h.state.offer_book
    fx: list[Effect] = []
    book.batch = {}
    book.decisions([ad.OfferCreated(offer=offer(fid, aid), reason="new")], h.now, fx)
    book.decisions([ad.OfferUpdated(offer=offer(fid, aid, res="cpus:2;mem:64"), reason="regrew")], h.now, fx)
    assert fx == []  # nothing sent before the fact ends
    batch, book.batch = book.batch, None
    book.flush(batch, fx)
    (ev,) = events(fx, sid, ET.OFFERS)
    assert ev.offers is not None
    assert [Resources.from_mesos(o.resources) for o in ev.offers.offers] == [Resources.parse("cpus:2;mem:64")]


def test_offers_to_a_disconnected_framework_are_dropped_and_revoke_goes_to_the_agent() -> None:
    h, fid, sid, aid, conn = cluster()
    book = h.state.offer_book
    fx: list[Effect] = []
    book.decisions([ad.Revoke(framework_id=fid, agent_id=aid, task_ids=("t1", "t2"), grace_seconds=3.0, reason="r")],
                   h.now, fx)
    assert fx == [SendToAgent(conn, ac.Revoke(framework_id=mesos.FrameworkID(fid),
                                              task_ids=(mesos.TaskID("t1"), mesos.TaskID("t2")),
                                              grace_seconds=3.0, reason="r"))]
    h.feed(StreamClosed(sid))
    fx = []
    book.decisions([ad.OfferCreated(offer=offer(fid, aid), reason="new")], h.now, fx)
    assert fx == []


def test_a_fact_the_allocator_refuses_is_recorded_and_changes_nothing() -> None:
    h, _fid, _sid, _aid, _conn = cluster()
    book, st = h.state.offer_book, h.state
    fx: list[Effect] = []
    book.alloc_event(ae.WeightSet(role="r", weight=0.0), h.now, fx)
    assert fx == [] and st.allocator_errors == ["WeightSet: weight of role r must be > 0, got 0.0"]
    for _ in range(30):
        book.alloc_event(ae.WeightSet(role="r", weight=0.0), h.now, fx)
    assert len(st.allocator_errors) == 20  # the latest 20 are kept


def test_agent_urls_are_remembered_and_follow_the_agents_https_capability() -> None:
    h, _fid, _sid, aid, _conn = cluster()
    book, ag = h.state.offer_book, h.state.agents[aid]
    url = book.agent_url(ag)
    assert url == mesos.URL(scheme="http", address=mesos.Address(port=5051, hostname="h1"), path="/slave(1)")
    assert book.agent_url(ag) is url
    ag.capabilities = (ac.AGENT_HTTPS,)
    assert book.agent_url(ag).scheme == "https"
