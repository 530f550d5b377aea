"""Ports and GPUs beyond what the cluster holds: a pending reason that says so, never a hang."""

from __future__ import annotations

from frameworks.batch.planner import AgentCapacity, plan

from .builders import job, offer

AGENTS = (
    AgentCapacity("agent-a", {"cpus": 4.0, "mem": 4096.0, "gpus": 1.0}, ports=3),
    AgentCapacity("agent-b", {"cpus": 4.0, "mem": 4096.0}, ports=10),
)


def test_more_ports_than_any_offer_holds_waits_saying_so() -> None:
    b = job(1)
    b._spec["ports"] = 3
    p = plan([b.build()], [offer("a").cpus(4).mem(4096).ports((31000, 31001)).build()], now=0)
    assert p.placements == () and p.reasons == {1: "waiting for 3 ports; largest free offer has 2"}


def test_more_ports_than_any_agent_has_cannot_fit() -> None:
    b = job(1)
    b._spec["ports"] = 11
    p = plan([b.build()], [], now=0, capacity=AGENTS)
    assert p.reasons == {1: "cannot fit in the cluster: no agent has 11 ports (the most on one agent is 10)"}


def test_a_gangs_rank_0_needs_one_port_more() -> None:
    b = job(1).count(2).gang(2)
    b._spec["ports"] = 10
    two = (AGENTS[1], AgentCapacity("agent-c", {"cpus": 4.0, "mem": 4096.0}, ports=10))
    p = plan([b.build()], [], now=0, capacity=two)
    assert p.reasons == {
        1: "gang 0/2 placed; cannot fit in the cluster: rank 0 needs 11 ports (its PORTs and MASTER_PORT, "
        "the gang's rendezvous) and no agent offers that many"
    }
    # the offers it holds cannot host rank 0 either: it says what it waits for
    p = plan([job(1).count(2).gang(2).build()], [offer("a").cpus(4).mem(4096).ports().build()], now=0)
    assert p.reasons == {1: "gang 0/2 placed; waiting for 1 ports; largest free offer has 0"}


def test_more_gpus_than_any_agent_has_cannot_fit() -> None:
    p = plan([job(1).gpus(2).build()], [], now=0, capacity=AGENTS)
    assert p.reasons == {1: "cannot fit in the cluster: no agent has 2 gpus (the most on one agent is 1)"}
    p = plan([job(1).gpus(1).count(2).gang(2).build()], [], now=0, capacity=AGENTS)
    assert p.reasons == {
        1: "gang 0/2 placed; cannot fit in the cluster: 2 x cpus:1;gpus:1;mem:128 at once, its agents have room for 1"
    }


def test_a_fractional_gpu_is_refused_unless_an_agent_shares_gpus() -> None:
    from frameworks.batch.model import JobSpec
    from frameworks.batch.planner import gpu_sharing_error

    half = JobSpec(name="j", argv=("true",), gpus=0.5)
    assert gpu_sharing_error(half, AGENTS) == (
        "gpus: 0.5 is not a whole number; a task gets whole GPUs (the devices in its CUDA_VISIBLE_DEVICES) "
        "and no agent of the cluster shares them (one that does runs with --gpu-sharing and shows the "
        "attribute gpu_sharing)"
    )
    assert gpu_sharing_error(half, ()) is not None  # nothing known: refused
    sharing = (AgentCapacity("agent-s", {"cpus": 4.0, "gpus": 1.0}, {"gpu_sharing": "true"}),)
    assert gpu_sharing_error(half, sharing) is None
    assert gpu_sharing_error(JobSpec(name="j", argv=("true",), gpus=2), ()) is None
