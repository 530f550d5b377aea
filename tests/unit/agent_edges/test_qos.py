"""QoS controllers: noop and the sustained-load controller (newest first, one per cooldown)."""

from __future__ import annotations

import pytest

from agent.qos import QOS_CONTROLLERS, Eviction, QoSError, RevocableTask, make_qos


def tasks(*spec: tuple[str, float]) -> list[RevocableTask]:
    return [RevocableTask(task_id=t, framework_id="fw", started_at=s) for t, s in spec]


def test_map_and_unknown() -> None:
    assert set(QOS_CONTROLLERS) == {"noop", "load"}
    with pytest.raises(QoSError, match="unknown QoS controller"):
        make_qos("cgroups")


def test_noop_never_evicts() -> None:
    q = make_qos("noop")
    assert q.corrections({"load1_per_core": 50.0}, tasks(("a", 1.0)), 1000.0) == []


def test_load_needs_sustained_overload_then_evicts_newest_one_per_cooldown() -> None:
    q = make_qos("load", threshold=1.0, window=10.0, cooldown=5.0)
    running = tasks(("old", 1.0), ("new", 3.0), ("mid", 2.0))
    hot = {"load1_per_core": 1.5}
    assert q.corrections(hot, running, 100.0) == []
    assert q.corrections(hot, running, 109.0) == []
    first = q.corrections(hot, running, 110.0)
    assert [e.task_id for e in first] == ["new"]
    assert isinstance(first[0], Eviction) and "load1_per_core=1.50" in first[0].reason
    # Within the cooldown: nothing more, even though "new" is still reported (being killed).
    assert q.corrections(hot, running, 112.0) == []
    # After the cooldown: the next newest, never "new" again.
    assert [e.task_id for e in q.corrections(hot, running, 115.0)] == ["mid"]
    assert [e.task_id for e in q.corrections(hot, running[:1], 120.0)] == ["old"]
    assert q.corrections(hot, [], 130.0) == []


def test_load_dip_resets_window() -> None:
    q = make_qos("load", threshold=1.0, window=10.0, cooldown=0.0)
    running = tasks(("a", 1.0))
    q.corrections({"load1_per_core": 2.0}, running, 0.0)
    q.corrections({"load1_per_core": 0.5}, running, 8.0)  # dip: window restarts
    assert q.corrections({"load1_per_core": 2.0}, running, 9.0) == []
    assert q.corrections({"load1_per_core": 2.0}, running, 18.0) == []
    assert [e.task_id for e in q.corrections({"load1_per_core": 2.0}, running, 19.0)] == ["a"]


def test_missing_or_nan_metric_is_not_overload() -> None:
    q = make_qos("load", metric="cpu_percent", threshold=90.0, window=0.0)
    running = tasks(("a", 1.0))
    assert q.corrections({"load1_per_core": 9.0}, running, 0.0) == []
    assert q.corrections({"cpu_percent": float("nan")}, running, 1.0) == []
    assert [e.task_id for e in q.corrections({"cpu_percent": 99.0}, running, 2.0)] == ["a"]


def test_ties_broken_deterministically() -> None:
    q = make_qos("load", threshold=0.0, window=0.0, cooldown=0.0)
    running = [RevocableTask("t1", "fwA", 5.0), RevocableTask("t2", "fwB", 5.0)]
    assert q.corrections({"load1_per_core": 1.0}, running, 0.0)[0].framework_id == "fwB"


@pytest.mark.parametrize(
    "opts", [{"threshold": -1}, {"window": float("nan")}, {"cooldown": "x"}, {"metric": ""}]
)
def test_bad_options(opts: dict[str, object]) -> None:
    with pytest.raises(QoSError):
        make_qos("load", **opts)


def test_unknown_option() -> None:
    with pytest.raises(QoSError, match="unknown options"):
        make_qos("load", thresold=2)
