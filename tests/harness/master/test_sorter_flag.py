"""A master configured with ``--framework_sorter=age`` decides as the ``AgeSorter`` does (the
oldest framework of a role first, whatever it holds); with the default ``drf`` the framework
with the lowest dominant share first. The master core with the allocator built from the
master's configuration, driven through SUBSCRIBE and agent registrations; exact offers."""

from __future__ import annotations

import pytest

from master.config import allocator_config, load
from master.testing import Harness, offers


@pytest.mark.parametrize(("sorter", "winner"), [("age", "s1"), ("drf", "s2")])
def test_the_new_agent_goes_to_the_framework_the_sorter_names(sorter: str, winner: str) -> None:
    h = Harness(allocator=allocator_config(load(None, framework_sorter=sorter), "o"))
    _, s1 = h.subscribe()
    h.agent("cpus:4;mem:4096", hostname="h1")
    assert [o.hostname for o in offers(h.allocate(), s1)] == ["h1"]  # the older framework holds h1
    _, s2 = h.subscribe()
    h.agent("cpus:2;mem:1024", hostname="h2")
    fx = h.allocate()
    got = {sid: [o.hostname for o in offers(fx, sid)] for sid in (s1, s2)}
    assert got == {s1: ["h2"] if winner == "s1" else [], s2: ["h2"] if winner == "s2" else []}
