"""Reasons a docs writer found wrong on a real cluster: a gang that can never fit said only what it
waited for, the shape printed through rich lost its ``[...]``, and ``host_index=1.0`` matched no
agent showing ``host_index:1``."""

from __future__ import annotations

from frameworks.batch.planner import AgentCapacity, plan
from frameworks.batch.service import cluster_of
from frameworks.client.placement import Constraint, attribute_equals, attribute_text

from .builders import job, offer

TWO_ONE_CPU_AGENTS = (  # the cluster, as the master's /state shows it
    AgentCapacity("agent-a", {"cpus": 1.0, "mem": 1024.0}, ports=100),
    AgentCapacity("agent-b", {"cpus": 1.0, "mem": 1024.0}, ports=100),
)


def test_a_gang_bigger_than_the_agents_seen_says_it_cannot_fit() -> None:
    gang = job(1).cpus(1).count(4).gang(4)
    offers = [offer("a").cpus(1).mem(1024).build(), offer("b").cpus(1).mem(1024).build()]
    p = plan([gang.build()], offers, now=0, capacity=TWO_ONE_CPU_AGENTS)
    # It holds nothing (waiting for offers will not help): "0/4", not the 2 it could place.
    assert p.reasons[1] == (
        "gang 0/4 placed; cannot fit in the cluster: 4 x cpus:1;mem:128 at once, its agents have room for 2"
    )
    assert p.held_offers == frozenset() and p.holding_job is None
    # nothing held by the framework: the same, not "waiting for 4 x ... to be offered together"
    p = plan([gang.build()], [], now=0, capacity=TWO_ONE_CPU_AGENTS)
    assert p.reasons[1].startswith("gang 0/4 placed; cannot fit in the cluster: 4 x cpus:1;mem:128")


def test_a_gang_that_fits_the_agents_seen_waits_and_names_its_shape_without_brackets() -> None:
    caps = (*TWO_ONE_CPU_AGENTS, AgentCapacity("agent-c", {"cpus": 2.0, "mem": 1024.0}, ports=100))
    p = plan([job(1).cpus(1).count(4).gang(4).build()], [], now=0, capacity=caps)
    # (rich took "[cpus:1;mem:128]" for markup: "waiting for 4 x  to be offered together")
    assert p.reasons[1] == "gang 0/4 placed; waiting for 4 x cpus:1;mem:128 to be offered together"


def test_a_task_bigger_than_every_agent_seen_says_so_and_revocable_counts_for_preemptible_jobs() -> None:
    caps = (AgentCapacity("agent-a", {"cpus": 2.0, "mem": 1024.0}, revocable={"cpus": 2.0}),)
    p = plan([job(1).cpus(3).build()], [], now=0, capacity=caps)
    assert p.reasons[1] == "cannot fit in the cluster: no agent has 3 cpus (the most on one agent is 2)"
    p = plan([job(1).cpus(3).preemptible().build()], [], now=0, capacity=caps)
    assert p.reasons[1] == "no offers for queue '*'"
    p = plan([job(1).constraint("rack", "r9").build()], [], now=0, capacity=caps)
    assert p.reasons[1] == "cannot fit in the cluster: no agent matches rack=r9"


def test_the_cluster_is_read_from_the_masters_state() -> None:
    state = {
        "slaves": [
            {"id": "a", "active": True, "resources": {"cpus": 2.0, "mem": 1024.0, "ports": "[31000-32000]"},
             "attributes": {"host_index": 0.0, "rack": "r1", "serial": 1234567.0},
             "revocable_resources": {"cpus": 2.0}},
            {"id": "gone", "active": False, "resources": {"cpus": 8.0}},
            {"id": "drained", "active": True, "draining": True, "resources": {"cpus": 8.0}},
        ]
    }
    assert cluster_of(state) == (
        AgentCapacity("a", {"cpus": 2.0, "mem": 1024.0}, {"host_index": "0", "rack": "r1", "serial": "1234567"},
                      {"cpus": 2.0}, ports=1001),
    )
    assert cluster_of({}) == () and cluster_of(None) == ()


def test_numeric_constraints_compare_numbers_and_attributes_show_as_typed() -> None:
    one = offer("a").cpus(1).mem(1024).attr("host_index", "1").build()
    for want, placed in (("1", True), ("1.0", True), ("01", True), ("2", False)):
        p = plan([job(1).constraint("host_index", want).build()], [one], now=0)
        assert bool(p.placements) is placed, want
    assert attribute_equals(1.0, "1.0") and attribute_equals("1", "1.0") and not attribute_equals("r1", "1")
    assert attribute_equals("r1", "r1") and not attribute_equals(None, "1")
    assert Constraint.parse("host_index==1.0").check({"host_index": 1.0})
    assert attribute_text(0.0) == "0" and attribute_text(1.0) == "1" and attribute_text(0.5) == "0.5"
    assert attribute_text("r1") == "r1"


def test_agents_show_scalar_attributes_as_users_typed_them() -> None:
    from frameworks.cli.cluster import attributes_text
    from master.webui.pages import _attributes_text

    attrs = {"host_index": 0.0, "rack": "r1", "weight": 0.5}
    assert attributes_text(attrs) == "host_index:0;rack:r1;weight:0.5"  # agora agents / agent show
    assert _attributes_text(attrs) == "host_index:0; rack:r1; weight:0.5"  # the web UI
