from __future__ import annotations

import pytest

from frameworks.elastic.state import (
    TERMINAL_STATES,
    TRANSITIONS,
    IllegalTransition,
    JobLifecycle,
    JobState,
    check_transition,
    is_terminal,
)


def test_every_state_has_a_row_and_terminal_rows_are_empty() -> None:
    assert set(TRANSITIONS) == set(JobState)
    for s in TERMINAL_STATES:
        assert TRANSITIONS[s] == frozenset()
    assert {s for s in JobState if is_terminal(s)} == {
        JobState.SUCCEEDED,
        JobState.FAILED,
        JobState.CANCELLED,
    }


def test_happy_path_with_scaling_and_story() -> None:
    job = JobLifecycle()
    job.move(JobState.STARTING, "minimum of 2 fits", 1.0)
    job.move(JobState.RUNNING, "2 workers joined", 2.0)
    job.move(JobState.SCALING, "grow to 4", 3.0)
    job.move(JobState.RUNNING, "generation 3", 4.0)
    job.move(JobState.SUCCEEDED, "all epochs done", 5.0)
    assert job.terminal
    assert [t.new for t in job.story][-1] is JobState.SUCCEEDED
    assert job.story[2].reason == "grow to 4"


def test_losing_workers_below_min_goes_back_to_pending_not_failed() -> None:
    check_transition(JobState.RUNNING, JobState.PENDING)
    check_transition(JobState.SCALING, JobState.PENDING)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (JobState.PENDING, JobState.RUNNING),
        (JobState.SUCCEEDED, JobState.RUNNING),
        (JobState.CANCELLED, JobState.PENDING),
        (JobState.PENDING, JobState.SUCCEEDED),
    ],
)
def test_illegal_transitions_raise(old: JobState, new: JobState) -> None:
    with pytest.raises(IllegalTransition, match=f"{old.name} -> {new.name}"):
        check_transition(old, new)


def test_move_from_terminal_raises_and_keeps_state() -> None:
    job = JobLifecycle()
    job.move(JobState.CANCELLED, "user", 0.0)
    with pytest.raises(IllegalTransition):
        job.move(JobState.RUNNING, "x", 1.0)
    assert job.state is JobState.CANCELLED
