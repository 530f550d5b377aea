"""Offers, DRF, classic and reusable ACCEPT, filters, suppress/revive, validation."""

from __future__ import annotations

from master.allocator import (
    Accepted,
    FrameworkAdded,
    OfferRescinded,
    RejectCode,
    Rejected,
    Reserve,
    Revived,
    Suppressed,
    Unreserve,
)


def test_single_agent_single_framework_gets_everything(sim):
    sim.agent("a1").cpus(8).mem(1024).add()
    sim.framework("f1").add()
    out = sim.allocate()
    assert sim.summary(out) == [("created", "f1", "a1", "cpus:8; mem:1024")]
    offer = sim.created(out)[0]
    assert offer.offer_id == "t-O1"
    assert offer.hostname == "a1.example"
    assert not offer.reusable
    assert sim.allocate() == []  # quiet cluster: nothing to do


def test_drf_gives_next_agent_to_lowest_share(sim):
    sim.framework("f1").add()
    sim.framework("f2").add()
    sim.agent("a1").cpus(4).mem(1024).add()
    out = sim.allocate()
    assert sim.summary(out) == [("created", "f1", "a1", "cpus:4; mem:1024")]
    sim.agent("a2").cpus(4).mem(1024).add()
    out = sim.allocate()
    # f1 holds a1's offer (share 0.5), so f2 is first
    assert sim.summary(out) == [("created", "f2", "a2", "cpus:4; mem:1024")]


def test_weights_favour_heavier_role(sim):
    sim.framework("light").role("a").add()
    sim.framework("heavy").role("b").add()
    from master.allocator import WeightSet

    sim.handle(WeightSet("b", 3.0))
    for i in range(4):
        sim.agent(f"n{i}").cpus(1).mem(100).add()
    out = sim.allocate()
    got = [o.framework_id for o in sim.created(out)]
    assert got.count("heavy") == 3 and got.count("light") == 1


def test_hierarchical_roles_share_at_each_level(sim):
    sim.framework("ml1").role("eng/ml").add()
    sim.framework("ml2").role("eng/ml").add()
    sim.framework("web").role("eng/web").add()
    sim.framework("ops").role("ops").add()
    for i in range(4):
        sim.agent(f"n{i}").cpus(1).mem(100).add()
    out = sim.allocate()
    got = sorted(o.framework_id for o in sim.created(out))
    # eng and ops share equally (2 each); inside eng, ml and web equally (ties go by name: eng
    # before ops, ml before web, so ml1 is offered first and ml2 never)
    assert got == ["ml1", "ops", "ops", "web"]
    shares = sim.alloc.role_shares()
    assert abs(shares["eng"] - shares["ops"]) < 1e-9


def test_gpus_excluded_from_fair_share(sim):
    sim.framework("f1").gpu().add()
    sim.framework("f2").gpu().add()
    sim.agent("gpu").cpus(1).mem(100).gpus(8).add()
    sim.agent("cpu1").cpus(1).mem(100).add()
    out = sim.allocate()
    assert [o.framework_id for o in sim.created(out)] == ["f1", "f2"]
    # f1 holds all 8 gpus but its share is only its cpu/mem share
    assert sim.alloc.framework_share("f1", "*") == sim.alloc.framework_share("f2", "*")


def test_classic_accept_launches_and_declines_remainder_with_filter(sim):
    sim.agent("a1").cpus(4).mem(1024).add()
    sim.framework("f1").add()
    offer = sim.created(sim.allocate())[0]
    result = sim.accept("f1", offer.offer_id, sim.launch("t1", "cpus:1;mem:128"), refuse=10)
    assert isinstance(result, Accepted)
    assert result.decisions == ()
    assert [t.task_id for t in result.launched] == ["t1"]
    assert sim.alloc.offer(offer.offer_id) is None  # consumed
    view = sim.alloc.agent_view("a1")
    assert str(view.allocated) == "cpus:1; mem:128"
    assert str(view.free) == "cpus:3; mem:896"
    # the remainder is filtered for f1 for 10 s
    assert sim.allocate() == []
    assert sim.summary(sim.advance(10)) == [("created", "f1", "a1", "cpus:3; mem:896")]


def test_reusable_accept_keeps_remainder_and_regains_finished_task(sim):
    sim.agent("a1").cpus(4).mem(1024).add()
    sim.framework("f1").reusable().add()
    offer = sim.created(sim.allocate())[0]
    assert offer.reusable
    result = sim.accept("f1", offer.offer_id, sim.launch("t1", "cpus:1;mem:128"))
    assert isinstance(result, Accepted)
    [upd] = result.decisions
    assert upd.offer.offer_id == offer.offer_id
    assert str(upd.offer.resources) == "cpus:3; mem:896"
    assert result.launched[0].offer_id == offer.offer_id
    # a second ACCEPT on the same offer id works (it is a lease)
    result = sim.accept("f1", offer.offer_id, sim.launch("t2", "cpus:3;mem:896"))
    assert isinstance(result, Accepted)
    assert str(sim.alloc.offer(offer.offer_id).resources) == ""
    # t1 ends: its resources flow back into the same offer id
    out = sim.finish("f1", "a1", "t1")
    assert sim.summary(out) == [("updated", "f1", "a1", "cpus:1; mem:128")]
    assert sim.updated(out)[0].offer_id == offer.offer_id
    assert sim.allocate() == []  # nothing free: the lease holds it


def test_reusable_idle_part_expires(sim_factory):
    sim = sim_factory(offer_idle_timeout=30.0)
    sim.agent("a1").cpus(4).mem(1024).add()
    sim.framework("f1").reusable().add()
    offer = sim.created(sim.allocate())[0]
    sim.accept("f1", offer.offer_id, sim.launch("t1", "cpus:1;mem:128"))
    assert sim.alloc.next_deadline(sim.now) is not None
    out = sim.advance(29)
    assert sim.summary(out) == []
    out = sim.advance(1)
    # the idle part goes back; the lease stays (a task runs from it) with nothing idle;
    # the holder is filtered from it for the default refuse time, as if it had declined
    assert sim.summary(out) == [("updated", "f1", "a1", "")]
    assert str(sim.alloc.agent_view("a1").free) == "cpus:3; mem:896"
    out = sim.advance(5)
    assert sim.summary(out) == [("updated", "f1", "a1", "cpus:3; mem:896")]
    assert sim.updated(out)[0].offer_id == offer.offer_id


def test_reusable_lease_without_tasks_is_rescinded_when_idle(sim_factory):
    sim = sim_factory(offer_idle_timeout=5.0)
    sim.agent("a1").cpus(4).mem(1024).add()
    sim.framework("f1").reusable().add()
    sim.framework("f2").add()
    offer = sim.created(sim.allocate())[0]
    out = sim.advance(5)
    assert sim.rescinded(out) == [offer.offer_id]
    # f2 (lower share now) gets the resources
    assert [o.framework_id for o in sim.created(out)] == ["f2"]


def test_classic_offer_timeout(sim_factory):
    sim = sim_factory(offer_timeout=60.0)
    sim.agent("a1").cpus(4).mem(1024).add()
    sim.framework("f1").add()
    offer = sim.created(sim.allocate())[0]
    out = sim.advance(60)
    assert sim.rescinded(out) == [offer.offer_id]


def test_decline_filters_agent_then_other_framework_gets_it(sim):
    sim.agent("a1").cpus(4).mem(1024).add()
    sim.framework("f1").add()
    sim.framework("f2").add()
    offer = sim.created(sim.allocate())[0]
    assert offer.framework_id == "f1"
    sim.decline("f1", offer.offer_id, refuse=100)
    out = sim.allocate()
    assert sim.summary(out) == [("created", "f2", "a1", "cpus:4; mem:1024")]


def test_filter_lets_larger_offer_through(sim):
    sim.agent("a1").cpus(4).mem(1024).add()
    sim.framework("f1").add()
    offer = sim.created(sim.allocate())[0]
    res = sim.accept("f1", offer.offer_id, sim.launch("t1", "cpus:2;mem:512"), refuse=1000)
    assert isinstance(res, Accepted)
    assert sim.allocate() == []  # remainder cpus:2;mem:512 filtered
    sim.finish("f1", "a1", "t1")
    out = sim.allocate()  # more than the filtered resources is free: offered
    assert sim.summary(out) == [("created", "f1", "a1", "cpus:4; mem:1024")]


def test_suppress_stops_offers_and_revive_clears_filters(sim):
    sim.agent("a1").cpus(4).mem(1024).add()
    sim.framework("f1").add()
    sim.handle(Suppressed("f1"))
    assert sim.allocate() == []
    assert "suppressed" in sim.alloc.why_not_offered("f1")
    sim.handle(Revived("f1"))
    offer = sim.created(sim.allocate())[0]
    sim.decline("f1", offer.offer_id, refuse=1000)
    assert sim.allocate() == []
    assert "filtered" in sim.alloc.why_not_offered("f1")
    sim.handle(Revived("f1"))
    assert sim.summary(sim.allocate()) == [("created", "f1", "a1", "cpus:4; mem:1024")]


def test_min_allocatable(sim):
    sim.agent("a1").cpus(0.005).mem(16).add()
    sim.framework("f1").add()
    assert sim.allocate() == []


def test_static_reservation_only_to_its_role(sim):
    sim.agent("a1").cpus(2).mem(256).reserved("ml", "cpus:4;gpus:1").add()
    sim.framework("web").role("web").gpu().add()
    sim.framework("ml").role("ml").gpu().add()
    out = sim.allocate()
    got = {o.framework_id: str(o.resources) for o in sim.created(out)}
    assert got["web"] == "cpus:2; mem:256"
    assert got["ml"] == "cpus(ml):4; gpus(ml):1"


def test_reservation_to_parent_role_usable_by_child(sim):
    sim.agent("a1").reserved("eng", "cpus:4;mem:100").add()
    sim.framework("ml").role("eng/ml").add()
    out = sim.allocate()
    assert sim.summary(out) == [("created", "ml", "a1", "cpus(eng):4; mem(eng):100")]


def test_dynamic_reserve_and_unreserve(sim):
    sim.agent("a1").cpus(4).mem(1024).add()
    sim.framework("ml").role("ml").reusable().add()
    sim.framework("web").role("web").add()
    offer = sim.created(sim.allocate())[0]
    assert offer.framework_id == "ml"
    reserved = sim.R("cpus:2").reserve("ml", "alice")
    res = sim.accept("ml", offer.offer_id, Reserve(reserved))
    assert isinstance(res, Accepted) and res.reserved == (reserved,)
    lease = sim.alloc.offer(offer.offer_id)
    assert lease.resources == sim.R("cpus:2;mem:1024") + reserved
    assert sim.alloc.agent_view("a1").total == sim.R("cpus:2;mem:1024") + reserved
    res = sim.accept("ml", offer.offer_id, Unreserve(reserved))
    assert isinstance(res, Accepted)
    assert sim.alloc.agent_view("a1").total == sim.R("cpus:4;mem:1024")


def test_reserve_for_other_role_is_rejected(sim):
    sim.agent("a1").cpus(4).mem(1024).add()
    sim.framework("ml").role("ml").add()
    offer = sim.created(sim.allocate())[0]
    res = sim.accept("ml", offer.offer_id, Reserve(sim.R("cpus:2").reserve("web")))
    assert isinstance(res, Rejected) and res.code is RejectCode.INVALID_OPERATION


class TestAcceptValidation:
    def _setup(self, sim, reusable=False):
        sim.agent("a1").cpus(2).mem(256).add()
        sim.agent("a2").cpus(2).mem(256).add()
        b = sim.framework("f1")
        if reusable:
            b = b.reusable()
        b.add()
        sim.framework("f2").add()
        out = sim.allocate()
        mine = [o for o in sim.created(out) if o.framework_id == "f1"]
        theirs = [o for o in sim.created(out) if o.framework_id == "f2"]
        return mine, theirs

    def test_unknown_offer(self, sim):
        self._setup(sim)
        res = sim.accept("f1", "nope", sim.launch("t", "cpus:1"))
        assert isinstance(res, Rejected) and res.code is RejectCode.UNKNOWN_OFFER

    def test_other_frameworks_offer(self, sim):
        _, theirs = self._setup(sim)
        res = sim.accept("f1", theirs[0].offer_id, sim.launch("t", "cpus:1"))
        assert isinstance(res, Rejected) and res.code is RejectCode.NOT_OWNER
        assert sim.alloc.offer(theirs[0].offer_id) is not None  # untouched

    def test_duplicate_offer_id(self, sim):
        mine, _ = self._setup(sim)
        oid = mine[0].offer_id
        res = sim.accept("f1", [oid, oid], sim.launch("t", "cpus:1"))
        assert isinstance(res, Rejected) and res.code is RejectCode.DUPLICATE_OFFER
        assert sim.alloc.offer(oid) is None  # classic: consumed, resources back
        assert str(sim.alloc.agent_view(mine[0].agent_id).free) == "cpus:2; mem:256"

    def test_offers_from_two_agents(self, sim):
        sim.agent("a1").cpus(2).mem(256).add()
        sim.agent("a2").cpus(2).mem(256).add()
        sim.framework("f1").add()
        offers = sim.created(sim.allocate())
        assert len(offers) == 2
        res = sim.accept("f1", [o.offer_id for o in offers], sim.launch("t", "cpus:1"))
        assert isinstance(res, Rejected) and res.code is RejectCode.DIFFERENT_AGENTS

    def test_more_than_offered(self, sim):
        mine, _ = self._setup(sim)
        oid = mine[0].offer_id
        res = sim.accept("f1", oid, sim.launch("t1", "cpus:1"), sim.launch("t2", "cpus:1.5"))
        assert isinstance(res, Rejected) and res.code is RejectCode.INSUFFICIENT_RESOURCES
        assert "more resources than offered" in res.reason
        assert sim.alloc.tasks() == ()

    def test_rejected_accept_leaves_reusable_offer_intact(self, sim):
        mine, _ = self._setup(sim, reusable=True)
        oid = mine[0].offer_id
        res = sim.accept("f1", oid, sim.launch("t1", "cpus:5"))
        assert isinstance(res, Rejected)
        assert str(sim.alloc.offer(oid).resources) == "cpus:2; mem:256"

    def test_replayed_accept_is_rejected(self, sim):
        mine, _ = self._setup(sim)
        oid = mine[0].offer_id
        assert isinstance(sim.accept("f1", oid, sim.launch("t1", "cpus:1")), Accepted)
        res = sim.accept("f1", oid, sim.launch("t1b", "cpus:1"))
        assert isinstance(res, Rejected) and res.code is RejectCode.UNKNOWN_OFFER

    def test_duplicate_task_id(self, sim):
        mine, _ = self._setup(sim, reusable=True)
        oid = mine[0].offer_id
        assert isinstance(sim.accept("f1", oid, sim.launch("t1", "cpus:1")), Accepted)
        res = sim.accept("f1", oid, sim.launch("t1", "cpus:0.5"))
        assert isinstance(res, Rejected) and res.code is RejectCode.DUPLICATE_TASK


def test_pass_visits_only_dirty_agents(sim):
    sim.framework("f1").add()
    for i in range(50):
        sim.agent(f"n{i}").cpus(1).mem(100).add()
    first = sim.allocate()
    assert len(sim.created(first)) == 50 and sim.alloc.last_pass.full_sweep
    assert sim.allocate() == []
    assert sim.alloc.last_pass.agents_visited == 0  # a quiet cluster costs nothing
    offer = sim.offers("f1")[7]
    sim.decline("f1", offer.offer_id, refuse=0)
    out = sim.allocate()
    assert sim.alloc.last_pass.agents_visited == 1
    assert sim.summary(out) == [("created", "f1", offer.agent_id, "cpus:1; mem:100")]


def test_periodic_full_sweep(sim_factory):
    sim = sim_factory(sweep_interval=60.0)
    sim.framework("f1").add()
    sim.agent("n1").cpus(1).mem(100).add()
    sim.allocate()
    sim.advance(30)
    assert not sim.alloc.last_pass.full_sweep
    sim.advance(30)
    assert sim.alloc.last_pass.full_sweep


def test_resubscribe_with_other_role_offers_only_new_role(sim):
    sim.agent("n1").cpus(2).mem(200).reserved("old", "cpus:1;mem:10").add()
    sim.framework("f").role("old").add()
    offer = sim.created(sim.allocate())[0]
    res = sim.accept("f", offer.offer_id, sim.launch("t1", "cpus(old):1;mem(old):10"))
    assert isinstance(res, Accepted)
    sim.framework("f").role("new").add()  # re-subscribes with another role
    out = sim.allocate()
    assert [(o.role, str(o.resources)) for o in sim.created(out)] == [("new", "cpus:2; mem:200")]
    assert sim.alloc.role_shares()["old"] > 0  # the running task still counts for its role


def test_suppressed_lease_does_not_regrow(sim):
    sim.agent("a1").cpus(4).mem(1024).add()
    sim.framework("f1").reusable().add()
    offer = sim.created(sim.allocate())[0]
    sim.accept("f1", offer.offer_id, sim.launch("t1", "cpus:1;mem:128"))
    sim.handle(Suppressed("f1"))
    assert sim.finish("f1", "a1", "t1") == []
    assert str(sim.alloc.agent_view("a1").free) == "cpus:1; mem:128"


def test_multi_role_framework_revive_one_role(sim):
    sim.agent("n1").cpus(1).mem(100).reserved("a", "cpus:1;mem:100").reserved("b", "cpus:2;mem:200").add()
    sim.framework("f").role("a").role("b").add()
    out = sim.allocate()
    got = sorted((o.role, str(o.resources)) for o in sim.created(out))
    # role a (older in the sorter) is offered the unreserved part too; role b its reservation
    assert got == [("a", "cpus:1; cpus(a):1; mem:100; mem(a):100"), ("b", "cpus(b):2; mem(b):200")]
    for o in sim.offers("f"):
        sim.decline("f", o.offer_id, refuse=1000)
    assert sim.allocate() == []
    sim.handle(Revived("f", roles=("b",)))  # only role b's filters go
    out = sim.allocate()
    assert [(o.role, str(o.resources)) for o in sim.created(out)] == [("b", "cpus:1; cpus(b):2; mem:100; mem(b):200")]


def test_lease_grows_when_agent_total_grows(sim):
    sim.framework("f1").reusable().add()
    sim.agent("a1").cpus(2).mem(200).add()
    first = sim.created(sim.allocate())[0]
    sim.accept("f1", first.offer_id, sim.launch("t1", "cpus:1;mem:100"))
    # a second lease on the same agent cannot exist: growth goes into the first one
    sim.agent("a1").cpus(4).mem(400).add()  # re-registration with a larger total
    out = sim.allocate()
    assert [o.offer_id for o in sim.updated(out)] == [first.offer_id]
    res = sim.accept("f1", [first.offer_id], sim.launch("t2", "cpus:1;mem:100"))
    assert isinstance(res, Accepted)
    assert sim.finish("f1", "a1", "t1")[0].offer.offer_id == first.offer_id


def test_a_role_dropped_on_update_takes_its_offers_back(sim):
    """UPDATE_FRAMEWORK (or a re-subscription) without a role: the framework's offers in that
    role are rescinded, as Mesos does; those in the roles it keeps stay."""
    sim.agent("a1").cpus(2).mem(100).add()
    sim.agent("a2").cpus(2).mem(100).add()
    sim.framework("f").role("web").role("batch").add()
    sim.allocate()
    held = {o.offer_id: o.role for o in sim.alloc.offers_of("f")}
    assert len(held) == 2 and "web" in held.values()
    out = sim.handle(FrameworkAdded("f", ("batch",), frozenset()))
    gone = {d.offer_id for d in out if isinstance(d, OfferRescinded)}
    assert gone and gone == {oid for oid, role in held.items() if role == "web"}
    assert {o.role for o in sim.alloc.offers_of("f")} <= {"batch"}
