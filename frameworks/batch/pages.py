"""The batch service's web pages, pure: from the API's own JSON (``job_summary``,
``job_detail``, the fair-share rows) to HTML (``frameworks/client/webui.py``).

- ``/`` (``/ui``): every job (newest first) with its user, state, queue, priority, tasks and the
  reason it waits, filterable by ``?user=`` and ``?state=``; then each user's fair share.
- ``/ui/jobs/{id}``: the job (user, OS account, queue, state, reason, times, gang, exit code), each
  task with every attempt (agent, times, state, exit code, CPU seconds, peak memory, message), and
  the live log of one task (``?task=I&stream=stdout|stderr``; by default the first running task).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from frameworks.client.webui import (
    Html,
    definitions,
    duration,
    esc,
    join,
    link,
    log_view,
    megabytes,
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

SERVICE = "Agora batch"
NAV = (("/", "Jobs"), ("/api/v1/jobs", "Jobs (JSON)"), ("/api/v1/share", "Fair share (JSON)"), ("/metrics", "Metrics"))
STATES = ("PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED")


def _tasks_text(counts: Mapping[str, int]) -> str:
    return " ".join(f"{k.lower()}:{v}" for k, v in sorted(counts.items())) or "-"


def jobs_page(
    jobs: Sequence[Mapping[str, Any]], shares: Sequence[Mapping[str, Any]], *, user: str | None = None,
    state: str | None = None, master: str | None = None, principal: str | None = None,
) -> Html:
    filters = tag(
        "p",
        "state: ",
        join((link(path("", query={"state": s, "user": user}), s.lower()) for s in STATES), " "),
        " ",
        link(path("", query={"user": user}) if user else "/", "all"),
        (Html(" | user ") + esc(user) + Html(" ") + link(path("", query={"state": state}), "(any user)")) if user else "",
        cls="note",
    )
    rows = [
        (
            link(path("ui", "jobs", str(j["id"])), j["id"]),
            j["name"],
            link(path("", query={"user": j.get("user") or ""}), j.get("user") or "-") if j.get("user") else "-",
            state_badge(j["state"]),
            j["queue"],
            j["priority"],
            _tasks_text(j.get("tasks") or {}),
            j.get("reason") or "",
        )
        for j in sorted(jobs, key=lambda j: -int(j["id"]))
    ]
    share_rows = [
        (s["queue"], s["user"] or "-", number(s["shares"]), number(s["norm_shares"]), number(s["usage"], 1),
         number(s["norm_usage"]), number(s["fairshare"]))
        for s in shares
    ]
    body = Html(
        filters
        + table(("ID", "NAME", "USER", "STATE", "QUEUE", "PRIO", "TASKS", "REASON"), rows, empty="no jobs")
        + section(
            "Fair share",
            table(("QUEUE", "USER", "SHARES", "NORM SHARES", "USAGE", "NORM USAGE", "FAIRSHARE"), share_rows,
                  empty="no user has live jobs"),
        )
    )
    return page(SERVICE, "Batch jobs", body, nav=NAV, master=master, principal=principal)


def _attempt_rows(task_list: Sequence[Mapping[str, Any]], job_id: int) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for t in task_list:
        history = t.get("history") or [{}]
        for n, a in enumerate(history):
            first = n == 0
            rows.append((
                t["index"] if first else "",
                state_badge(t["phase"]) if first else "",
                "-" if a.get("attempt") is None else a["attempt"],
                a.get("task_id") or "-",
                a.get("hostname") or a.get("agent_id") or "-",
                timestamp(a.get("started_at")),
                timestamp(a.get("ended_at")),
                duration(a.get("started_at"), a.get("ended_at")),
                state_badge(a["state"]) if a.get("state") else "-",
                "-" if a.get("exit_code") is None else a["exit_code"],
                number(a.get("cpu_seconds"), 2),
                megabytes(a.get("mem_peak_bytes")),
                a.get("message") or "",
                join((link(path("ui", "jobs", str(job_id), query={"task": t["index"], "stream": s}), s)
                      for s in ("stdout", "stderr")), " ") if a.get("task_id") else "",
            ))
    return rows


def job_page(
    d: Mapping[str, Any], *, task: int | None, stream: str, master: str | None = None, principal: str | None = None,
) -> Html:
    """``d``: ``job_detail``. ``task``: whose log to follow (None: the first active task, else 0)."""
    job_id = int(d["id"])
    tasks = d.get("task_list") or []
    if task is None:
        task = next((t["index"] for t in tasks if t["phase"] in ("RUNNING", "LAUNCHING")), 0)
    facts = [
        ("user", d.get("user") or "-"),
        ("runs as", d.get("run_as") or "(the service's user)"),
        ("queue", d["queue"]),
        ("state", state_badge(d["state"])),
        ("reason", d.get("reason") or "-"),
        ("priority", d["priority"]),
        ("tasks", f"{d['count']} ({_tasks_text(d.get('tasks') or {})})"),
        ("submitted", timestamp(d.get("submitted_at"))),
        ("started", timestamp(d.get("started_at"))),
        ("ended", timestamp(d.get("ended_at"))),
        ("elapsed", duration(d.get("started_at"), d.get("ended_at"))),
    ]
    if d.get("gang"):
        facts.append(("gang", f"{d['gang']} at once, policy {d.get('gang_policy')}, restarts {d.get('gang_restarts', 0)}"))
    if d.get("exit_code") is not None:
        facts.append(("exit code", d["exit_code"]))
    if d.get("held"):
        facts.append(("held by", d["held"]))
    spec = d.get("spec") or {}
    command = " ".join(spec.get("argv") or []) or spec.get("shell") or "-"
    facts.append(("command", tag("code", command)))
    src = path("api", "v1", "jobs", str(job_id), "logs", query={"task": task, "stream": stream})
    body = Html(
        definitions(facts)
        + section(
            "Tasks and attempts",
            table(("TASK", "PHASE", "ATTEMPT", "TASK ID", "AGENT", "START", "END", "ELAPSED", "STATE", "EXIT",
                   "CPU S", "PEAK MEM", "MESSAGE", "LOGS"), _attempt_rows(tasks, job_id), empty="no tasks"),
        )
        + section(f"Task {task} {stream}", log_view(src, f"task {task} of job {job_id}, {stream}"))
    )
    return page(SERVICE, f"Job {job_id}: {d['name']}", body, nav=NAV, master=master, principal=principal)
