"""The incremental DRF sorter always agrees with a from-scratch sort."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings

from master.allocator.sorter import DRFSorter, Totals

NAMES = ["c0", "c1", "c2", "c3", "c4"]
op = st.one_of(
    st.tuples(st.just("update"), st.sampled_from(NAMES), st.sampled_from(["cpus", "mem", "gpus"]),
              st.integers(1, 50), st.sampled_from([1.0, -1.0])),
    st.tuples(st.just("total"), st.sampled_from(["cpus", "mem"]), st.integers(1, 100)),
    st.tuples(st.just("weight"), st.sampled_from(NAMES), st.sampled_from([0.5, 1.0, 3.0])),
    st.tuples(st.just("toggle"), st.sampled_from(NAMES)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(op, max_size=40))
def test_incremental_order_matches_full_sort(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    totals = Totals(excluded={"gpus"})
    totals.add({"cpus": 100.0, "mem": 1000.0})
    sorter = DRFSorter(totals)
    alloc: dict[str, dict[str, float]] = {}
    weight: dict[str, float] = {}
    active: dict[str, bool] = {}
    for name in NAMES:
        sorter.add(name)
        alloc[name], weight[name], active[name] = {}, 1.0, True
    for o in ops:
        if o[0] == "update":
            _, name, res, amount, sign = o
            have = alloc[name].get(res, 0.0)
            if sign < 0:
                amount = min(amount, have)
            if amount == 0:
                continue
            alloc[name][res] = have + sign * amount
            sorter.update(name, {res: float(amount)}, sign)
        elif o[0] == "total":
            totals.add({o[1]: float(o[2])})
        elif o[0] == "weight":
            weight[o[1]] = o[2]
            sorter.set_weight(o[1], o[2])
        else:
            name = o[1]
            active[name] = not active[name]
            (sorter.activate if active[name] else sorter.deactivate)(name)

    def share(name: str) -> float:
        best = 0.0
        for res, value in alloc[name].items():
            if res != "gpus" and value > 1e-9 and totals.values.get(res, 0.0) > 0:
                best = max(best, value / totals.values[res])
        return best / weight[name]

    expected = sorted((n for n in NAMES if active[n]), key=lambda n: (share(n), NAMES.index(n)))
    got = sorter.sorted()
    assert [round(share(n), 9) for n in got] == [round(share(n), 9) for n in expected]
    assert set(got) == set(expected)
