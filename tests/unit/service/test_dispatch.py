"""The service-task dispatcher (pure): exact outcomes of sends, results, retries, an instance's
end with and without blame, cancellation and restore."""

from __future__ import annotations

import pytest

from frameworks.service.book import InstanceState
from frameworks.service.dispatch import Dispatcher, Ended, TaskState
from frameworks.service.wire import VERSION

P, S, D, F, C = TaskState.PENDING, TaskState.SENT, TaskState.DONE, TaskState.FAILED, TaskState.CANCELLED


def connected(d: Dispatcher, iid: str, job: int = 1, token: str = "tok") -> None:
    d.launched(iid, job)
    d.running(iid)
    inst, why = d.hello(iid, VERSION, token)
    assert inst is not None and why is None and inst.state is InstanceState.CONNECTED


def states(d: Dispatcher, job: int = 1) -> list[TaskState]:
    return [t.state for t in d.runs[job].tasks]


def test_tasks_go_oldest_first_up_to_the_window_and_results_end_them() -> None:
    d = Dispatcher()
    d.add(1, ["a", "b", "c", "d", "e"], "tok", window=2, max_retries=0)
    connected(d, "i1")
    connected(d, "i2")
    assert d.take("i1", 10.0) == [(0, "a"), (1, "b")]
    assert d.take("i1", 10.0) == []  # its window is full
    assert d.take("i2", 10.5) == [(0, "c"), (1, "d")]
    assert states(d) == [S, S, S, S, P]
    assert d.results("i1", [(0, True, "A"), (1, False, "no b")], 11.0) == [
        Ended(1, 0, D, "A"), Ended(1, 1, F, "no b")
    ]
    t = d.runs[1].tasks
    assert (t[0].result, t[0].sent_at, t[0].ended_at, t[0].instance) == ("A", 10.0, 11.0, "i1")
    assert (t[1].state, t[1].failures, t[1].result) == (F, 1, "no b")
    assert d.take("i1", 11.0) == [(2, "e")]
    assert not d.runs[1].finished
    d.results("i2", [(0, True, "C"), (1, True, "D")], 12.0)
    d.results("i1", [(2, True, "E")], 12.0)
    run = d.runs[1]
    assert run.finished and run.failure() == "1 of 5 service tasks failed"
    assert run.summary() == {"pending": 0, "sent": 0, "done": 4, "failed": 1, "cancelled": 0, "total": 5}


def test_a_failure_with_retries_left_goes_to_the_back_of_the_queue() -> None:
    d = Dispatcher()
    d.add(1, ["a", "b", "c"], "tok", window=1, max_retries=1)
    connected(d, "i1")
    assert d.take("i1", 0.0) == [(0, "a")]
    assert d.results("i1", [(0, False, "flaky")], 1.0) == [Ended(1, 0, P, "flaky")]
    assert d.take("i1", 1.0) == [(1, "b")]
    d.results("i1", [(1, True, "B")], 2.0)
    assert d.take("i1", 2.0) == [(2, "c")]
    d.results("i1", [(2, True, "C")], 3.0)
    assert d.take("i1", 3.0) == [(3, "a")]  # its second try
    assert d.results("i1", [(3, False, "again")], 4.0) == [Ended(1, 0, F, "again")]
    t = d.runs[1].tasks[0]
    assert (t.state, t.failures, t.sends, t.result, t.ended_at) == (F, 2, 2, "again", 4.0)
    assert d.runs[1].finished


def test_an_instance_that_crashed_blames_the_task_it_was_on_and_requeues_the_rest_for_free() -> None:
    d = Dispatcher()
    d.add(1, ["a", "b", "c", "d"], "tok", window=3, max_retries=1)
    connected(d, "i1")
    assert d.take("i1", 0.0) == [(0, "a"), (1, "b"), (2, "c")]
    d.results("i1", [(0, True, "A")], 1.0)
    ended = d.gone("i1", "the service command exited with code 3", 2.0, blame=True)
    assert ended == [Ended(1, 1, P, "its service instance ended: the service command exited with code 3")]
    run = d.runs[1]
    # c never started: back to the front at no cost; b (the one it was on) retried behind d
    assert list(run.queue) == [2, 3, 1]
    assert [(t.state, t.failures) for t in run.tasks] == [(D, 0), (P, 1), (P, 0), (P, 0)]
    assert "i1" not in d.book
    connected(d, "i2")
    assert d.take("i2", 3.0) == [(0, "c"), (1, "d"), (2, "b")]


def test_a_task_that_crashes_every_instance_fails_when_its_retries_are_spent() -> None:
    d = Dispatcher()
    d.add(1, ["boom"], "tok", window=4, max_retries=0)
    connected(d, "i1")
    d.take("i1", 0.0)
    assert d.gone("i1", "killed by signal 9", 1.0, blame=True) == [
        Ended(1, 0, F, "its service instance ended: killed by signal 9")
    ]
    assert d.runs[1].finished and d.runs[1].failure() == "1 of 1 service tasks failed"


def test_an_instance_lost_without_blame_spends_nothing() -> None:
    d = Dispatcher()
    d.add(1, ["a", "b"], "tok", window=2, max_retries=0)
    connected(d, "i1")
    d.take("i1", 0.0)
    assert d.gone("i1", "agent lost", 1.0, blame=False) == []
    assert [(t.state, t.failures) for t in d.runs[1].tasks] == [(P, 0), (P, 0)]
    assert list(d.runs[1].queue) == [0, 1]


def test_a_late_answer_after_the_instance_is_gone_or_the_job_cancelled_is_ignored() -> None:
    d = Dispatcher()
    d.add(1, ["a", "b", "c"], "tok", window=3, max_retries=0)
    connected(d, "i1")
    d.take("i1", 0.0)
    assert d.results("i1", [(7, True, "x")], 1.0) == []  # never sent under that seq
    assert d.cancel(1, 2.0, "cancelled by alice") == [0, 1, 2]
    assert states(d) == [C, C, C]
    assert d.runs[1].tasks[0].result == "cancelled by alice"
    assert d.results("i1", [(0, True, "A")], 3.0) == []
    assert d.take("i1", 3.0) == []
    assert d.runs[1].finished and d.runs[1].failure() == "3 of 3 service tasks cancelled"


def test_hello_refusals() -> None:
    d = Dispatcher()
    d.add(1, ["a"], "tok", window=1, max_retries=0)
    d.launched("i1", 1)
    assert d.hello("i1", VERSION + 1, "tok") == (None, f"channel version {VERSION + 1} is not {VERSION}")
    assert d.hello("nobody", VERSION, "tok") == (None, "no service instance nobody")
    assert d.hello("i1", VERSION, "guess") == (None, "wrong token")
    d.stopping("i1", "stop")
    assert d.hello("i1", VERSION, "tok") == (None, "instance i1 is STOPPING")
    assert d.launched("i9", 42) is None  # no such service job


def test_dirty_tasks_are_handed_out_once_and_restore_resends_what_was_in_flight() -> None:
    d = Dispatcher()
    d.add(1, ["a", "b", "c"], "tok", window=3, max_retries=2)
    connected(d, "i1")
    d.take("i1", 0.0)
    d.results("i1", [(0, True, "A")], 1.0)
    assert [(j, t.index, t.state) for j, t in d.take_dirty()] == [(1, 0, D), (1, 1, S), (1, 2, S)]
    assert d.take_dirty() == []
    r = Dispatcher()
    run = r.add(1, ["a", "b", "c"], "tok", 3, 2, restored={0: (D, 0, 1, "A", 1.0), 1: (S, 1, 2, "flaky", None)})
    assert [(t.state, t.failures, t.sends, t.result) for t in run.tasks] == [
        (D, 0, 1, "A"), (P, 1, 2, None), (P, 0, 0, None)
    ]
    assert list(run.queue) == [1, 2] and run.summary()["done"] == 1


def test_bad_arguments() -> None:
    d = Dispatcher()
    d.add(1, ["a"], "tok", window=1, max_retries=0)
    with pytest.raises(ValueError, match="exists"):
        d.add(1, ["a"], "tok", window=1, max_retries=0)
    with pytest.raises(ValueError, match="window must be >= 1"):
        d.add(2, ["a"], "tok", window=0, max_retries=0)


def test_an_instance_that_connects_again_gets_its_unanswered_tasks_again_with_new_numbers() -> None:
    d = Dispatcher()
    d.add(1, ["a", "b", "c"], "tok", window=2, max_retries=0)
    connected(d, "i1")
    assert d.take("i1", 0.0) == [(0, "a"), (1, "b")]
    d.results("i1", [(0, True, "A")], 1.0)
    inst, why = d.hello("i1", VERSION, "tok")  # its channel broke and it came back
    assert inst is not None and why is None and inst.inflight == {}
    assert list(d.runs[1].queue) == [1, 2] and states(d) == [D, P, P]
    assert d.results("i1", [(1, True, "late B on the old channel")], 2.0) == []
    assert d.take("i1", 2.0) == [(2, "b"), (3, "c")]
    t = d.runs[1].tasks[1]
    assert (t.sends, t.failures) == (2, 0)
