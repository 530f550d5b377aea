"""The elastic service's web pages, pure: from the API's JSON (``job_summary``, ``job_detail``)
to HTML (``frameworks/client/webui.py``).

- ``/`` (``/ui``): every job with its user, state, workers (running, and min..max), generation,
  samples/s, loss, accuracy and the reason it is not at its maximum.
- ``/ui/jobs/{id}``: the job's figures and why it is not at max, its live and ended workers
  (agent, phase, times, how each ended), the coordinator's recent log, and the live output of one
  worker (``?worker=N&stream=stdout|stderr``; by default the first live worker).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from frameworks.client.webui import (
    Html,
    definitions,
    duration,
    join,
    link,
    log_view,
    number,
    page,
    path,
    section,
    state_badge,
    table,
    tag,
    timestamp,
)

__pure__ = True

SERVICE = "Agora elastic"
NAV = (("/", "Jobs"), ("/api/v1/jobs", "Jobs (JSON)"), ("/metrics", "Metrics"))


def _workers(j: Mapping[str, Any]) -> str:
    return f"{j.get('running', 0)} running ({j.get('min_workers')}..{j.get('max_workers')})"


def jobs_page(jobs: Sequence[Mapping[str, Any]], *, master: str | None = None, principal: str | None = None) -> Html:
    rows = [
        (
            link(path("ui", "jobs", str(j["id"])), j["id"]),
            j["name"],
            j.get("user") or "-",
            state_badge(j["state"]),
            _workers(j),
            number(j.get("generation")),
            number(j.get("samples_per_second"), 1),
            number(j.get("loss"), 4),
            number(j.get("accuracy"), 4),
            j.get("reason") or "",
        )
        for j in sorted(jobs, key=lambda j: -int(j["id"]))
    ]
    body = table(("ID", "NAME", "USER", "STATE", "WORKERS", "GENERATION", "SAMPLES/S", "LOSS", "ACCURACY",
                  "WHY NOT AT MAX"), rows, empty="no jobs")
    return page(SERVICE, "Elastic training jobs", body, nav=NAV, master=master, principal=principal)


def _worker_rows(workers: Sequence[Mapping[str, Any]], job_id: int) -> list[tuple[object, ...]]:
    return [
        (
            w["index"],
            w["task_id"],
            w.get("hostname") or w.get("agent_id") or "-",
            state_badge(w.get("phase", "-")),
            "revocable" if w.get("revocable") else "regular",
            timestamp(w.get("running_at")),
            timestamp(w.get("ended_at")),
            duration(w.get("running_at"), w.get("ended_at")),
            w.get("ending") or "",
            w.get("message") or "",
            join((link(path("ui", "jobs", str(job_id), query={"worker": w["index"], "stream": s}), s)
                  for s in ("stdout", "stderr")), " "),
        )
        for w in workers
    ]


def job_page(
    d: Mapping[str, Any], *, worker: int | None, stream: str, master: str | None = None, principal: str | None = None,
) -> Html:
    job_id = int(d["id"])
    live = d.get("worker_list") or []
    ended = d.get("ended_workers") or []
    if worker is None:
        worker = next((int(w["index"]) for w in live), int(ended[-1]["index"]) if ended else 0)
    facts = [
        ("user", d.get("user") or "-"),
        ("state", state_badge(d["state"])),
        ("workers", _workers(d)),
        ("why not at max", d.get("reason") or "-"),
        ("generation", number(d.get("generation"))),
        ("progress", number(d.get("progress"))),
        ("samples/s", number(d.get("samples_per_second"), 1)),
        ("loss", number(d.get("loss"), 4)),
        ("accuracy", number(d.get("accuracy"), 4)),
        ("test accuracy", number(d.get("test_accuracy"), 4)),
        ("role", d.get("role")),
        ("submitted", timestamp(d.get("submitted_at"))),
        ("started", timestamp(d.get("started_at"))),
        ("ended", timestamp(d.get("ended_at"))),
    ]
    failure = d.get("last_failure")
    if failure:
        facts.append(("last failure", f"{failure.get('cause')} ({failure.get('in_a_row')} in a row)"))
    coord = d.get("coordinator_status") or {}
    log_lines = [str(x) for x in coord.get("log") or []]
    src = path("api", "v1", "jobs", str(job_id), "logs", query={"worker": worker, "stream": stream})
    headers = ("#", "TASK ID", "AGENT", "PHASE", "KIND", "RUNNING SINCE", "ENDED", "RAN", "ENDING", "MESSAGE", "LOGS")
    body = Html(
        definitions(facts)
        + section("Live workers", table(headers, _worker_rows(live, job_id), empty="no live worker"))
        + section("Ended workers (latest)", table(headers, _worker_rows(ended, job_id), empty="none yet"))
        + section("Coordinator", tag("pre", "\n".join(log_lines) or "-", cls="log"))
        + section(f"Worker {worker} {stream}", log_view(src, f"worker {worker} of job {job_id}, {stream}"))
    )
    return page(SERVICE, f"Elastic job {job_id}: {d['name']}", body, nav=NAV, master=master, principal=principal)
