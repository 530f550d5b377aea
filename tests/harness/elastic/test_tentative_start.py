"""The elastic service's gang start on ``protocol.placement.Tentative``: a job's minimum is
placed on a draft of the offers' free resources and committed whole (a draft short of it is
discarded and nothing taken; the same type the allocator's demand stage and the batch planner
use). Exact outcomes."""

from __future__ import annotations

from typing import Any

import pytest

from frameworks.elastic.effects import Launch, OfferSlot
from frameworks.elastic.service_core import ElasticCore
from frameworks.elastic.spec import from_mapping
from protocol.placement import Tentative
from protocol.resources import Resources


def _spec(lo: int, hi: int) -> Any:
    return from_mapping(
        {"name": "j", "worker": {"command": "run", "cpus": 1, "mem": 100},
         "scaling": {"min_workers": lo, "max_workers": hi}}
    )


def _offer(oid: str, res: str) -> OfferSlot:
    return OfferSlot(oid, f"a-{oid}", f"h-{oid}", Resources.parse(res))


def test_the_minimum_is_committed_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    ends: list[str] = []
    commit, discard = Tentative.commit, Tentative.discard

    def spy_commit(self: Tentative[str, object], into: dict[str, Resources] | None = None) -> list[object]:
        ends.append(f"commit {len(self)}")
        return commit(self, into)

    def spy_discard(self: Tentative[str, object]) -> None:
        ends.append(f"discard {len(self)}")
        discard(self)

    monkeypatch.setattr(Tentative, "commit", spy_commit)
    monkeypatch.setattr(Tentative, "discard", spy_discard)
    core = ElasticCore()
    core.submit(_spec(3, 3), 0.0)
    out = core.schedule([_offer("1", "cpus:2;mem:1000")], 1.0)
    assert [e for e in out if isinstance(e, Launch)] == []
    assert ends == []  # 2 slots for a minimum of 3: the policy does not even try
    out = core.schedule([_offer("1", "cpus:2;mem:1000"), _offer("2", "cpus:1;mem:100")], 2.0)
    assert ends == ["commit 3"]
    placed = sorted((e.offer_id, len(e.tasks)) for e in out if isinstance(e, Launch))
    assert placed == [("1", 2), ("2", 1)]


def test_a_start_short_of_the_minimum_takes_nothing() -> None:
    """``_start`` given too little (the policy counts slots first, so the scheduling round does
    not get here; a start is all or nothing all the same): nothing launched, the offers' free
    resources as they were."""
    core = ElasticCore()
    jid, _ = core.submit(_spec(3, 3), 0.0)
    offers = [_offer("1", "cpus:2;mem:1000")]
    avail = {"1": Resources.parse("cpus:2;mem:1000")}
    assert core._start(core.jobs[jid], offers, avail, 1.0) == []
    assert avail == {"1": Resources.parse("cpus:2;mem:1000")}
    offers.append(_offer("2", "cpus:1;mem:100"))
    avail["2"] = Resources.parse("cpus:1;mem:100")
    assert len([e for e in core._start(core.jobs[jid], offers, avail, 2.0) if isinstance(e, Launch)]) == 2
    assert avail == {"1": Resources.parse("mem:800"), "2": Resources.parse("")}
