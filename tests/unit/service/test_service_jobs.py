"""A service job in the batch core and its spec: exact outcomes of ``service_finished`` (the
instances decide nothing once every service task has ended) and the spec's rules."""

from __future__ import annotations

import pytest

from frameworks.batch.core import BatchCore, BatchError, Launch
from frameworks.batch.model import JobSpec, JobState, SpecError, TaskPhase, spec_from_dict, spec_to_dict
from frameworks.batch.planner import OfferView
from frameworks.batch.warm import inputs_of
from protocol.resources import Resources
from protocol.task_states import TaskState as S


def offer(cpus: float = 1) -> OfferView:
    return OfferView("o1", "agent-1", "host-1", "*", Resources.of(cpus=cpus, mem=1024))


def service(**kw: object) -> JobSpec:
    return JobSpec(**{"name": "sq", "shell": "cat", "cpus": 1.0, "mem": 64.0, "service": True, **kw})  # type: ignore[arg-type]


def test_the_job_ends_with_the_service_tasks_outcome_once_its_instances_are_gone() -> None:
    core = BatchCore()
    jid, _ = core.submit(service(count=3, max_retries=2), now=0)
    launched = [t.task_id for e in core.schedule([offer(cpus=2)], now=0) if isinstance(e, Launch) for t in e.tasks]
    assert launched == ["j1-0-0", "j1-1-0"]
    core.on_update("j1-0-0", S.TASK_RUNNING, 1)
    core.on_update("j1-1-0", S.TASK_RUNNING, 1)
    core.on_update("j1-1-0", S.TASK_FAILED, 2, message="the service command exited with code 3")
    job = core.job(jid)
    assert [t.phase for t in job.tasks] == [TaskPhase.RUNNING, TaskPhase.PENDING, TaskPhase.PENDING]
    core.service_finished(jid, "1 of 40 service tasks failed", 3)
    # the instances not placed are not needed; the job waits for the running one
    assert [t.phase for t in job.tasks] == [TaskPhase.RUNNING, TaskPhase.CANCELLED, TaskPhase.CANCELLED]
    assert job.state is JobState.RUNNING
    core.on_update("j1-0-0", S.TASK_FINISHED, 4)
    assert job.state is JobState.FAILED and job.reason == "1 of 40 service tasks failed" and job.ended_at == 4


def test_all_service_tasks_done_succeeds_even_if_an_instance_is_killed_while_stopping() -> None:
    core = BatchCore()
    jid, _ = core.submit(service(count=1), now=0)
    core.schedule([offer()], now=0)
    core.on_update("j1-0-0", S.TASK_RUNNING, 1)
    core.service_finished(jid, None, 2)
    core.on_update("j1-0-0", S.TASK_KILLED, 3)
    job = core.job(jid)
    assert job.state is JobState.SUCCEEDED and job.reason is None
    assert core.service_finished(jid, None, 4) == []  # already ended


def test_a_service_job_is_not_requeued() -> None:
    core = BatchCore()
    jid, _ = core.submit(service(count=1), now=0)
    core.schedule([offer()], now=0)
    core.on_update("j1-0-0", S.TASK_RUNNING, 1)
    with pytest.raises(BatchError, match="is a service job; submit it again"):
        core.requeue(jid, 2, "alice")


def test_service_spec_round_trips_and_its_rules() -> None:
    spec = spec_from_dict({"shell": "python w.py", "service": True, "window": 8, "count": 2})
    assert spec.service and spec.window == 8
    assert spec_from_dict(spec_to_dict(spec)) == spec
    with pytest.raises(SpecError, match="cannot be a gang"):
        spec_from_dict({"shell": "x", "service": True, "count": 2, "gang": 2})
    with pytest.raises(SpecError, match="only a service job has one"):
        spec_from_dict({"shell": "x", "window": 4})
    with pytest.raises(SpecError, match="service: expected true or false"):
        spec_from_dict({"shell": "x", "service": "yes"})
    with pytest.raises(SpecError, match="cannot be periodic"):
        spec_from_dict({"shell": "x", "service": True, "schedule": "* * * * *"})


def test_inputs_are_checked() -> None:
    assert inputs_of({"inputs": ["a", ""]}) == ["a", ""]
    with pytest.raises(SpecError, match="needs a non-empty list"):
        inputs_of({"inputs": []})
    with pytest.raises(SpecError, match=r"inputs\[1\]: expected a string, got int"):
        inputs_of({"inputs": ["a", 2]})
    with pytest.raises(SpecError, match=r"inputs\[0\]: contains a line break; an input is one line of text"):
        inputs_of({"inputs": ["a\nb"]})
