"""The web UI's task pages as pure functions: the task itself, its sandbox listing and the
pailer (an in-browser ``tail -f`` of stdout, stderr or any sandbox file).

``task`` is the task's ``/state`` entry (with its framework's name as ``framework_name`` when
the shell knows it), ``agent`` its agent's (``None`` when the master no longer
knows it); sandbox entries are the agent's ``/files/browse`` FileInfo objects. The shell
(``master.webui.handlers``) asks the agent; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from master.webui.html import (
    Html,
    agent_link,
    definitions,
    duration,
    framework_link,
    join,
    link,
    page,
    resources_text,
    section,
    state_badge,
    table,
    tag,
    timestamp,
)
from master.webui.model import task_outcome
from master.webui.pages import logs_links, task_url
from protocol.ids import sandbox_path
from protocol.usage import usage_from_json, usage_text

__pure__ = True


def _task_header(task: Mapping[str, Any], agent: Mapping[str, Any] | None) -> Html:
    fid, tid = str(task.get("framework_id", "")), str(task.get("id", ""))
    return definitions(
        [
            ("task", link(task_url(fid, tid), tid)),
            ("state", state_badge(task.get("state", ""))),
            ("framework", framework_link(fid, task.get("framework_name"))),
            ("agent", agent_link(str(task.get("slave_id", "")),
                                 f"{task.get('slave_id', '')} ({agent.get('hostname', '')})" if agent else None)),
            ("logs", logs_links(fid, tid)),
        ]
    )


def _usage(task: Mapping[str, Any]) -> str:
    """What the task uses (live: the agent's last report) or used (its final figures)."""
    u = usage_from_json(task.get("usage"))
    if u is None:
        return "-"
    return usage_text(u, running=str(task.get("state", "")) in ("TASK_RUNNING", "TASK_STARTING", "TASK_KILLING"))


def task_page(task: Mapping[str, Any], agent: Mapping[str, Any] | None, *, now: float | None = None) -> Html:
    """One task: what it is, where it runs, how it went (exit code, last message, when it ran
    and for how long; ``now`` for a task still running), its status history and its logs."""
    fid, tid = str(task.get("framework_id", "")), str(task.get("id", ""))
    outcome = task_outcome(task, now)
    ran = duration(outcome.duration)
    if outcome.duration is not None and outcome.ended is None:
        ran += " so far"
    facts = definitions(
        [
            ("id", tid),
            ("name", task.get("name", "") or "-"),
            ("state", state_badge(task.get("state", ""))),
            ("exit code", outcome.exit_code if outcome.exit_code is not None else "-"),
            ("message", outcome.message or "-"),
            ("started", timestamp(outcome.started)),
            ("ended", timestamp(outcome.ended)),
            ("duration", ran),
            ("framework", framework_link(fid, task.get("framework_name"))),
            ("agent", agent_link(str(task.get("slave_id", "")),
                                 f"{task.get('slave_id', '')} ({agent.get('hostname', '')})" if agent else None)),
            ("executor", task.get("executor_id") or "-"),
            ("role", task.get("role", "") or "-"),
            ("resources", resources_text(task.get("resources"))),
            ("usage", _usage(task)),
        ]
    )
    logs = tag("p", link(task_url(fid, tid, "files", "stdout"), "stdout", ), " · ",
               link(task_url(fid, tid, "files", "stderr"), "stderr"), " (live, like tail -f) · download ",
               tag("a", "stdout", href=task_url(fid, tid, "files", "download", query={"path": "stdout"}),
                   download=True),
               " ", tag("a", "stderr", href=task_url(fid, tid, "files", "download", query={"path": "stderr"}),
                        download=True),
               " · ", link(task_url(fid, tid, "files"), "browse the sandbox"), cls="logs", id="task-logs")
    statuses = [(state_badge(s.get("state", "")), timestamp(s.get("timestamp")), s.get("message") or "",
                 s.get("reason") or "")
                for s in reversed(task.get("statuses") or [])]
    body = [
        facts,
        section("Logs", logs),
        section("Status updates (newest first)",
                table(("state", "at", "message", "reason"), statuses, empty="no status update yet")),
    ]
    return page(f"Task {tid}", join(body), subtitle=tag("p", task.get("name", ""), cls="note"))


def browse_page(task: Mapping[str, Any], agent: Mapping[str, Any] | None, sub: str,
                entries: Sequence[Mapping[str, Any]] | None, error: str | None) -> Html:
    """A sandbox directory listing; ``entries`` are the agent's ``/files/browse`` FileInfo objects
    (their ``path`` relative to the agent's sandbox root, i.e. ``<fid>/<tid>/...``)."""
    fid, tid = str(task.get("framework_id", "")), str(task.get("id", ""))
    prefix = sandbox_path(fid, tid, str(task.get("executor_id") or "")) + "/"
    crumbs = [link(task_url(fid, tid, "files"), "sandbox")]
    acc = ""
    for part in [p for p in sub.split("/") if p]:
        acc = f"{acc}/{part}" if acc else part
        crumbs.append(link(task_url(fid, tid, "files", query={"path": acc}), part))
    body: list[object] = [_task_header(task, agent), tag("p", join(crumbs, " / "))]
    if error is not None:
        body.append(tag("p", error, cls="error"))
    else:
        rows = []
        for e in sorted(entries or [], key=lambda e: (not str(e.get("mode", "")).startswith("d"), str(e.get("path")))):
            rel = str(e.get("path", "")).removeprefix(prefix).lstrip("/")
            name = rel.rsplit("/", 1)[-1] or rel
            is_dir = str(e.get("mode", "")).startswith("d")
            if is_dir:
                target = link(task_url(fid, tid, "files", query={"path": rel}), name + "/")
                actions: object = "-"
            else:
                target = link(task_url(fid, tid, "files", "view", query={"path": rel}), name)
                actions = link(task_url(fid, tid, "files", "download", query={"path": rel}), "download")
            size = e.get("size", 0)
            rows.append((e.get("mode", ""), target, "-" if is_dir else f"{size} B",
                         timestamp(e.get("mtime")), e.get("uid", ""), actions))
        body.append(table(("mode", "name", "size", "modified", "owner", ""), rows, empty="empty directory"))
    return page(f"Sandbox of {tid}", join(body))


def log_page(task: Mapping[str, Any], agent: Mapping[str, Any] | None, sub: str, data: str | None,
             start: int, end: int, error: str | None, *, chunk: int = 64 * 1024) -> Html:
    """The pailer: the tail of one sandbox file (``data`` is bytes ``start..end`` of it) in
    ``<pre id="log">``; the page's script appends what the file grows by, asking the ``read``
    route from ``data-offset`` (kept current) and at once again after a whole ``chunk``."""
    fid, tid = str(task.get("framework_id", "")), str(task.get("id", ""))
    body: list[object] = [_task_header(task, agent)]
    if error is not None:
        body.append(tag("p", error, cls="error"))
    else:
        src = task_url(fid, tid, "files", "read", query={"path": sub})
        note = f"bytes {start}-{end} when the page was made" + (
            " (earlier output cut: download for all of it)" if start else "")
        body += [
            tag("div",
                tag("a", f"download {sub}", href=task_url(fid, tid, "files", "download", query={"path": sub}),
                    download=True),
                # enabled by the page's script: without it there is nothing to follow with
                tag("label", Html('<input type="checkbox" id="follow" checked disabled> '), "follow"),
                tag("span", note, id="pailer-status"),
                cls="pailer-bar note"),
            # the newline after <pre> is eaten by the HTML parser, so a log's own first one is kept
            tag("pre", Html("\n"), data or "", cls="log", id="log", data_src=src, data_offset=end,
                data_chunk=chunk),
        ]
    return page(f"{sub} of {tid}", join(body))
