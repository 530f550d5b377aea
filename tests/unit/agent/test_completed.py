"""The agent's book of finished work (agent/completed.py): what it keeps, in which order, and the
bounds Mesos' agent keeps (completed executors per framework, tasks per executor, frameworks)."""

from __future__ import annotations

from agent.completed import CompletedBook


def test_tasks_are_kept_per_executor_and_framework_oldest_first() -> None:
    book: CompletedBook[str, str | None] = CompletedBook()
    book.task_done("f1", "e1", None, "t1")
    book.task_done("f1", "e2", "info-2", "t2")
    book.task_done("f1", "e1", None, "t3")
    book.task_done("f2", "t4", None, "t4")
    assert book.frameworks() == ["f1", "f2"]
    assert [(e.executor_id, e.info, list(e.tasks)) for e in book.executors("f1")] == [
        ("e2", "info-2", ["t2"]), ("e1", None, ["t1", "t3"])]
    assert book.tasks("f1", "e1") == ["t1", "t3"]
    assert book.tasks("f1", "nope") == [] and book.tasks("nope", "e1") == [] and book.executors("nope") == []


def test_a_later_task_keeps_the_executor_description_it_had() -> None:
    book: CompletedBook[str, str | None] = CompletedBook()
    book.task_done("f", "e", "info", "t1")
    book.task_done("f", "e", None, "t2")
    assert book.executors("f")[0].info == "info"


def test_bounds_drop_the_oldest() -> None:
    book: CompletedBook[str, None] = CompletedBook(max_executors_per_framework=2, max_tasks_per_executor=2,
                                                   max_frameworks=2)
    for t in ("a", "b", "c"):
        book.task_done("f1", "e1", None, t)
    assert book.tasks("f1", "e1") == ["b", "c"]
    book.task_done("f1", "e2", None, "d")
    book.task_done("f1", "e3", None, "e")
    assert [e.executor_id for e in book.executors("f1")] == ["e2", "e3"]
    book.task_done("f2", "x", None, "x")
    book.task_done("f1", "e3", None, "f")  # f1 is now the most recent framework
    book.task_done("f3", "y", None, "y")
    assert book.frameworks() == ["f1", "f3"]
