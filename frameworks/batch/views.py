"""The batch service's JSON views of its records (what the API answers and the web pages show),
and what it reads from the master's and agents' answers (``cluster_of``, ``exit_code_of``)."""

from __future__ import annotations

import contextlib
import urllib.parse
from collections.abc import Sequence
from typing import Any

from frameworks.batch.core import (
    JobRecord,
    TaskRecord,
)
from frameworks.batch.model import spec_to_dict
from frameworks.batch.planner import AgentCapacity, port_count
from frameworks.batch.store import attempt_to_dict
from frameworks.client.placement import attribute_text
from protocol.mesos import (
    TaskStatus,
)
from protocol.resources import Resources


def job_exit_code(job: JobRecord) -> int | None:
    """The job's exit code: an aborted gang's failing rank's, else the highest of its tasks' last
    attempts (0 for a job whose tasks all finished), None while no task has ended."""
    if job.exit_code is not None:
        return job.exit_code
    last = [t.history[-1].exit_code for t in job.tasks if t.history and t.history[-1].exit_code is not None]
    return max(last) if last else None


def job_summary(job: JobRecord) -> dict[str, Any]:
    return {
        "id": job.job_id,
        "name": job.spec.name,
        "user": job.user,
        "run_as": job.run_as,
        "state": job.state.value,
        "queue": job.spec.queue,
        "priority": job.spec.priority,
        "count": job.spec.count,
        "gang": job.spec.gang,
        "gang_policy": job.spec.policy.value if job.spec.gang > 0 else None,
        "gang_restarts": job.gang_restarts,
        "exit_code": job_exit_code(job),
        "tasks": job.counts(),
        "submitted_at": job.submitted_at,
        "started_at": job.started_at,
        "ended_at": job.ended_at,
        "reason": job.reason,
        "held": job.held,
        **({"parent_id": job.parent_id, "due_at": job.due_at} if job.parent_id is not None else {}),
        **(
            {"schedule": job.spec.schedule, "concurrency": job.spec.concurrency.value, "next_run": job.next_run,
             "runs": len(job.runs), "last_run_id": job.runs[-1] if job.runs else None}
            if job.periodic else {}
        ),
    }


def history_row(job: JobRecord) -> dict[str, Any]:
    """One job as ``agora job history`` prints it: its summary, its exit code (an aborted gang's
    failing rank's, else the highest of its tasks' last attempts), elapsed time, and what its
    attempts used (CPU seconds summed, the highest memory peak)."""
    attempts = [a for t in job.tasks for a in t.history]
    cpu = [a.cpu_seconds for a in attempts if a.cpu_seconds is not None]
    peak = [a.mem_peak_bytes for a in attempts if a.mem_peak_bytes is not None]
    start, end = job.started_at, job.ended_at
    return {
        **job_summary(job),
        "elapsed": None if start is None or end is None else max(0.0, end - start),
        "attempts": len(attempts),
        "cpu_seconds": round(sum(cpu), 3) if cpu else None,
        "mem_peak_bytes": max(peak) if peak else None,
    }


def job_detail(job: JobRecord, tasks: Sequence[TaskRecord] | None = None) -> dict[str, Any]:
    """The summary, the spec and ``tasks`` (default: all of them) with their attempts."""
    out = job_summary(job)
    out["spec"] = spec_to_dict(job.spec)
    out["changes"] = list(job.changes)
    out["task_list"] = [
        {
            "index": t.index,
            "phase": t.phase.value,
            "attempt": t.attempt,
            "failures": t.failures,
            "history": [attempt_to_dict(a) for a in t.history],
        }
        for t in (job.tasks if tasks is None else tasks)
    ]
    return out


def cluster_of(state: Any) -> tuple[AgentCapacity, ...]:
    """The active agents of a master ``/state`` as ``AgentCapacity`` (scalar totals, attributes
    as text, revocable resources)."""
    out = []
    for a in (state.get("slaves") if isinstance(state, dict) else None) or []:
        if not isinstance(a, dict) or not a.get("active", True) or a.get("draining"):
            continue
        out.append(
            AgentCapacity(
                str(a.get("id", "")),
                _scalars(a.get("resources")),
                {k: attribute_text(v) for k, v in (a.get("attributes") or {}).items()},
                _scalars(a.get("revocable_resources")),
                _port_count((a.get("resources") or {}).get("ports") if isinstance(a.get("resources"), dict) else None),
            )
        )
    return tuple(out)


def _port_count(text: Any) -> int:
    """How many ports ``/state`` shows an agent with: ``"[31000-32000]"`` is 1001."""
    if not isinstance(text, str) or not text.strip():
        return 0
    try:
        return port_count(Resources.parse(f"ports:{text.strip()}"))
    except ValueError:
        return 0


def _scalars(d: Any) -> dict[str, float]:
    if not isinstance(d, dict):
        return {}
    return {k: float(v) for k, v in d.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def host_of(url: str | None) -> str:
    """The host part of an agent's URL (``http://127.0.0.1:5051`` -> ``127.0.0.1``): where its
    tasks are reached; "" when unknown (the offer's hostname is used then)."""
    if not url:
        return ""
    try:
        return urllib.parse.urlsplit(url).hostname or ""
    except ValueError:
        return ""


def exit_code_of(status: TaskStatus) -> int | None:
    """Exit code from the status: Agora agents put ``exit_code=N`` in a label and the message."""
    if status.labels is not None:
        for label in status.labels.labels:
            if label.key == "exit_code" and label.value is not None:
                with contextlib.suppress(ValueError):
                    return int(label.value)
    msg = status.message or ""
    marker = "exit code "
    if marker in msg:
        tail = msg.split(marker, 1)[1].split()[0].rstrip(".,;)")
        with contextlib.suppress(ValueError):
            return int(tail)
    if status.state.value == "TASK_FINISHED":
        return 0
    return None
