"""The agent's usage book (agent.usage): what the periodic USAGE_REPORT carries."""

from __future__ import annotations

from agent.usage import UsageBook
from protocol.usage import TaskUsage


def test_report_carries_only_changed_live_tasks() -> None:
    b = UsageBook()
    b.sampled(("f", "a"), 1.0, 100, 1.0)
    b.sampled(("f", "b"), 2.0, 200, 1.0)
    assert [k for k, _ in b.report([("f", "a"), ("f", "b")])] == [("f", "a"), ("f", "b")]
    b.sampled(("f", "a"), 1.001, 100, 2.0)  # within rounding, only the timestamp moved
    b.sampled(("f", "b"), 2.5, 200, 2.0)
    assert b.report([("f", "a"), ("f", "b")]) == [(("f", "b"), TaskUsage(2.5, 200, 200, None, 2.0))]
    b.disk(("f", "a"), 4096, 3.0)
    assert [k for k, _ in b.report([("f", "b")])] == []  # a changed but is not live any more
    assert b.ended(("f", "a"), 3.0, 500, 4.0) == TaskUsage(3.0, 0, 500, 4096, 4.0)
    b.forget(("f", "a"))
    assert b.get(("f", "a")) is None and b.report([("f", "a")]) == []
