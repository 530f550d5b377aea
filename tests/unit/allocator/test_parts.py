"""Unit tests of the allocator's parts: sorter, role tree, filters, quantities, errors."""

from __future__ import annotations

import pytest

from master.allocator import (
    AgentAdded,
    AgentUpdated,
    Allocator,
    AllocatorConfig,
    AllocatorError,
    Demand,
    DemandDeclared,
    FrameworkAdded,
    OffersDeclined,
    RoleError,
    WeightSet,
)
from master.allocator.filters import FilterIndex
from master.allocator.quantities import meets_minimum, shrink, take, units_that_fit
from master.allocator.roles import RoleTree, ancestors, check_role
from master.allocator.sorter import DRFSorter, Totals
from protocol.resources import Resources

R = Resources.parse


class TestSorter:
    def test_orders_by_weighted_dominant_share_then_age(self) -> None:
        totals = Totals(excluded={"gpus"})
        totals.add({"cpus": 10.0, "mem": 100.0, "gpus": 4.0})
        s = DRFSorter(totals)
        for name in ("a", "b", "c"):
            s.add(name)
        assert s.sorted() == ["a", "b", "c"]
        s.update("a", {"cpus": 2.0})  # 0.2
        s.update("b", {"mem": 10.0})  # 0.1
        s.update("c", {"gpus": 4.0})  # excluded: 0
        assert s.sorted() == ["c", "b", "a"]
        s.set_weight("a", 4.0)  # 0.2 / 4 = 0.05
        assert s.sorted() == ["c", "a", "b"]

    def test_totals_change_resorts_lazily(self) -> None:
        totals = Totals()
        totals.add({"cpus": 10.0, "mem": 100.0})
        s = DRFSorter(totals)
        s.add("cpu_heavy")
        s.add("mem_heavy")
        s.update("cpu_heavy", {"cpus": 5.0})  # 0.5
        s.update("mem_heavy", {"mem": 40.0})  # 0.4
        assert s.sorted() == ["mem_heavy", "cpu_heavy"]
        totals.add({"cpus": 90.0})  # cpus now plentiful: cpu_heavy 0.05
        assert s.sorted() == ["cpu_heavy", "mem_heavy"]
        s.update("mem_heavy", {"mem": -40.0})
        assert s.sorted() == ["mem_heavy", "cpu_heavy"]

    def test_deactivated_clients_are_not_listed(self) -> None:
        totals = Totals()
        totals.add({"cpus": 1.0})
        s = DRFSorter(totals)
        s.add("a")
        s.add("b")
        s.deactivate("a")
        assert s.sorted() == ["b"]
        s.update("a", {"cpus": 0.5})
        s.activate("a")
        assert s.sorted() == ["b", "a"]
        s.remove("a")
        assert s.sorted() == ["b"] and "a" not in s

    def test_lone_client_then_second(self) -> None:
        totals = Totals()
        totals.add({"cpus": 10.0})
        s = DRFSorter(totals)
        s.add("a")
        s.update("a", {"cpus": 5.0})
        s.add("b")
        assert s.sorted() == ["b", "a"]
        assert s.share("a") == 0.5


class TestRoles:
    def test_role_names(self) -> None:
        assert check_role("eng/ml") == "eng/ml"
        assert ancestors("eng/ml/x") == ["eng", "eng/ml", "eng/ml/x"]
        for bad in ("", "/a", "a/", "a//b", "a/./b", "a b", ".."):
            with pytest.raises(RoleError):
                check_role(bad)

    def test_subtree_allocation_and_order(self) -> None:
        totals = Totals()
        totals.add({"cpus": 10.0})
        tree = RoleTree(totals)
        tree.add_framework("eng/ml", "f1")
        tree.add_framework("eng/web", "f2")
        tree.add_framework("ops", "f3")
        tree.update("eng/ml", "f1", {"cpus": 2.0})
        tree.update("eng/web", "f2", {"cpus": 1.0})
        assert tree.nodes["eng"].alloc == {"cpus": 3.0}
        assert [fid for _, fid in tree.iter_frameworks()] == ["f3", "f2", "f1"]
        tree.update("eng/ml", "f1", {"cpus": -2.0})
        assert next(fid for _, fid in tree.iter_frameworks()) == "f3"

    def test_framework_at_inner_role_counts_for_its_node(self) -> None:
        totals = Totals()
        totals.add({"cpus": 10.0})
        tree = RoleTree(totals)
        tree.add_framework("eng", "inner")
        tree.update("eng", "inner", {"cpus": 4.0})
        tree.add_framework("eng/ml", "leaf")  # first child role created after allocation
        tree.update("eng/ml", "leaf", {"cpus": 1.0})
        assert [fid for _, fid in tree.iter_frameworks()] == ["leaf", "inner"]
        assert tree.share("eng") == 0.5


class TestFilters:
    def test_expiry_clear_and_count(self) -> None:
        f = FilterIndex()
        f.add("f1", "*", "a1", R("cpus:1"), 10.0)
        f.add("f1", "*", "a2", R("cpus:1"), 20.0)
        f.add("f2", "*", "a1", R("cpus:1"), 5.0)
        assert f.agents_filtered("f1", "*") == 2
        assert f.filtered("f1", "*", "a1", R("cpus:0.5"))
        assert not f.filtered("f1", "*", "a1", R("cpus:2"))
        assert f.next_deadline() == 5.0
        assert f.expire(10.0) == [("f2", "*", "a1"), ("f1", "*", "a1")]
        assert f.next_deadline() == 20.0
        assert f.clear("f1") == ["a2"]
        assert f.next_deadline() is None and len(f) == 0

    def test_refilter_replaces_and_remove_agent(self) -> None:
        f = FilterIndex()
        f.add("f1", "*", "a1", R("cpus:1"), 10.0)
        f.add("f1", "*", "a1", R("cpus:2"), 30.0)
        assert f.expire(10.0) == []  # the older entry is stale
        assert f.expires_at("f1", "*", "a1") == 30.0
        f.remove_agent("a1")
        assert f.agents_filtered("f1", "*") == 0


class TestQuantities:
    def test_take_prefers_reserved(self) -> None:
        r = R("cpus:2;cpus(ml):1;mem:100")
        assert take(r, {"cpus": 2.0}) == R("cpus(ml):1;cpus:1")
        assert take(r, {"cpus": 10.0, "mem": 50.0}) == R("cpus(ml):1;cpus:2;mem:50")
        assert take(r, {}) == Resources()

    def test_shrink_and_units(self) -> None:
        r = R("cpus:4;mem:400;ports:[1-5]")
        assert shrink(r, {"cpus": 1.5}) == R("cpus:1.5;mem:400;ports:[1-5]")
        assert shrink(r, {"cpus": 10.0}) is r
        assert units_that_fit({"cpus": 4.0, "mem": 400.0}, {"cpus": 1.0, "mem": 150.0}, 10) == 2
        assert units_that_fit({"cpus": 4.0}, {"gpus": 1.0}, 10) == 0
        assert units_that_fit({"cpus": 0.3}, {"cpus": 0.1}, 10) == 3

    def test_minimum(self) -> None:
        alts = ({"cpus": 0.01}, {"mem": 32.0})
        assert meets_minimum({"cpus": 0.01}, alts)
        assert meets_minimum({"mem": 32.0}, alts)
        assert not meets_minimum({"disk": 100.0}, alts)
        assert meets_minimum({}, ())


class TestAllocatorErrors:
    def test_unknown_agent_and_framework_are_typed_errors(self) -> None:
        alloc = Allocator()
        with pytest.raises(AllocatorError):
            alloc.handle(AgentUpdated("nope", R("cpus:1")), 0.0)
        with pytest.raises(AllocatorError):
            alloc.handle(DemandDeclared("nope", ()), 0.0)
        with pytest.raises(RoleError):
            alloc.handle(FrameworkAdded("f", ("bad role",)), 0.0)
        with pytest.raises(AllocatorError):
            alloc.handle(WeightSet("r", 0.0), 0.0)
        alloc.handle(FrameworkAdded("f", ("r",)), 0.0)
        with pytest.raises(AllocatorError):
            alloc.handle(DemandDeclared("f", (Demand(R("cpus:1"), role="other"),)), 0.0)
        assert alloc.framework_ids() == ("f",)

    def test_decline_of_unknown_offer_is_ignored(self) -> None:
        alloc = Allocator()
        alloc.handle(FrameworkAdded("f", ("*",)), 0.0)
        assert alloc.handle(OffersDeclined("f", ("x",)), 0.0) == []
        assert alloc.handle(OffersDeclined("ghost", ("x",)), 0.0) == []


class TestDeadlines:
    def test_next_deadline_batch_window_then_sweep(self) -> None:
        cfg = AllocatorConfig(batch_window=0.01, sweep_interval=60.0)
        alloc = Allocator(cfg)
        assert alloc.next_deadline(0.0) == pytest.approx(0.01)  # first pass is due
        alloc.handle(AgentAdded("a", "h", R("cpus:1;mem:64")), 0.0)
        alloc.allocate(0.0)
        assert alloc.next_deadline(0.0) == 60.0
        alloc.handle(FrameworkAdded("f", ("*",)), 1.0)
        assert alloc.next_deadline(1.0) == pytest.approx(1.01)
        [offer] = [d.offer for d in alloc.allocate(1.0)]  # type: ignore[union-attr]
        alloc.handle(OffersDeclined("f", (offer.offer_id,), 3.0), 2.0)
        assert alloc.next_deadline(2.0) == pytest.approx(2.01)
        alloc.allocate(2.0)
        assert alloc.next_deadline(2.0) == 5.0  # the filter expires


def test_filter_heap_compacts_after_many_clears() -> None:
    f = FilterIndex()
    for i in range(3000):
        f.add("f1", "*", f"a{i % 10}", R("cpus:1"), 1e9 + i)
        if i % 10 == 9:
            f.clear("f1")
    assert len(f._heap) < 2100  # stale entries do not pile up forever
    assert f.next_deadline() is None
    f.add("f1", "*", "x", R("cpus:1"), 5.0)
    f.add("f1", "*", "x", R("cpus:2"), 6.0)
    f.add("f2", "*", "x", R("cpus:2"), 6.0)
    assert len(f) == 2
    f.remove_agent("x")
    assert len(f) == 0
