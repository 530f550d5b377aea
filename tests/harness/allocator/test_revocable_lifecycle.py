"""Revocable pools, revocation with grace, agent/framework lifecycle, recovery."""

from __future__ import annotations

from master.allocator import (
    Accepted,
    AgentDeactivated,
    AgentReactivated,
    AgentRemoved,
    AgentSlackEstimated,
    AllocationRecovered,
    Demand,
    FrameworkDeactivated,
    FrameworkRemoved,
    Revoke,
)


def test_usage_slack_offered_revocable_only_to_capable(sim):
    sim.agent("n1").cpus(4).mem(400).add()
    sim.framework("plain").add()
    o = sim.created(sim.allocate())[0]
    sim.accept("plain", o.offer_id, sim.launch("t1", "cpus:4;mem:400"))
    sim.handle(AgentSlackEstimated("n1", sim.R("cpus:2;mem:100")))
    assert sim.allocate() == []  # nobody may take revocable resources
    sim.framework("be").revocable().add()
    out = sim.allocate()
    [offer] = sim.created(out)
    assert offer.framework_id == "be"
    assert offer.revocable == sim.R("cpus:2;mem:100").as_revocable()
    assert offer.resources == offer.revocable


def test_estimate_shrink_rescinds_offers_then_revokes(sim):
    sim.agent("n1").cpus(4).mem(400).add()
    sim.framework("plain").add()
    o = sim.created(sim.allocate())[0]
    sim.accept("plain", o.offer_id, sim.launch("t1", "cpus:4;mem:400"))
    sim.framework("be").revocable().add()
    sim.handle(AgentSlackEstimated("n1", sim.R("cpus:3;mem:300")))
    offer = sim.created(sim.allocate())[0]
    rev = sim.R("cpus:1;mem:100").as_revocable()
    res = sim.accept("be", offer.offer_id, sim.launch("r1", str(rev), priority=1), sim.launch("r2", str(rev)))
    assert isinstance(res, Accepted)
    # remainder (1 cpu) goes back; now the estimate shrinks to 1 cpu
    out = sim.handle(AgentSlackEstimated("n1", sim.R("cpus:1;mem:100")))
    revokes = [d for d in out if isinstance(d, Revoke)]
    assert len(revokes) == 1
    assert revokes[0].task_ids == ("r2",)  # lowest priority first, one task is enough
    assert revokes[0].grace_seconds == sim.alloc.config.revocation_grace_seconds
    sim.finish("be", "n1", "r2")
    assert sim.alloc.agent_view("n1").revocable_allocated == sim.R("cpus:1;mem:100")


def test_reserved_idle_lent_as_revocable_and_reclaimed_by_owner(sim):
    sim.agent("n1").cpus(1).mem(100).reserved("ml", "cpus:4;mem:400").add()
    sim.framework("ml").role("ml").add()
    sim.framework("be").role("web").revocable().add()
    out = sim.allocate()
    ml_offer = next(o for o in sim.created(out) if o.framework_id == "ml")
    sim.decline("ml", ml_offer.offer_id, refuse=100)  # ml is not using its reservation
    out = sim.allocate()
    [rev] = [o for o in sim.created(out) if o.framework_id == "be" and o.revocable]
    assert rev.revocable == sim.R("cpus:4;mem:400").as_revocable()
    res = sim.accept("be", rev.offer_id, sim.launch("r1", "cpus{REV}:4;mem{REV}:400"))
    assert isinstance(res, Accepted)
    view = sim.alloc.agent_view("n1")
    assert view.lent == sim.R("cpus(ml):4;mem(ml):400")
    # lent resources never count toward ml's share or quota
    assert sim.alloc.quota_consumed("ml") == {}
    # the owner wants them back (REVIVE): revoke with grace, then offer to the owner
    from master.allocator import Revived

    sim.handle(Revived("ml"))
    out = sim.allocate()
    revokes = [d for d in out if isinstance(d, Revoke)]
    assert [(r.framework_id, r.task_ids) for r in revokes] == [("be", ("r1",))]
    assert "reclaims" in revokes[0].reason
    sim.finish("be", "n1", "r1")
    out = sim.allocate()
    assert ("created", "ml", "n1", "cpus(ml):4; mem(ml):400") in sim.summary(out)


def test_revocable_demand_framework(sim):
    sim.agent("n1").cpus(2).mem(200).add()
    sim.framework("plain").add()
    o = sim.created(sim.allocate())[0]
    sim.accept("plain", o.offer_id, sim.launch("t1", "cpus:2;mem:200"))
    sim.handle(AgentSlackEstimated("n1", sim.R("cpus:3;mem:300")))
    sim.framework("elastic").revocable().add()
    sim.demand("elastic", Demand(sim.R("cpus:1;mem:100"), count=2, revocable_ok=True))
    out = sim.allocate()
    [offer] = sim.created(out)
    assert offer.framework_id == "elastic"
    assert offer.resources == sim.R("cpus:2;mem:200").as_revocable()  # shaped: 2 units
    assert sim.allocate() == []  # the demand is covered


def test_agent_deactivated_rescinds_and_reactivated_reoffers(sim):
    sim.agent("n1").cpus(2).mem(200).add()
    sim.framework("f").add()
    o = sim.created(sim.allocate())[0]
    out = sim.handle(AgentDeactivated("n1"))
    assert sim.rescinded(out) == [o.offer_id]
    assert sim.allocate() == []
    sim.handle(AgentReactivated("n1"))
    assert len(sim.created(sim.allocate())) == 1


def test_agent_removed_forgets_allocations(sim):
    sim.agent("n1").cpus(2).mem(200).add()
    sim.framework("f").add()
    o = sim.created(sim.allocate())[0]
    sim.accept("f", o.offer_id, sim.launch("t1", "cpus:1;mem:100"))
    sim.handle(AgentRemoved("n1"))
    assert sim.alloc.tasks() == ()
    assert sim.alloc.cluster_total() == {"cpus": 0.0, "mem": 0.0}
    assert sim.alloc.framework_view("f").allocated == sim.R("")


def test_framework_deactivated_and_removed(sim):
    sim.agent("n1").cpus(2).mem(200).add()
    sim.framework("f").add()
    o = sim.created(sim.allocate())[0]
    out = sim.handle(FrameworkDeactivated("f"))
    assert sim.rescinded(out) == [o.offer_id]
    assert sim.allocate() == []
    sim.handle(FrameworkRemoved("f"))
    assert sim.alloc.agent_view("n1").free == sim.R("cpus:2;mem:200")


def test_allocations_recovered_after_master_restart(sim):
    sim.agent("n1").cpus(4).mem(400).add()
    sim.handle(AllocationRecovered("f", "n1", "t1", sim.R("cpus:3;mem:300"), role="ml"))
    view = sim.alloc.agent_view("n1")
    assert view.allocated == sim.R("cpus:3;mem:300")
    assert sim.alloc.role_shares()["ml"] == 0.75
    # the framework re-subscribes and gets only what is free
    sim.framework("f").role("ml").add()
    assert sim.summary(sim.allocate()) == [("created", "f", "n1", "cpus:1; mem:100")]
    # a finished recovered task returns its resources
    sim.finish("f", "n1", "t1")
    assert sim.alloc.agent_view("n1").allocated == sim.R("")


def test_owner_demand_reclaims_lent_reservation(sim):
    sim.agent("n1").reserved("ml", "cpus:4;mem:400").add()
    sim.framework("ml").role("ml").add()
    # a REQUEST framework waiting for something this agent lacks: its reservation lies idle
    sim.demand("ml", Demand(sim.R("gpus:1"), count=1))
    sim.framework("be").role("web").revocable().add()
    out = sim.allocate()
    [rev] = [o for o in sim.created(out) if o.revocable]
    res = sim.accept("be", rev.offer_id, sim.launch("r1", "cpus{REV}:2;mem{REV}:200"))
    assert isinstance(res, Accepted)
    assert sim.allocate() == []
    sim.demand("ml", Demand(sim.R("cpus:3;mem:300"), count=1))
    out = sim.allocate()
    revokes = [d for d in out if isinstance(d, Revoke)]
    assert [(r.framework_id, r.task_ids) for r in revokes] == [("be", ("r1",))]
    sim.finish("be", "n1", "r1")
    out = sim.allocate()
    assert sim.summary(out) == [("created", "ml", "n1", "cpus(ml):3; mem(ml):300")]


# --- a finished revocable task's resources flow back into its lease ---------------------------


def _revocable_lease(sim, slack: str):
    """n1 fully used by a plain task, usage slack ``slack``, and a reusable revocable framework
    "be" holding a lease of all of it."""
    sim.agent("n1").cpus(4).mem(400).add()
    sim.framework("plain").add()
    o = sim.created(sim.allocate())[0]
    sim.accept("plain", o.offer_id, sim.launch("t1", "cpus:4;mem:400"))
    sim.handle(AgentSlackEstimated("n1", sim.R(slack)))
    sim.framework("be").reusable().revocable().add()
    [lease] = sim.created(sim.allocate())
    assert lease.framework_id == "be" and lease.reusable and lease.revocable == sim.R(slack).as_revocable()
    return lease


def test_finished_revocable_task_flows_back_into_its_lease(sim):
    lease = _revocable_lease(sim, "cpus:2;mem:200")
    res = sim.accept("be", lease.offer_id, sim.launch("r1", "cpus{REV}:1;mem{REV}:100"))
    assert isinstance(res, Accepted)
    assert sim.offer_on("be", "n1").revocable == sim.R("cpus:1;mem:100").as_revocable()
    out = sim.finish("be", "n1", "r1")
    [back] = sim.updated(out)
    assert back.offer_id == lease.offer_id
    assert back.revocable == sim.R("cpus:2;mem:200").as_revocable()
    assert back.resources == back.revocable
    view = sim.alloc.agent_view("n1")
    assert view.revocable_offered == sim.R("cpus:2;mem:200") and view.revocable_allocated == sim.R("")


def test_revoked_task_does_not_flow_back(sim):
    lease = _revocable_lease(sim, "cpus:2;mem:200")
    sim.accept("be", lease.offer_id, sim.launch("r1", "cpus{REV}:2;mem{REV}:200"))
    out = sim.handle(AgentSlackEstimated("n1", sim.R("cpus:1;mem:100")))
    assert [(d.framework_id, d.task_ids) for d in out if isinstance(d, Revoke)] == [("be", ("r1",))]
    assert sim.updated(sim.finish("be", "n1", "r1")) == []
    assert sim.alloc.agent_view("n1").revocable_offered == sim.R("")


def test_only_what_is_still_backed_flows_back(sim):
    lease = _revocable_lease(sim, "cpus:2;mem:200")
    rev = "cpus{REV}:1;mem{REV}:100"
    sim.accept("be", lease.offer_id, sim.launch("r1", rev, priority=1), sim.launch("r2", rev))
    out = sim.handle(AgentSlackEstimated("n1", sim.R("cpus:1.5;mem:150")))
    assert [d.task_ids for d in out if isinstance(d, Revoke)] == [("r2",)]
    # r2 still holds 1 cpu until it ends: only 0.5 cpu / 50 MB of r1's go back
    [back] = sim.updated(sim.finish("be", "n1", "r1"))
    assert back.revocable == sim.R("cpus:0.5;mem:50").as_revocable()
    assert sim.updated(sim.finish("be", "n1", "r2")) == []
    view = sim.alloc.agent_view("n1")
    assert view.revocable_offered == sim.R("cpus:0.5;mem:50") and view.revocable_allocated == sim.R("")


def test_lent_resources_flow_back_unless_the_owner_wants_them(sim):
    sim.agent("n1").cpus(1).mem(100).reserved("ml", "cpus:4;mem:400").add()
    sim.framework("ml").role("ml").add()
    sim.framework("be").role("web").reusable().revocable().add()
    out = sim.allocate()
    ml_offer = next(o for o in sim.created(out) if o.framework_id == "ml")
    sim.decline("ml", ml_offer.offer_id, refuse=100)  # ml is not using its reservation
    out = sim.allocate()
    [lease] = [o for o in sim.created(out) + sim.updated(out) if o.framework_id == "be" and o.revocable]
    assert lease.revocable == sim.R("cpus:4;mem:400").as_revocable()
    sim.accept("be", lease.offer_id, sim.launch("r1", "cpus{REV}:1;mem{REV}:100"))
    [back] = sim.updated(sim.finish("be", "n1", "r1"))  # nobody wants them: lent again
    assert back.revocable == sim.R("cpus:4;mem:400").as_revocable()
    assert sim.alloc.agent_view("n1").lent == sim.R("cpus(ml):4;mem(ml):400")
    sim.accept("be", lease.offer_id, sim.launch("r2", "cpus{REV}:1;mem{REV}:100"))
    from master.allocator import Revived

    sim.handle(Revived("ml"))  # now the owner wants its reservation
    out = sim.finish("be", "n1", "r2")
    assert out == []  # nothing flows back into the lease: the owner wants it
    held = sim.alloc.offer(lease.offer_id)
    assert held is not None and held.revocable == sim.R("cpus:3;mem:300").as_revocable()
    view = sim.alloc.agent_view("n1")
    assert view.lent == sim.R("cpus(ml):3;mem(ml):300")  # r2's part went back to ml's free pool
    assert view.revocable_allocated == sim.R("")


def test_revocable_demand_takes_what_the_slack_lacks_from_free_regular_resources(sim):
    """The estimator reports cpus only (``--oversubscribed cpus:2``); a preemptible 1-cpu task
    also needs mem. With the regular cpus all in use by the framework's own lease, its revocable
    demand is offered the 2 revocable cpus plus the mem from the agent's free pool (before, no
    offer at all: the job waited 'all held resources in use' while 2 revocable cpus sat idle)."""
    sim.agent("n1").cpus(2).mem(1024).add()
    sim.framework("batch").reusable().revocable().add()
    sim.demand("batch", Demand(sim.R("cpus:1;mem:128"), count=2))
    lease = sim.created(sim.allocate())[0]
    sim.accept("batch", lease.offer_id, sim.launch("a", "cpus:1;mem:128"), sim.launch("b", "cpus:1;mem:128"))
    sim.handle(AgentSlackEstimated("n1", sim.R("cpus:2")))
    sim.demand("batch", Demand(sim.R("cpus:1;mem:128"), count=2, revocable_ok=True))
    sim.allocate()
    offer = sim.offer_on("batch", "n1")
    assert offer.revocable == sim.R("cpus:2").as_revocable()
    assert offer.resources == sim.R("mem:256") + offer.revocable
    assert sim.allocate() == []  # the demand is covered
