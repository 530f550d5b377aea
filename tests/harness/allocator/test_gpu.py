"""Agents with GPUs are offered only to GPU_RESOURCES frameworks (Mesos semantics), in every
stage: quota, demand/gang, DRF (one role and many) and revocable."""

from __future__ import annotations

from master.allocator import AgentSlackEstimated, AgentUpdated, Demand, FrameworkAdded, QuotaSet
from master.allocator.eligibility import GPU_REASON

from .conftest import Sim


def _cluster(sim: Sim) -> None:
    sim.agent("gpu").cpus(4).mem(1000).gpus(2).add()
    sim.agent("cpu").cpus(4).mem(1000).add()


def _agents_of(sim: Sim, fid: str) -> set[str]:
    return {o.agent_id for o in sim.alloc.offers_of(fid)}


def test_plain_framework_gets_only_the_cpu_agent(sim: Sim) -> None:
    _cluster(sim)
    sim.framework("plain").add()
    out = sim.allocate()
    assert sim.summary(out) == [("created", "plain", "cpu", "cpus:4; mem:1000")]
    assert GPU_REASON in sim.alloc.why_not_offered("plain")
    # declining the CPU agent's offer does not make the GPU agent's resources reachable
    sim.decline("plain", [o.offer_id for o in sim.offers("plain")], refuse=1)
    for _ in range(3):
        sim.advance(2)
    assert _agents_of(sim, "plain") == {"cpu"}


def test_gpu_framework_gets_both_agents(sim: Sim) -> None:
    _cluster(sim)
    sim.framework("ml").gpu().add()
    out = sim.allocate()
    got = {o.agent_id: o.resources.scalar("gpus") for o in sim.created(out)}
    assert got == {"gpu": 2.0, "cpu": 0.0}


def test_gpu_agent_goes_to_the_gpu_framework_however_drf_orders_them(sim: Sim) -> None:
    _cluster(sim)
    sim.framework("plain").add()  # first in the sorter (older): would be picked on both agents
    sim.framework("ml").gpu().add()
    out = sim.allocate()
    assert sorted((o.framework_id, o.agent_id) for o in sim.created(out)) == [("ml", "gpu"), ("plain", "cpu")]


def test_many_roles_path_skips_the_pair_too(sim: Sim) -> None:
    _cluster(sim)
    sim.framework("web").role("web").add()
    sim.framework("ml").role("ml").gpu().add()
    out = sim.allocate()
    assert sorted((o.framework_id, o.agent_id) for o in sim.created(out)) == [("ml", "gpu"), ("web", "cpu")]


def test_gaining_the_capability_on_resubscribe_brings_gpu_offers(sim: Sim) -> None:
    _cluster(sim)
    sim.framework("f").add()
    sim.allocate()
    assert _agents_of(sim, "f") == {"cpu"}
    sim.handle(FrameworkAdded("f", ("*",), frozenset({"GPU_RESOURCES"})))
    out = sim.allocate()
    assert [(o.agent_id, o.resources.scalar("gpus")) for o in sim.created(out)] == [("gpu", 2.0)]
    assert _agents_of(sim, "f") == {"cpu", "gpu"}


def test_losing_the_capability_on_resubscribe_takes_gpu_offers_back(sim: Sim) -> None:
    _cluster(sim)
    sim.framework("f").gpu().reusable().add()
    sim.allocate()
    [lease] = [o for o in sim.offers("f") if o.agent_id == "gpu"]
    sim.accept("f", lease.offer_id, sim.launch("t1", "cpus:1;mem:100"))
    out = sim.handle(FrameworkAdded("f", ("*",), frozenset({"REUSABLE_OFFERS"})))
    # the lease keeps its running task but loses its idle part; nothing new comes from the agent
    assert [(o.agent_id, str(o.resources)) for o in sim.updated(out)] == [("gpu", "")]
    assert sim.allocate() == []
    assert sim.finish("f", "gpu", "t1") == []  # the task's resources do not flow back into it
    assert sim.allocate() == []
    assert _agents_of(sim, "f") == {"cpu", "gpu"}  # (the emptied lease and the CPU agent's)
    assert sim.offer_on("f", "gpu").resources == sim.R("")


def test_agent_gaining_gpus_takes_back_offers_of_plain_frameworks(sim: Sim) -> None:
    sim.agent("a").cpus(4).mem(1000).add()
    sim.framework("plain").add()
    sim.allocate()
    assert _agents_of(sim, "plain") == {"a"}
    out = sim.handle(AgentUpdated("a", sim.R("cpus:4;mem:1000;gpus:1")))
    assert len(sim.rescinded(out)) == 1
    assert sim.allocate() == []
    assert sim.offers("plain") == []


def test_quota_guarantee_is_not_met_from_gpu_agents_for_a_plain_framework(sim: Sim) -> None:
    sim.agent("gpu").cpus(4).mem(1000).gpus(1).add()
    sim.framework("q").role("q").add()
    sim.handle(QuotaSet("q", sim.R("cpus:2;mem:100")))
    assert sim.allocate() == []
    sim.agent("cpu").cpus(4).mem(1000).add()
    out = sim.allocate()
    # the guarantee first (shrunk to it), then the rest by DRF: all from the CPU agent
    assert sim.summary(out) == [
        ("created", "q", "cpu", "cpus:2; mem:100"),
        ("created", "q", "cpu", "cpus:2; mem:900"),
    ]


def test_demand_and_gang_skip_gpu_agents_for_a_plain_framework(sim: Sim) -> None:
    sim.agent("g1").cpus(4).mem(1000).gpus(1).add()
    sim.agent("g2").cpus(4).mem(1000).gpus(1).add()
    sim.framework("job").add()
    sim.demand("job", Demand(sim.R("cpus:1;mem:100"), count=2, gang_id="g", gang_min=2))
    assert sim.allocate() == []
    why = sim.alloc.why_not_offered("job")
    assert "gang g: insufficient resources (0 of 2" in why and "2 agent(s) skipped" in why and GPU_REASON in why
    sim.agent("c1").cpus(4).mem(1000).add()
    out = sim.allocate()
    assert [(o.agent_id, str(o.resources)) for o in sim.created(out)] == [("c1", "cpus:2; mem:200")]


def test_revocable_slack_of_a_gpu_agent_only_to_gpu_frameworks(sim: Sim) -> None:
    sim.agent("gpu").cpus(4).mem(1000).gpus(1).add()
    sim.framework("holder").gpu().reusable().add()
    sim.allocate()
    lease = sim.offer_on("holder", "gpu")
    sim.accept("holder", lease.offer_id, sim.launch("t1", "cpus:4;mem:1000;gpus:1"))
    sim.handle(AgentSlackEstimated("gpu", sim.R("cpus:2;mem:200")))
    sim.framework("be").revocable().add()
    assert sim.allocate() == []
    sim.framework("be2").revocable().gpu().add()
    out = sim.allocate()
    assert [(o.framework_id, str(o.revocable)) for o in sim.created(out)] == [("be2", "cpus{REV}:2; mem{REV}:200")]


def test_a_framework_only_gpu_agents_could_serve_is_named_as_excluded(sim: Sim) -> None:
    """Nothing waits in silence: with only a GPU agent, a framework without GPU_RESOURCES gets no
    offer and ``gpu_excluded`` names it (the master logs it); a GPU framework is never named, and
    once a CPU agent joins the plain framework gets its offer and is no longer named."""
    sim.agent("gpu").cpus(4).mem(1000).gpus(1).add()
    sim.framework("plain").add()
    sim.framework("ml").gpu().add()
    out = sim.allocate()
    assert sorted((o.framework_id, o.agent_id) for o in sim.created(out)) == [("ml", "gpu")]
    assert sim.alloc.gpu_excluded() == ["plain"]
    assert sim.alloc.why_not_offered("plain") == f"every agent is excluded: {GPU_REASON} (Mesos semantics)"
    sim.agent("cpu").cpus(2).mem(500).add()
    out = sim.allocate()
    assert [(o.framework_id, o.agent_id) for o in sim.created(out)] == [("plain", "cpu")]
    assert sim.alloc.gpu_excluded() == []


def test_no_gpu_agent_means_nobody_is_excluded(sim: Sim) -> None:
    sim.agent("cpu").cpus(1).mem(100).add()
    sim.framework("a").add()
    sim.framework("b").add()
    sim.allocate()
    assert sim.alloc.gpu_excluded() == []
