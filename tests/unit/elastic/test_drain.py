"""A worker killed because the operator drains its agent (REASON_AGENT_DRAINING) is a shrink
forced on the job, like a revocation: no worker failure, no backoff; it is replaced at once."""

from __future__ import annotations

from typing import Any

from frameworks.elastic.effects import Launch, OfferSlot, WorkerGone
from frameworks.elastic.jobs import Ending, classify
from frameworks.elastic.service_core import ElasticCore
from frameworks.elastic.spec import from_mapping
from protocol.resources import Resources
from protocol.task_states import TaskState


def launches(effects: list[Any]) -> list[str]:
    return [w.task_id for e in effects if isinstance(e, Launch) for w in e.tasks]


def test_a_drained_worker_is_a_shrink_not_a_failure() -> None:
    assert classify(TaskState.TASK_KILLED, "REASON_AGENT_DRAINING", False) is Ending.REVOKED
    core = ElasticCore(max_worker_failures=1, backoff_initial=5.0)
    spec = from_mapping({"name": "j", "worker": {"command": "run", "cpus": 1, "mem": 100},
                         "scaling": {"min_workers": 1, "max_workers": 1}})
    jid, _ = core.submit(spec, 0.0)
    (tid,) = launches(core.schedule([OfferSlot("o1", "a1", "h1", Resources.parse("cpus:1;mem:100"))], 0.0))
    core.on_update(tid, TaskState.TASK_RUNNING, 0.5)
    out = core.on_update(tid, TaskState.TASK_KILLED, 1.0, reason="REASON_AGENT_DRAINING")
    assert WorkerGone(jid, tid, None) in out  # not reported as a failure
    job = core.jobs[jid]
    assert job.failures == 0 and job.backoff_until == 0.0 and not job.terminal
    assert job.counts.get("revoked") == 1 and "failed" not in job.counts
    # replaced at once on another agent (max_worker_failures=1 would have failed the job)
    assert launches(core.schedule([OfferSlot("o2", "a2", "h2", Resources.parse("cpus:1;mem:100"))], 1.0))
