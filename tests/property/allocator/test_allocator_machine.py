"""Stateful property test: random event sequences against the allocator, with the ledger
invariants checked after every step.

Invariants: per agent, allocated + offered + free == total and nothing is allocated or offered
beyond the total; the revocable ledger matches the book and the tasks; quota consumption (role
allocation) counts regular resources only, so revocable never counts toward a guarantee; no offer
goes to a suppressed role or to an agent where a filter covers it; and every terminal path
returns resources (after finishing every task and declining every offer, all is free again).
"""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from master.allocator import (
    Accepted,
    AgentAdded,
    AgentDeactivated,
    AgentReactivated,
    AgentRemoved,
    AgentSlackEstimated,
    AgentUpdated,
    AllocationRecovered,
    Allocator,
    AllocatorConfig,
    AllocatorError,
    AttributeConstraint,
    Demand,
    DemandDeclared,
    FrameworkActivated,
    FrameworkAdded,
    FrameworkDeactivated,
    FrameworkRemoved,
    Launch,
    OfferCreated,
    OffersAccepted,
    OffersDeclined,
    OfferUpdated,
    Predicate,
    Pseudo,
    QuotaSet,
    Rejected,
    Reserve,
    ResourcesRecovered,
    Revived,
    Suppressed,
    Unreserve,
)
from master.allocator.constraints import RoleConstraints, agent_matches
from master.allocator.eligibility import excluded
from protocol.resources import Resources

ROLES = ["*", "a", "b", "a/x"]
EMPTY = Resources()


def _scal_eq(a: dict[str, float], b: dict[str, float]) -> bool:
    names = set(a) | set(b)
    return all(abs(a.get(n, 0.0) - b.get(n, 0.0)) < 1e-6 for n in names)


def _rack(role: str, rack: str | None) -> dict[str, RoleConstraints]:
    """Offer constraints for ``role``: agents of ``rack``, or without a rack on hosts h0-h4."""
    if rack is None:
        return {}
    return {role: (
        (AttributeConstraint.make(Predicate.TEXT_EQUALS, attribute="rack", text=rack),),
        (AttributeConstraint.make(Predicate.NOT_EXISTS, attribute="rack"),
         AttributeConstraint.make(Predicate.TEXT_MATCHES, pseudo=Pseudo.HOSTNAME, text="h[0-4]")),
    )}


class AllocatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.alloc = Allocator(AllocatorConfig(offer_id_prefix="p", offer_idle_timeout=20.0, offer_timeout=50.0))
        self.now = 0.0
        self.n_agents = 0
        self.n_fws = 0
        self.n_tasks = 0

    # --- helpers ----------------------------------------------------------------------

    @property
    def ledger(self):  # type: ignore[no-untyped-def]
        return self.alloc.ledger

    def _check_new_offers(self, decisions: list[object]) -> None:
        l_ = self.ledger
        for d in decisions:
            if isinstance(d, OfferCreated | OfferUpdated):
                o = d.offer
                fw = l_.frameworks[o.framework_id]
                if isinstance(d, OfferCreated):
                    assert o.role not in fw.suppressed, f"offer to suppressed role: {d}"
                    flt = l_.filters.of(o.framework_id, o.role)
                    f = flt.get(o.agent_id) if flt else None
                    if f is not None and o.resources.non_revocable():
                        assert not f.resources.contains(o.resources.non_revocable()), f"filtered offer: {d}"
                if o.revocable:
                    assert fw.revocable_ok, f"revocable offer to incapable framework: {d}"

    # --- agents -----------------------------------------------------------------------

    @rule(
        cpus=st.integers(1, 8),
        mem=st.integers(0, 4) .map(lambda m: m * 256),
        gpus=st.integers(0, 2),
        reserved=st.sampled_from([None, "a", "b"]),
    )
    def add_agent(self, cpus: int, mem: int, gpus: int, reserved: str | None) -> None:
        self.n_agents += 1
        text = f"cpus:{cpus};mem:{mem};gpus:{gpus};ports:[1000-1010]"
        if reserved:
            text += f";cpus({reserved}):2;mem({reserved}):128"
        rack = {"rack": f"r{self.n_agents % 3}"} if self.n_agents % 3 else {}
        self.alloc.handle(AgentAdded(f"a{self.n_agents}", f"h{self.n_agents}", Resources.parse(text), rack), self.now)

    @precondition(lambda self: bool(self.ledger.agents))
    @rule(data=st.data(), kind=st.sampled_from(["remove", "deactivate", "reactivate", "slack"]))
    def agent_event(self, data: st.DataObject, kind: str) -> None:
        agent_id = data.draw(st.sampled_from(sorted(self.ledger.agents)))
        if kind == "remove":
            out = self.alloc.handle(AgentRemoved(agent_id), self.now)
        elif kind == "deactivate":
            out = self.alloc.handle(AgentDeactivated(agent_id), self.now)
        elif kind == "reactivate":
            out = self.alloc.handle(AgentReactivated(agent_id), self.now)
        else:
            c = data.draw(st.integers(0, 3))
            out = self.alloc.handle(AgentSlackEstimated(agent_id, Resources.of(cpus=c, mem=64 * c)), self.now)
        self._check_new_offers(out)

    # --- frameworks -------------------------------------------------------------------

    @rule(
        roles=st.lists(st.sampled_from(ROLES), min_size=1, max_size=2, unique=True),
        reusable=st.booleans(),
        revocable=st.booleans(),
        gpu=st.booleans(),
        rack=st.sampled_from([None, None, "r1", "r2"]),
    )
    def add_framework(self, roles: list[str], reusable: bool, revocable: bool, gpu: bool, rack: str | None) -> None:
        self.n_fws += 1
        caps = set()
        if reusable:
            caps.add("REUSABLE_OFFERS")
        if revocable:
            caps.add("REVOCABLE_RESOURCES")
        if gpu:
            caps.add("GPU_RESOURCES")
        self.alloc.handle(
            FrameworkAdded(f"f{self.n_fws}", tuple(roles), frozenset(caps), offer_constraints=_rack(roles[0], rack)),
            self.now)

    @precondition(lambda self: bool(self.ledger.frameworks))
    @rule(
        data=st.data(),
        kind=st.sampled_from(
            ["remove", "deactivate", "activate", "suppress", "revive", "demand", "quota", "toggle_gpu", "constrain"]
        ),
    )
    def framework_event(self, data: st.DataObject, kind: str) -> None:
        l_ = self.ledger
        fid = data.draw(st.sampled_from(sorted(l_.frameworks)))
        fw = l_.frameworks[fid]
        if kind == "remove":
            out = self.alloc.handle(FrameworkRemoved(fid), self.now)
        elif kind == "deactivate":
            out = self.alloc.handle(FrameworkDeactivated(fid), self.now)
        elif kind == "activate":
            out = self.alloc.handle(FrameworkActivated(fid), self.now)
        elif kind == "suppress":
            out = self.alloc.handle(Suppressed(fid), self.now)
        elif kind == "revive":
            out = self.alloc.handle(Revived(fid), self.now)
        elif kind == "constrain":  # UPDATE_FRAMEWORK setting, changing or dropping offer constraints
            rack = data.draw(st.sampled_from([None, "r1", "r2"]))
            roles = fw.offer_roles or fw.roles
            out = self.alloc.handle(
                FrameworkAdded(fid, roles, fw.capabilities, fw.active, offer_constraints=_rack(roles[0], rack)),
                self.now)
        elif kind == "toggle_gpu":  # re-subscription gaining or losing GPU_RESOURCES
            caps = fw.capabilities ^ {"GPU_RESOURCES"}
            out = self.alloc.handle(
                FrameworkAdded(fid, fw.offer_roles or fw.roles, frozenset(caps), fw.active), self.now
            )
        elif kind == "demand":
            count = data.draw(st.integers(0, 4))
            gang = data.draw(st.booleans())
            shape = Resources.of(cpus=data.draw(st.integers(1, 2)), mem=64)
            demand = Demand(
                shape, count, gang_id="g" if gang else None, gang_min=count if gang else None,
                revocable_ok=data.draw(st.booleans()), priority=data.draw(st.integers(0, 2)),
            )
            if not fw.offer_roles:  # a placeholder from recovered allocations: refused, typed
                with pytest.raises(AllocatorError):
                    self.alloc.handle(DemandDeclared(fid, (demand,)), self.now)
                return
            out = self.alloc.handle(DemandDeclared(fid, (demand,) if count else ()), self.now)
        else:
            c = data.draw(st.integers(0, 4))
            limit = data.draw(st.sampled_from([None, 3, 6]))
            out = self.alloc.handle(
                QuotaSet(fw.roles[0] if fw.roles[0] != "*" else "b", Resources.of(cpus=c),
                         Resources.of(cpus=limit) if limit is not None else None),
                self.now,
            )
        self._check_new_offers(out)

    @precondition(lambda self: bool(self.ledger.offers))
    @rule(data=st.data(), extra=st.integers(0, 3))
    def gang_over_held_offers(self, data: st.DataObject, extra: int) -> None:
        """A framework holding offers declares a gang of up to ``extra`` units beyond what they
        hold: the held units count toward gang_min (the allocate rule checks the gang is never
        partial)."""
        oid = data.draw(st.sampled_from(sorted(self.ledger.offers)))
        o = self.ledger.offers[oid]
        fw = self.ledger.frameworks[o.framework_id]
        if not fw.offer_roles or o.role not in fw.offer_roles:
            return
        held = int(o.regular.scalars().get("cpus", 0.0) // 1)
        count = held + extra
        if count <= 0:
            return
        shape = Resources.of(cpus=1, mem=1)
        demand = Demand(shape, count, gang_id="h", gang_min=count, role=o.role)
        self.alloc.handle(DemandDeclared(fw.framework_id, (demand,)), self.now)

    # --- time and offers --------------------------------------------------------------

    @rule(dt=st.sampled_from([0.0, 0.001, 1.0, 5.0, 30.0]))
    def allocate(self, dt: float) -> None:
        self.now += dt
        demands = [d for fw in self.ledger.frameworks.values() for d in fw.demands]
        before = {id(d): d.in_offers for d in demands}
        out = self.alloc.allocate(self.now)
        self._check_new_offers(out)
        for d in demands:
            # a gang that has not started gets gang_min units at once or nothing
            if d.gang_id is not None and d.gang_min and d.launched == 0 and d.in_offers > before[id(d)]:
                assert d.in_offers >= d.gang_min, f"partial gang: {d.in_offers} of {d.gang_min}"

    @precondition(lambda self: bool(self.ledger.offers))
    @rule(data=st.data(), n_tasks=st.integers(0, 3), refuse=st.sampled_from([None, 0.0, 100.0]))
    def accept(self, data: st.DataObject, n_tasks: int, refuse: float | None) -> None:
        oid = data.draw(st.sampled_from(sorted(self.ledger.offers)))
        offer = self.alloc.offer(oid)
        assert offer is not None
        ops = []
        for _ in range(n_tasks):
            self.n_tasks += 1
            frac = data.draw(st.sampled_from([2, 3, 4]))
            cpus = offer.resources.non_revocable().scalar("cpus") / frac
            rev_cpus = offer.revocable.scalar("cpus") / frac
            res = Resources.of(cpus=round(cpus, 2))
            if rev_cpus > 0.01:
                res = res + Resources.of(cpus=round(rev_cpus, 2), revocable=True)
            if not offer.resources.non_revocable().contains(Resources.of(cpus=round(cpus, 2))):
                res = offer.resources  # reserved cpus: take the whole offer instead
            ops.append(Launch(f"t{self.n_tasks}", res, priority=data.draw(st.integers(0, 2))))
        wrong = data.draw(st.sampled_from([None, "dup", "other"]))
        ids: tuple[str, ...] = (oid,)
        fid = offer.framework_id
        if wrong == "dup":
            ids = (oid, oid)
        elif wrong == "other":
            fid = "nobody"
        result = self.alloc.accept(OffersAccepted(fid, ids, tuple(ops), refuse), self.now)
        if wrong is not None:
            assert isinstance(result, Rejected)
        assert isinstance(result, Accepted | Rejected)
        if isinstance(result, Accepted):
            # a replay of the same ACCEPT never launches twice
            replay = self.alloc.accept(OffersAccepted(fid, ids, tuple(ops), refuse), self.now)
            if ops:
                assert isinstance(replay, Rejected)

    @precondition(lambda self: bool(self.ledger.offers))
    @rule(data=st.data(), refuse=st.sampled_from([None, 0.0, 1000.0]))
    def decline(self, data: st.DataObject, refuse: float | None) -> None:
        oid = data.draw(st.sampled_from(sorted(self.ledger.offers)))
        o = self.ledger.offers[oid]
        self.alloc.handle(OffersDeclined(o.framework_id, (oid,), refuse), self.now)

    @precondition(lambda self: bool(self.ledger.tasks))
    @rule(data=st.data())
    def finish_task(self, data: st.DataObject) -> None:
        fid, tid = data.draw(st.sampled_from(sorted(self.ledger.tasks)))
        task = self.ledger.tasks[(fid, tid)]
        out = self.alloc.handle(ResourcesRecovered(fid, task.agent_id, tid), self.now)
        self._check_new_offers(out)

    @precondition(lambda self: bool(self.ledger.agents))
    @rule(data=st.data(), role=st.sampled_from(ROLES))
    def recover_allocation(self, data: st.DataObject, role: str) -> None:
        agent_id = data.draw(st.sampled_from(sorted(self.ledger.agents)))
        self.n_tasks += 1
        fid = data.draw(st.sampled_from([*sorted(self.ledger.frameworks), "ghost"]))
        self.alloc.handle(
            AllocationRecovered(fid, agent_id, f"r{self.n_tasks}", Resources.of(cpus=1, mem=64), role=role),
            self.now,
        )

    @precondition(lambda self: bool(self.ledger.offers))
    @rule(data=st.data(), unreserve=st.booleans())
    def reserve_or_unreserve(self, data: st.DataObject, unreserve: bool) -> None:
        oid = data.draw(st.sampled_from(sorted(self.ledger.offers)))
        offer = self.alloc.offer(oid)
        assert offer is not None
        if offer.role == "*":
            return
        if unreserve:
            res = offer.resources.reserved(offer.role).only("cpus")
            if not res:
                return
            op: Reserve | Unreserve = Unreserve(res)
        else:
            cpus = offer.resources.unreserved().non_revocable().scalar("cpus")
            if cpus < 1:
                return
            op = Reserve(Resources.of(cpus=1).reserve(offer.role, "p"))
        totals_before = sum(a.total.scalar("cpus") for a in self.ledger.agents.values())
        result = self.alloc.accept(OffersAccepted(offer.framework_id, (oid,), (op,), 0.0), self.now)
        assert isinstance(result, Accepted), result
        assert sum(a.total.scalar("cpus") for a in self.ledger.agents.values()) == totals_before

    @precondition(lambda self: bool(self.ledger.agents))
    @rule(data=st.data(), extra=st.integers(0, 4), gpus=st.integers(0, 1))
    def agent_updated(self, data: st.DataObject, extra: int, gpus: int) -> None:
        agent_id = data.draw(st.sampled_from(sorted(self.ledger.agents)))
        agent = self.ledger.agents[agent_id]
        # a new total that still holds what runs there (tasks cannot be un-allocated)
        total = agent.allocated + Resources.of(cpus=extra, mem=128 * extra, gpus=gpus)
        out = self.alloc.handle(AgentUpdated(agent_id, total), self.now)
        self._check_new_offers(out)

    @rule()
    def drain_everything(self) -> None:
        """Every terminal path returns resources: end all tasks, decline all offers."""
        l_ = self.ledger
        for fid, tid in list(l_.tasks):
            task = l_.tasks.get((fid, tid))
            if task is not None:
                self.alloc.handle(ResourcesRecovered(fid, task.agent_id, tid), self.now)
        for oid in list(l_.offers):
            o = l_.offers.get(oid)
            if o is not None:
                self.alloc.handle(OffersDeclined(o.framework_id, (oid,), 0.0), self.now)
        for agent in l_.agents.values():
            assert not agent.lent and not agent.rev_offered and not agent.rev_allocated
            assert agent.allocated == EMPTY
            assert agent.free == agent.total.non_revocable(), f"{agent.agent_id}: {agent.free} != {agent.total}"
        for node in l_.roles.nodes.values():
            assert _scal_eq(node.alloc, {}), f"role {node.name} still holds {node.alloc}"

    # --- invariants -------------------------------------------------------------------

    @invariant()
    def ledger_balances(self) -> None:
        l_ = self.ledger
        for agent in l_.agents.values():
            offered = Resources.sum(l_.offers[oid].regular for oid in agent.offers)
            total = agent.total.non_revocable()
            assert agent.allocated + offered + agent.free == total, (
                f"{agent.agent_id}: allocated {agent.allocated} + offered {offered} + free {agent.free} != {total}"
            )
            assert total.contains(agent.allocated + offered)
            tasks_regular = Resources.sum(l_.tasks[k].regular for k in agent.tasks)
            assert tasks_regular + agent.lent == agent.allocated
            rev_off = Resources.sum(l_.offers[oid].revocable for oid in agent.offers)
            assert rev_off == agent.rev_offered
            assert Resources.sum(l_.tasks[k].revocable for k in agent.tasks) == agent.rev_allocated
            for oid in agent.offers:
                assert l_.offers[oid].agent_id == agent.agent_id
                assert agent.active, "offer outstanding on an inactive agent"

    @invariant()
    def filter_index_counts(self) -> None:
        f = self.ledger.filters
        assert len(f) == sum(len(v) for v in f.by_key.values())
        assert all(f.by_key.values()), "empty (framework, role) map left in the index"
        # by_role holds the very same maps as by_key, nothing more
        assert {(fid, role): id(m) for role, of in f.by_role.items() for fid, m in of.items()} == {
            key: id(m) for key, m in f.by_key.items()
        }

    @invariant()
    def lenders_are_exact(self) -> None:
        l_ = self.ledger
        assert set(l_.lenders) == {a.agent_id for a in l_.agents.values() if a.lent}

    @invariant()
    def roles_count_regular_only(self) -> None:
        l_ = self.ledger
        expect: dict[str, dict[str, float]] = {}

        def add(role: str, r: Resources) -> None:
            from master.allocator.roles import ancestors

            for path in ancestors(role):
                acc = expect.setdefault(path, {})
                for n, v in r.scalars().items():
                    acc[n] = acc.get(n, 0.0) + v

        for t in l_.tasks.values():
            add(t.role, t.regular)
        for o in l_.offers.values():
            add(o.role, o.regular)
        for name, node in l_.roles.nodes.items():
            assert _scal_eq(node.alloc, expect.get(name, {})), f"role {name}: {node.alloc} != {expect.get(name)}"

    @invariant()
    def book_is_consistent(self) -> None:
        l_ = self.ledger
        for oid, o in l_.offers.items():
            fw = l_.frameworks[o.framework_id]
            assert oid in fw.offers
            assert not o.revocable or fw.revocable_ok
            # an agent with GPUs: only GPU_RESOURCES frameworks hold (non-empty) offers on it
            assert o.is_empty() or not l_.agents[o.agent_id].has_gpus or fw.gpu_ok, f"GPU agent offer {oid}"
            # offer constraints: nothing (idle) offered where they exclude the agent for the role
            assert o.is_empty() or not excluded(fw, o.role, o.agent_id), f"offer {oid} on an excluded agent"
            if not o.reusable:
                assert not o.is_empty(), f"empty classic offer {oid}"
        for fid in l_.constrained:  # the exclusions kept are what the constraints say now
            fw = l_.frameworks[fid]
            for role, groups in fw.constraints.items():
                want = {a.agent_id for a in l_.agents.values() if not agent_matches(groups, a.hostname, a.attributes)}
                assert fw.excluded[role] == want, (fid, role)


AllocatorMachine.TestCase.settings = settings(
    max_examples=50, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestAllocatorMachine = AllocatorMachine.TestCase
