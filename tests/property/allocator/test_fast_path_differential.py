"""Differential test: the one-role DRF fast path (``passes._regular_one_role``) and the general
loop decide exactly alike.

Two allocators, one with ``fast_paths`` and one without, receive the same random events on
generated clusters of one role (the shape the fast path serves): agents with and without GPUs
and reservations for the role, reusable and classic frameworks with and without GPU_RESOURCES,
launches, declines with filters, finished tasks, suppression and removal. After every step both
must have produced the same decisions (offers, their ids, resources and reasons) and hold the same
offer book.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from master.allocator import (
    AgentAdded,
    AgentRemoved,
    Allocator,
    AllocatorConfig,
    FrameworkAdded,
    FrameworkDeactivated,
    FrameworkRemoved,
    Launch,
    OffersAccepted,
    OffersDeclined,
    ResourcesRecovered,
    Revived,
    Suppressed,
)
from protocol.resources import Resources

ROLE = "ml"


class FastAndGeneral(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        cfg = AllocatorConfig(offer_id_prefix="d", offer_idle_timeout=20.0, offer_timeout=50.0)
        self.fast = Allocator(cfg)
        self.general = Allocator(AllocatorConfig(offer_id_prefix="d", offer_idle_timeout=20.0, offer_timeout=50.0,
                                                 fast_paths=False))
        self.now = 0.0
        self.n_agents = self.n_fws = self.n_tasks = 0
        self.fast_runs = 0  # passes where the fast path made an offer

    def both(self, call: str, *args: Any) -> Any:
        a = getattr(self.fast, call)(*args)
        b = getattr(self.general, call)(*args)
        assert a == b, f"{call}{args}:\nfast:    {a}\ngeneral: {b}"
        return a

    @property
    def ledger(self) -> Any:
        return self.fast.ledger

    @rule(cpus=st.integers(1, 8), mem=st.sampled_from([0, 64, 512]), gpus=st.integers(0, 1), reserved=st.booleans())
    def add_agent(self, cpus: int, mem: int, gpus: int, reserved: bool) -> None:
        self.n_agents += 1
        text = f"cpus:{cpus};mem:{mem};gpus:{gpus}" + (f";cpus({ROLE}):2;mem({ROLE}):128" if reserved else "")
        self.both("handle", AgentAdded(f"a{self.n_agents}", f"h{self.n_agents}", Resources.parse(text)), self.now)

    @precondition(lambda self: bool(self.ledger.agents))
    @rule(data=st.data())
    def remove_agent(self, data: st.DataObject) -> None:
        aid = data.draw(st.sampled_from(sorted(self.ledger.agents)))
        self.both("handle", AgentRemoved(aid), self.now)

    @rule(reusable=st.booleans(), gpu=st.booleans())
    def add_framework(self, reusable: bool, gpu: bool) -> None:
        self.n_fws += 1
        caps = {c for c, on in (("REUSABLE_OFFERS", reusable), ("GPU_RESOURCES", gpu)) if on}
        self.both("handle", FrameworkAdded(f"f{self.n_fws}", (ROLE,), frozenset(caps)), self.now)

    @precondition(lambda self: bool(self.ledger.frameworks))
    @rule(data=st.data(), kind=st.sampled_from(["remove", "deactivate", "suppress", "revive"]))
    def framework_event(self, data: st.DataObject, kind: str) -> None:
        fid = data.draw(st.sampled_from(sorted(self.ledger.frameworks)))
        event = {"remove": FrameworkRemoved, "deactivate": FrameworkDeactivated, "suppress": Suppressed,
                 "revive": Revived}[kind](fid)
        self.both("handle", event, self.now)

    @rule(dt=st.sampled_from([0.0, 0.001, 1.0, 6.0, 30.0]))
    def allocate(self, dt: float) -> None:
        self.now += dt
        if self.both("allocate", self.now):
            self.fast_runs += 1

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
            res = Resources.of(cpus=round(offer.resources.unreserved().scalar("cpus") / part, 2))
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
            assert self.fast.offers_of(fid) == self.general.offers_of(fid)
        assert {k: v.free for k, v in self.fast.ledger.agents.items()} == {
            k: v.free for k, v in self.general.ledger.agents.items()
        }


FastAndGeneral.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestFastAndGeneral = FastAndGeneral.TestCase


def test_the_fast_path_is_the_one_taken_for_one_role(monkeypatch: pytest.MonkeyPatch) -> None:
    """The differential test compares two different loops: with one role and no quota the fast
    allocator runs ``_regular_one_role`` and the other does not."""
    import master.allocator.passes as passes

    calls: list[str] = []
    original = passes._regular_one_role

    def spy(*args: Any) -> None:
        calls.append("fast")
        original(*args)

    monkeypatch.setattr(passes, "_regular_one_role", spy)
    for fast in (True, False):
        alloc = Allocator(AllocatorConfig(fast_paths=fast))
        alloc.handle(AgentAdded("a1", "h1", Resources.parse("cpus:4;mem:256")), 0.0)
        alloc.handle(FrameworkAdded("f1", (ROLE,), frozenset({"REUSABLE_OFFERS"})), 0.0)
        (made,) = alloc.allocate(0.0)
        assert made.offer.resources == Resources.parse("cpus:4;mem:256")
    assert calls == ["fast"]
