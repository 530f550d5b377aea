"""Quota guarantees and limits, demands (REQUEST), gangs, idle-part rescind for fairness."""

from __future__ import annotations

from master.allocator import Accepted, Demand, QuotaSet


def test_quota_guarantee_satisfied_first(sim):
    sim.framework("big").role("big").add()
    sim.framework("q").role("q").add()
    sim.handle(QuotaSet("q", sim.R("cpus:3;mem:300")))
    for i in range(4):
        sim.agent(f"n{i}").cpus(1).mem(100).add()
    out = sim.allocate()
    got = [o.framework_id for o in sim.created(out)]
    assert got.count("q") == 3 and got.count("big") == 1
    assert sim.alloc.quota_consumed("q") == {"cpus": 3.0, "mem": 300.0}


def test_quota_guarantee_offer_shrunk_to_guarantee(sim):
    sim.framework("q").role("q").add()
    sim.framework("other").role("other").add()
    sim.handle(QuotaSet("q", sim.R("cpus:1;mem:100")))
    sim.agent("n1").cpus(4).mem(400).add()
    out = sim.allocate()
    assert sim.summary(out) == [
        ("created", "q", "n1", "cpus:1; mem:100"),
        ("created", "other", "n1", "cpus:3; mem:300"),
    ]


def test_headroom_held_for_unmet_guarantee(sim):
    # the quota role's framework is filtered right now: others must not take its headroom
    sim.framework("q").role("q").add()
    sim.framework("other").role("other").add()
    sim.handle(QuotaSet("q", sim.R("cpus:2;mem:200")))
    sim.agent("n1").cpus(4).mem(400).add()
    first = sim.allocate()
    q_offer = next(o for o in sim.created(first) if o.framework_id == "q")
    sim.decline("q", q_offer.offer_id, refuse=100)
    out = sim.allocate()
    assert out == []  # the 2 cpus freed by q are held for q's guarantee
    view = sim.alloc.agent_view("n1")
    assert str(view.free) == "cpus:2; mem:200"


def test_quota_limit_never_exceeded(sim):
    sim.framework("capped").role("capped").add()
    sim.handle(QuotaSet("capped", sim.R(""), limit=sim.R("cpus:3;mem:1000")))
    sim.agent("n1").cpus(2).mem(100).add()
    sim.agent("n2").cpus(2).mem(100).add()
    out = sim.allocate()
    # agents are visited from a rotating start: whichever comes first gets 2 cpus, then 1
    assert sorted(str(o.resources) for o in sim.created(out)) == ["cpus:1; mem:100", "cpus:2; mem:100"]
    assert sim.alloc.quota_consumed("capped")["cpus"] == 3.0


def test_demand_offers_shaped_and_first(sim):
    sim.framework("plain").add()
    sim.framework("batch").add()
    sim.agent("n1").cpus(8).mem(1024).add()
    sim.demand("batch", Demand(sim.R("cpus:2;mem:256"), count=3))
    out = sim.allocate()
    assert sim.summary(out) == [
        ("created", "batch", "n1", "cpus:6; mem:768"),
        ("created", "plain", "n1", "cpus:2; mem:256"),
    ]
    # the demand is covered by the outstanding offer: nothing more
    assert sim.allocate() == []


def test_demand_consumed_by_launch_and_reissued(sim):
    sim.framework("batch").reusable().add()
    sim.agent("n1").cpus(8).mem(1024).add()
    sim.demand("batch", Demand(sim.R("cpus:2;mem:256"), count=1))
    offer = sim.created(sim.allocate())[0]
    assert str(offer.resources) == "cpus:2; mem:256"
    res = sim.accept("batch", offer.offer_id, sim.launch("t1", "cpus:2;mem:256"))
    assert isinstance(res, Accepted)
    assert sim.allocate() == []  # demand met; a REQUEST framework gets no unrequested offers
    assert "no unmet demand" in sim.alloc.why_not_offered("batch")
    sim.demand("batch", Demand(sim.R("cpus:1;mem:128"), count=2))
    out = sim.allocate()
    assert sim.summary(out) == [("updated", "batch", "n1", "cpus:2; mem:256")]


def test_two_gangs_needing_all_gpus_never_both_hold_part(sim):
    sim.agent("g1").cpus(8).mem(1000).gpus(2).add()
    sim.agent("g2").cpus(8).mem(1000).gpus(2).add()
    sim.framework("jobA").gpu().add()
    sim.framework("jobB").gpu().add()
    shape = sim.R("gpus:1;cpus:1;mem:100")
    sim.demand("jobA", Demand(shape, count=4, gang_id="A", gang_min=4))
    sim.demand("jobB", Demand(shape, count=4, gang_id="B", gang_min=4))
    out = sim.allocate()
    holders = {o.framework_id for o in sim.created(out) if o.resources.scalar("gpus") > 0}
    assert holders == {"jobA"}
    assert sum(o.resources.scalar("gpus") for o in sim.created(out)) == 4
    assert "gang B: insufficient resources" in sim.alloc.why_not_offered("jobB")
    assert sim.allocate() == []  # a quiet pass keeps the reason
    assert "gang B: insufficient resources" in sim.alloc.why_not_offered("jobB")
    # A declines its gang offers: B (next in the stable order) gets all of them, never halves
    for o in sim.offers("jobA"):
        sim.decline("jobA", o.offer_id, refuse=100)
    out = sim.allocate()
    gpu_holders = {o.framework_id for o in sim.alloc.outstanding_offers() if o.resources.scalar("gpus") > 0}
    assert gpu_holders == {"jobB"}


def test_gang_priority_then_age(sim):
    sim.agent("g1").cpus(4).mem(1000).gpus(2).add()
    sim.framework("old").gpu().add()
    sim.framework("new").gpu().add()
    shape = sim.R("gpus:1;cpus:1;mem:100")
    sim.demand("old", Demand(shape, count=2, gang_id="old", gang_min=2))
    sim.demand("new", Demand(shape, count=2, gang_id="new", gang_min=2, priority=5))
    out = sim.allocate()
    assert [o.framework_id for o in sim.created(out)] == ["new"]


def test_gang_minimum_met_partially_of_count(sim):
    sim.agent("g1").cpus(4).mem(1000).gpus(3).add()
    sim.framework("elastic").gpu().add()
    sim.demand("elastic", Demand(sim.R("gpus:1;cpus:1;mem:100"), count=5, gang_id="e", gang_min=2))
    out = sim.allocate()
    [offer] = sim.created(out)
    assert offer.resources.scalar("gpus") == 3  # 3 of 5 units (min 2 met)


def test_idle_part_rescinded_for_starving_role(sim):
    sim.agent("n1").cpus(4).mem(400).add()
    sim.framework("hog").role("a").reusable().add()
    offer = sim.created(sim.allocate())[0]
    sim.accept("hog", offer.offer_id, sim.launch("t1", "cpus:1;mem:100"))
    # a framework of another role arrives with demand; nothing is free
    sim.framework("needy").role("b").add()
    sim.demand("needy", Demand(sim.R("cpus:2;mem:200"), count=1))
    out = sim.allocate()
    summary = sim.summary(out)
    assert summary[0] == ("updated", "hog", "n1", "")  # the idle part of the lease is taken back
    assert ("created", "needy", "n1", "cpus:2; mem:200") in summary


def test_quota_of_parent_role_served_to_its_subroles(sim):
    sim.framework("big").role("other").add()
    sim.framework("ml").role("eng/ml").add()
    sim.handle(QuotaSet("eng", sim.R("cpus:2;mem:200")))
    for i in range(3):
        sim.agent(f"n{i}").cpus(1).mem(100).add()
    out = sim.allocate()
    got = [(o.framework_id, o.role) for o in sim.created(out)]
    assert got.count(("ml", "eng/ml")) == 2 and got.count(("big", "other")) == 1
    assert sim.alloc.quota_consumed("eng") == {"cpus": 2.0, "mem": 200.0}


def test_nested_guarantees_are_not_counted_twice_for_headroom(sim):
    # eng's guarantee covers eng/ml's: 10 cpus are held for the subtree, not 10 + 4
    sim.handle(QuotaSet("eng", sim.R("cpus:10;mem:1000")))
    sim.handle(QuotaSet("eng/ml", sim.R("cpus:4;mem:400")))
    sim.framework("web").role("web").add()
    sim.agent("n1").cpus(12).mem(1200).add()
    assert sim.summary(sim.allocate()) == [("created", "web", "n1", "cpus:2; mem:200")]


def test_sub_role_guarantees_beyond_the_parents_are_held(sim):
    # eng/a and eng/b need 6 between them, more than eng's own 4: 6 are held
    sim.handle(QuotaSet("eng", sim.R("cpus:4;mem:400")))
    sim.handle(QuotaSet("eng/a", sim.R("cpus:3;mem:300")))
    sim.handle(QuotaSet("eng/b", sim.R("cpus:3;mem:300")))
    sim.handle(QuotaSet("ops", sim.R("cpus:1;mem:100")))  # unrelated: adds
    sim.framework("web").role("web").add()
    sim.agent("n1").cpus(10).mem(1000).add()
    assert sim.summary(sim.allocate()) == [("created", "web", "n1", "cpus:3; mem:300")]
    assert sim.alloc.ledger.roles.unmet_guarantees() == {"cpus": 7.0, "mem": 700.0}
