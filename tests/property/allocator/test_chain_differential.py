"""Differential test: the compiled eligibility tests of the hot stages (``fast_paths``: the
one-role DRF loop, the general DRF loop's inlined tests, the quota stage's) and the eligibility
chain as written (``eligibility.why_not`` over ``DRF``/``QUOTA``; ``fast_paths=False``) decide
exactly alike.

Two allocators receive the same random events on generated clusters: nested roles with
weights, quota guarantees and limits, agents with rack attributes, GPUs and reservations,
frameworks in one or two roles with and without GPU_RESOURCES / REVOCABLE_RESOURCES /
REUSABLE_OFFERS, offer constraints and their own minimum (offer filters), standing demands and
gangs, usage slack, declines with filters, launches, finished tasks, suppression, deactivation.
After every step both must have made the same decisions (offers with their ids, resources and
reasons; rescinds; revocations) and hold the same book.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from master.allocator import (
    AgentAdded,
    AgentDeactivated,
    AgentReactivated,
    AgentSlackEstimated,
    Allocator,
    AllocatorConfig,
    Demand,
    DemandDeclared,
    FrameworkAdded,
    FrameworkDeactivated,
    Launch,
    OffersAccepted,
    OffersDeclined,
    QuotaSet,
    ResourcesRecovered,
    Revived,
    Suppressed,
    WeightSet,
)
from master.allocator.constraints import AttributeConstraint, Predicate
from master.allocator.eligibility import chain, regular_eligible, why_not
from master.allocator.sorter import AgeSorter, DRFSorter, SorterFactory
from protocol.resources import Resources

ROLES = ("a", "b", "a/x", "b/y")
CAPS = ("REUSABLE_OFFERS", "GPU_RESOURCES", "REVOCABLE_RESOURCES")


def _config(fast: bool, sorter: SorterFactory = DRFSorter) -> AllocatorConfig:
    return AllocatorConfig(offer_id_prefix="c", offer_idle_timeout=20.0, offer_timeout=50.0, fast_paths=fast,
                           role_sorter=sorter, framework_sorter=sorter)


class CompiledAndChain(RuleBasedStateMachine):
    sorter: SorterFactory = DRFSorter

    def __init__(self) -> None:
        super().__init__()
        self.fast = Allocator(_config(True, self.sorter))
        self.chain = Allocator(_config(False, self.sorter))
        self.now = 0.0
        self.n_agents = self.n_fws = self.n_tasks = 0

    def both(self, call: str, *args: Any) -> Any:
        a = getattr(self.fast, call)(*args)
        b = getattr(self.chain, call)(*args)
        assert a == b, f"{call}{args}:\ncompiled: {a}\nchain:    {b}"
        return a

    @property
    def ledger(self) -> Any:
        return self.fast.ledger

    @rule(cpus=st.integers(1, 8), mem=st.sampled_from([0, 64, 512]), gpus=st.integers(0, 1),
          reserved=st.sampled_from([None, *ROLES]), rack=st.sampled_from(["r1", "r2", None]))
    def add_agent(self, cpus: int, mem: int, gpus: int, reserved: str | None, rack: str | None) -> None:
        self.n_agents += 1
        text = f"cpus:{cpus};mem:{mem};gpus:{gpus}" + (f";cpus({reserved}):2;mem({reserved}):128" if reserved else "")
        attributes: dict[str, str | float] = {"rack": rack} if rack else {}
        self.both("handle", AgentAdded(f"a{self.n_agents}", f"h{self.n_agents}", Resources.parse(text), attributes),
                  self.now)

    @precondition(lambda self: bool(self.ledger.agents))
    @rule(data=st.data(), kind=st.sampled_from(["deactivate", "reactivate", "slack"]), cpus=st.integers(0, 3))
    def agent_event(self, data: st.DataObject, kind: str, cpus: int) -> None:
        aid = data.draw(st.sampled_from(sorted(self.ledger.agents)))
        if kind == "deactivate":
            self.both("handle", AgentDeactivated(aid), self.now)
        elif kind == "reactivate":
            self.both("handle", AgentReactivated(aid), self.now)
        else:
            self.both("handle", AgentSlackEstimated(aid, Resources.of(cpus=cpus)), self.now)

    @rule(roles=st.lists(st.sampled_from(ROLES), min_size=1, max_size=2, unique=True),
          caps=st.sets(st.sampled_from(CAPS)), rack=st.sampled_from([None, "r1", "r2"]),
          own_minimum=st.sampled_from([None, (), ({"cpus": 2.0},)]))
    def add_framework(self, roles: list[str], caps: set[str], rack: str | None,
                      own_minimum: tuple[dict[str, float], ...] | None) -> None:
        self.n_fws += 1
        constraints = {}
        if rack is not None:
            constraints[roles[0]] = ((AttributeConstraint.make(Predicate.TEXT_EQUALS, attribute="rack", text=rack),),)
        minimum = {roles[-1]: own_minimum} if own_minimum is not None else {}
        self.both("handle", FrameworkAdded(f"f{self.n_fws}", tuple(roles), frozenset(caps),
                                           offer_constraints=constraints, min_allocatable=minimum), self.now)

    @precondition(lambda self: bool(self.ledger.frameworks))
    @rule(data=st.data(), kind=st.sampled_from(["deactivate", "suppress", "revive"]))
    def framework_event(self, data: st.DataObject, kind: str) -> None:
        fid = data.draw(st.sampled_from(sorted(self.ledger.frameworks)))
        event = {"deactivate": FrameworkDeactivated, "suppress": Suppressed, "revive": Revived}[kind](fid)
        self.both("handle", event, self.now)

    @precondition(lambda self: bool(self.ledger.frameworks))
    @rule(data=st.data(), count=st.integers(0, 3), gang=st.booleans(), cpus=st.sampled_from([1, 2]),
          revocable_ok=st.booleans())
    def demand(self, data: st.DataObject, count: int, gang: bool, cpus: int, revocable_ok: bool) -> None:
        fid = data.draw(st.sampled_from(sorted(self.ledger.frameworks)))
        role = self.ledger.frameworks[fid].roles[0]
        demands = () if count == 0 else (
            Demand(Resources.of(cpus=cpus), count, "g" if gang else None, count if gang else None, revocable_ok,
                   role=role),)
        self.both("handle", DemandDeclared(fid, demands), self.now)

    @rule(role=st.sampled_from(ROLES), weight=st.sampled_from([0.5, 1.0, 3.0]))
    def weight(self, role: str, weight: float) -> None:
        self.both("handle", WeightSet(role, weight), self.now)

    @rule(role=st.sampled_from(ROLES), cpus=st.integers(0, 6), limit=st.sampled_from([None, 4, 10]))
    def quota(self, role: str, cpus: int, limit: int | None) -> None:
        guarantee = Resources.of(cpus=cpus) if cpus else Resources()
        cap = Resources.of(cpus=max(limit, cpus)) if limit is not None else None
        self.both("handle", QuotaSet(role, guarantee, cap), self.now)

    @rule(dt=st.sampled_from([0.0, 0.001, 1.0, 6.0, 30.0]))
    def allocate(self, dt: float) -> None:
        self.now += dt
        self.both("allocate", self.now)

    @precondition(lambda self: bool(self.ledger.offers))
    @rule(data=st.data(), n_tasks=st.integers(0, 2), refuse=st.sampled_from([None, 0.0, 100.0]))
    def accept(self, data: st.DataObject, n_tasks: int, refuse: float | None) -> None:
        oid = data.draw(st.sampled_from(sorted(self.ledger.offers)))
        offer = self.fast.offer(oid)
        assert offer is not None
        ops = []
        for _ in range(n_tasks):
            self.n_tasks += 1
            part = data.draw(st.sampled_from([1, 2, 4]))
            regular = offer.resources.unreserved().scalar("cpus") - offer.resources.revocable().scalar("cpus")
            res = Resources.of(cpus=round(regular / part, 2))
            ops.append(Launch(f"t{self.n_tasks}", res if res.scalar("cpus") > 0 else offer.resources))
        self.both("accept", OffersAccepted(offer.framework_id, (oid,), tuple(ops), refuse), self.now)

    @precondition(lambda self: bool(self.ledger.offers))
    @rule(data=st.data(), refuse=st.sampled_from([None, 0.0, 3.0, 1000.0]))
    def decline(self, data: st.DataObject, refuse: float | None) -> None:
        oid = data.draw(st.sampled_from(sorted(self.ledger.offers)))
        o = self.ledger.offers[oid]
        self.both("handle", OffersDeclined(o.framework_id, (oid,), refuse), self.now)

    @precondition(lambda self: bool(self.ledger.tasks))
    @rule(data=st.data())
    def finish_task(self, data: st.DataObject) -> None:
        fid, tid = data.draw(st.sampled_from(sorted(self.ledger.tasks)))
        task = self.ledger.tasks[(fid, tid)]
        self.both("handle", ResourcesRecovered(fid, task.agent_id, tid), self.now)

    @invariant()
    def same_book(self) -> None:
        for fid in self.ledger.frameworks:
            assert self.fast.offers_of(fid) == self.chain.offers_of(fid)
        assert {k: (v.free, v.lent) for k, v in self.fast.ledger.agents.items()} == {
            k: (v.free, v.lent) for k, v in self.chain.ledger.agents.items()
        }

    @invariant()
    def sorter_activity_is_the_chains_framework_part(self) -> None:
        """``regular_eligible`` (which puts a framework in its role's sorter: the compiled form the
        DRF and quota loops rely on) says what the chain's framework checks say."""
        ledger = self.fast.ledger
        if not ledger.agents:
            return
        agent = next(iter(ledger.agents.values()))
        part = chain("framework_active", "role_offered", "role_not_suppressed", "plain_drf")
        for fw in ledger.frameworks.values():
            for role in ROLES:
                assert regular_eligible(fw, role) == (why_not(part, ledger, fw, role, agent) is None)


CompiledAndChain.TestCase.settings = settings(
    max_examples=80, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestCompiledAndChain = CompiledAndChain.TestCase


class AgeOrderCompiledAndChain(CompiledAndChain):
    """The same under another sorter: the fast paths do not depend on DRF's order."""

    sorter = AgeSorter


AgeOrderCompiledAndChain.TestCase.settings = settings(
    max_examples=30, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestAgeOrderCompiledAndChain = AgeOrderCompiledAndChain.TestCase
