"""Batch job specs: validation with clear errors, round trip, state tables, dependencies."""

from __future__ import annotations

import pytest

from frameworks.batch.model import (
    JOB_TERMINAL,
    Dependency,
    DependencyKind,
    IllegalJobTransition,
    JobSpec,
    JobState,
    SpecError,
    TaskPhase,
    check_job_transition,
    check_task_transition,
    dependency_status,
    spec_from_dict,
    spec_to_dict,
)


def test_round_trip() -> None:
    data = {
        "name": "train",
        "argv": ["python", "-c", "print(1)"],
        "cpus": 2,
        "mem": 512,
        "gpus": 1,
        "count": 8,
        "gang": 4,
        "queue": "ml",
        "priority": 5,
        "max_retries": 2,
        "time_limit": 60,
        "env": {"A": "1"},
        "constraints": {"rack": "r1"},
        "after": [3, {"job_id": 4, "kind": "any"}],
        "preemptible": True,
    }
    spec = spec_from_dict(data)
    assert spec.after == (Dependency(3), Dependency(4, DependencyKind.ANY))
    assert spec.gang_size == 4
    assert spec_from_dict(spec_to_dict(spec)) == spec


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"argv": ["x"], "cpus": -1}, "cpus"),
        ({"argv": ["x"], "cpus": float("nan")}, "cpus"),
        ({"argv": ["x"], "count": 0}, "count"),
        ({"argv": ["x"], "count": 2, "gang": 3}, "gang"),
        ({"argv": ["x"], "bogus": 1}, "unknown field"),
        ({}, "exactly one of argv"),
        ({"argv": ["x"], "shell": "y"}, "exactly one of argv"),
        ({"argv": ["x"], "env": {"LD_PRELOAD": "/x.so"}}, "LD_PRELOAD"),
        ({"argv": ["x"], "env": {"A=B": "1"}}, "not an allowed"),
        ({"argv": ["x"], "queue": "../x"}, "queue"),
        ({"argv": ["x"], "after": ["one"]}, r"after\[0\]"),
        ({"argv": ["x"], "count": True}, "count"),
        ({"shell": "   "}, "empty"),
    ],
)
def test_bad_specs_name_the_field(data: dict[str, object], match: str) -> None:
    with pytest.raises(SpecError, match=match):
        spec_from_dict(data)


def test_state_tables() -> None:
    check_job_transition(JobState.PENDING, JobState.RUNNING)
    check_job_transition(JobState.RUNNING, JobState.PENDING)
    for t in JOB_TERMINAL:
        with pytest.raises(IllegalJobTransition):
            check_job_transition(t, JobState.RUNNING)
    check_task_transition(TaskPhase.RUNNING, TaskPhase.PENDING)
    with pytest.raises(IllegalJobTransition):
        check_task_transition(TaskPhase.SUCCEEDED, TaskPhase.RUNNING)


def test_dependencies() -> None:
    spec = JobSpec(name="x", argv=("true",), after=(Dependency(1), Dependency(2, DependencyKind.ANY)))
    assert dependency_status(spec, {1: JobState.RUNNING, 2: JobState.PENDING}) == (False, "after job 1, 2")
    assert dependency_status(spec, {1: JobState.SUCCEEDED, 2: JobState.FAILED}) == (True, None)
    ready, why = dependency_status(spec, {1: JobState.FAILED, 2: JobState.FAILED})
    assert not ready and why == "never: dependency job 1 failed"
    assert dependency_status(spec, {2: JobState.FAILED})[1] == "never: dependency job 1 does not exist"
