"""The web UI's pages as pure functions of the operator views.

Inputs are the plain data the operator endpoints serve: ``state`` is ``OperatorApi.state_dict()``
(``/state``), ``snapshot`` is ``/metrics/snapshot``, ``offers`` the ``/api/v1/offers`` list and
``roles`` the role rows ``master.webui.handlers`` builds from GET_ROLES/GET_QUOTA. Each function
returns a whole page (``Html``) or ``None`` for an unknown id (the shell answers 404).

Vocabulary on every resource table: *total* is what the reachable agents have, *allocated* what
running tasks hold, *offered* what sits in outstanding offers (not in use: a framework may still
decline it) and *idle* the rest. Offered and allocated are never added together.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from master.webui.html import (
    RESOURCE_NAMES,
    Html,
    agent_link,
    amount,
    definitions,
    duration,
    error_page,
    external_link,
    framework_link,
    join,
    link,
    number,
    page,
    path,
    resources_text,
    section,
    state_badge,
    table,
    tag,
    timestamp,
)

__pure__ = True

State = Mapping[str, Any]


# --- view models ----------------------------------------------------------------------------------


def resource_split(
    total: Mapping[str, Any], allocated: Mapping[str, Any], offered: Mapping[str, Any]
) -> list[tuple[str, float, float, float, float]]:
    """``(name, total, allocated, offered, idle)`` for cpus, mem, disk, gpus; idle is what is
    neither allocated nor offered (never below zero)."""
    rows = []
    for name in RESOURCE_NAMES:
        t, a, o = (_scalar(d, name) for d in (total, allocated, offered))
        rows.append((name, t, a, o, max(0.0, t - a - o)))
    return rows


def _scalar(d: Mapping[str, Any], name: str) -> float:
    v = d.get(name, 0.0)
    return float(v) if isinstance(v, int | float) else 0.0


def sum_resources(items: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    out = dict.fromkeys(RESOURCE_NAMES, 0.0)
    for res in items:
        for name in RESOURCE_NAMES:
            out[name] += _scalar(res, name)
    return out


def all_frameworks(state: State) -> Iterator[tuple[Mapping[str, Any], bool]]:
    """Every framework with whether it is completed (torn down / failed over for good)."""
    for fw in state.get("frameworks", ()):
        yield fw, False
    for fw in state.get("completed_frameworks", ()):
        yield fw, True


def all_tasks(state: State) -> Iterator[Mapping[str, Any]]:
    """Every task the master knows: live, unreachable and completed, of every framework."""
    for task, _ in tasks_with_kind(state):
        yield task


def tasks_with_kind(state: State) -> Iterator[tuple[Mapping[str, Any], str]]:
    """Every task with the list it is in: ``tasks``, ``unreachable_tasks`` or ``completed_tasks``."""
    for fw, _ in all_frameworks(state):
        for kind in ("tasks", "unreachable_tasks", "completed_tasks"):
            for task in fw.get(kind, ()):
                yield task, kind


def find_framework(state: State, framework_id: str) -> tuple[Mapping[str, Any], bool] | None:
    for fw, completed in all_frameworks(state):
        if fw.get("id") == framework_id:
            return fw, completed
    return None


def find_agent(state: State, agent_id: str) -> Mapping[str, Any] | None:
    for ag in state.get("slaves", ()):
        if ag.get("id") == agent_id:
            return ag
    return None


def find_task(state: State, framework_id: str, task_id: str) -> Mapping[str, Any] | None:
    found = find_framework(state, framework_id)
    if found is None:
        return None
    fw, _ = found
    for kind in ("tasks", "unreachable_tasks", "completed_tasks"):
        for t in fw.get(kind, ()):
            if t.get("id") == task_id:
                return t
    return None


def task_states(snapshot: Mapping[str, float]) -> list[tuple[str, int]]:
    """``[("TASK_RUNNING", 3), ...]`` from the ``master/tasks_<state>`` metrics, non-zero first."""
    out = [
        ("TASK_" + key.removeprefix("master/tasks_").upper(), int(v))
        for key, v in snapshot.items()
        if key.startswith("master/tasks_")
    ]
    return sorted(out, key=lambda kv: (kv[1] == 0, kv[0]))


def agent_label(agent: Mapping[str, Any]) -> str:
    if agent.get("active"):
        return "draining" if agent.get("phase") == "DRAINING" else "active"
    return str(agent.get("phase", "inactive")).lower()


def framework_label(fw: Mapping[str, Any], completed: bool) -> str:
    if completed:
        return "completed"
    if fw.get("active"):
        return "active"
    return "recovered" if fw.get("recovered") else "disconnected"


# --- shared fragments -----------------------------------------------------------------------------


def split_table(rows: Sequence[tuple[str, float, float, float, float]]) -> Html:
    return table(
        ("resource", "total", "allocated (tasks)", "offered (not in use)", "idle"),
        [(name, *(amount(name, v) for v in values)) for name, *values in rows],
        cls="resources",
    )


def tasks_table(tasks: Iterable[Mapping[str, Any]], *, show_framework: bool = True,
                show_agent: bool = True) -> Html:
    headers: list[str] = ["task", "name", "state"]
    if show_framework:
        headers.append("framework")
    if show_agent:
        headers.append("agent")
    headers += ["role", "resources", "last update", "sandbox"]
    rows = []
    for t in sorted(tasks, key=lambda t: (str(t.get("framework_id")), str(t.get("id")))):
        fid, tid = str(t.get("framework_id", "")), str(t.get("id", ""))
        row: list[object] = [tid, t.get("name", ""), state_badge(t.get("state", ""))]
        if show_framework:
            row.append(framework_link(fid))
        if show_agent:
            row.append(agent_link(str(t.get("slave_id", ""))))
        row += [
            t.get("role", ""),
            resources_text(t.get("resources")),
            timestamp(_last_update(t)),
            join(
                (
                    link(path("ui", "tasks", fid, tid, "files"), "files"),
                    link(path("ui", "tasks", fid, tid, "files", "stdout"), "stdout"),
                    link(path("ui", "tasks", fid, tid, "files", "stderr"), "stderr"),
                ),
                " ",
            ),
        ]
        rows.append(row)
    return table(headers, rows, empty="no tasks")


def offers_table(offers: Iterable[Mapping[str, Any]], *, show_framework: bool = True) -> Html:
    headers = ["offer", "framework", "agent", "hostname", "role", "resources", "revocable", "age"]
    if not show_framework:
        headers.remove("framework")
    rows = []
    for o in offers:
        row: list[object] = [o.get("id", "")]
        if show_framework:
            row.append(framework_link(str(o.get("framework_id", ""))))
        row += [
            agent_link(str(o.get("agent_id", ""))),
            o.get("hostname", ""),
            o.get("role", ""),
            resources_text(o.get("resources")),
            resources_text(o.get("revocable_resources")),
            duration(o.get("age_secs")),
        ]
        rows.append(row)
    return table(headers, rows, empty="no outstanding offers")


# --- pages ----------------------------------------------------------------------------------------


def summary_page(state: State, snapshot: Mapping[str, float], offers: Sequence[Mapping[str, Any]]) -> Html:
    total = {n: snapshot.get(f"master/{n}_total", 0.0) for n in RESOURCE_NAMES}
    used = {n: snapshot.get(f"master/{n}_used", 0.0) for n in RESOURCE_NAMES}
    offered = sum_resources(o.get("resources", {}) for o in offers)
    agents = state.get("slaves", [])
    active = sum(1 for a in agents if a.get("active"))
    fws = state.get("frameworks", [])
    master = definitions(
        [
            ("master id", state.get("id", "")),
            ("version", state.get("version", "")),
            ("leader", state.get("leader", "")),
            ("hostname", state.get("hostname", "")),
            ("started", timestamp(state.get("start_time"))),
            ("uptime", duration(snapshot.get("master/uptime_secs"))),
            ("registry epoch", state.get("epoch", "")),
        ]
    )
    counts = definitions(
        [
            (link("/ui/agents", "agents"), f"{active} active, {len(agents) - active} inactive"
             + (f", {len(state.get('recovered_slaves', []))} recovered (not back yet)"
                if state.get("recovered_slaves") else "")),
            (link("/ui/frameworks", "frameworks"),
             f"{sum(1 for f in fws if f.get('active'))} active, "
             f"{sum(1 for f in fws if not f.get('active'))} inactive, "
             f"{len(state.get('completed_frameworks', []))} completed"),
            (link("/ui/offers", "outstanding offers"), len(offers)),
        ]
    )
    states = task_states(snapshot)
    task_rows = [(link(path("ui", "tasks", query={"state": s}), s), n) for s, n in states if n]
    revocable = [
        (n, amount(n, snapshot.get(f"master/{n}_revocable_total", 0.0)),
         amount(n, snapshot.get(f"master/{n}_revocable_used", 0.0)))
        for n in RESOURCE_NAMES
        if snapshot.get(f"master/{n}_revocable_total", 0.0)
    ]
    body = [
        section("Master", master),
        section("Cluster", counts),
        section(
            "Resources",
            tag("p", "Allocated resources are held by tasks; offered resources sit in outstanding "
                     "offers and are not in use. Idle is neither.", cls="note"),
            split_table(resource_split(total, used, offered)),
        ),
    ]
    if revocable:
        body.append(section("Revocable (oversubscribed) resources",
                            table(("resource", "total", "allocated"), revocable)))
    body.append(section("Tasks by state", table(("state", "tasks"), task_rows, empty="no tasks yet")))
    return page("Cluster summary", join(body))


def agents_page(state: State) -> Html:
    rows = []
    for a in state.get("slaves", []):
        res, used, off = a.get("resources", {}), a.get("used_resources", {}), a.get("offered_resources", {})
        rows.append(
            (
                agent_link(str(a.get("id", ""))),
                f"{a.get('hostname', '')}:{a.get('port', '')}",
                agent_label(a),
                *(f"{amount(n, _scalar(used, n))} / {amount(n, _scalar(res, n))}" for n in ("cpus", "mem", "gpus")),
                resources_text(off),
                _attributes_text(a.get("attributes", {})),
                timestamp(a.get("registered_time")),
            )
        )
    body = [
        tag("p", "Resources shown as allocated / total; offered resources are listed apart.", cls="note"),
        table(
            ("agent", "address", "status", "cpus", "mem", "gpus", "offered", "attributes", "registered"),
            rows, empty="no agents",
        ),
    ]
    recovered = state.get("recovered_slaves", [])
    if recovered:
        body.append(section(
            "Recovered, not re-registered yet",
            table(("agent", "address"), [(a.get("id", ""), f"{a.get('hostname')}:{a.get('port')}") for a in recovered]),
        ))
    return page("Agents", join(body))


def _attributes_text(attrs: Mapping[str, Any]) -> str:
    return "; ".join(f"{k}:{v}" for k, v in sorted(attrs.items())) or "-"


def agent_page(state: State, agent_id: str) -> Html | None:
    a = find_agent(state, agent_id)
    if a is None:
        return None
    res, used, off = a.get("resources", {}), a.get("used_resources", {}), a.get("offered_resources", {})
    reserved = a.get("reserved_resources", {})
    facts = definitions(
        [
            ("id", a.get("id", "")),
            ("address", f"{a.get('hostname', '')}:{a.get('port', '')}"),
            ("status", f"{agent_label(a)} ({a.get('phase', '')})"),
            ("version", a.get("version", "")),
            ("registered", timestamp(a.get("registered_time"))),
            ("re-registered", timestamp(a.get("reregistered_time"))),
            ("capabilities", ", ".join(a.get("capabilities", [])) or "-"),
            ("all resources", resources_text(res)),
            ("revocable (slack)", resources_text(a.get("revocable_resources"))),
        ]
    )
    attrs = table(("attribute", "value"), sorted(a.get("attributes", {}).items()), empty="no attributes")
    reserved_rows = [(role, resources_text(r)) for role, r in sorted(reserved.items())]
    tasks = [(t, kind) for t, kind in tasks_with_kind(state) if t.get("slave_id") == agent_id]
    live = [t for t, kind in tasks if kind != "completed_tasks"]
    done = [t for t, kind in tasks if kind == "completed_tasks"]
    body = [
        facts,
        section("Resources", split_table(resource_split(res, used, off))),
        section("Reservations", table(("role", "reserved"), reserved_rows, empty="no reservations")),
        section("Attributes", attrs),
        section(f"Active tasks ({len(live)})", tasks_table(live, show_agent=False)),
        section(f"Completed tasks ({len(done)})", tasks_table(done, show_agent=False)),
    ]
    return page(f"Agent {agent_id}", join(body), subtitle=tag("p", a.get("hostname", ""), cls="note"))


def frameworks_page(state: State) -> Html:
    rows = []
    for fw, completed in all_frameworks(state):
        rows.append(
            (
                framework_link(str(fw.get("id", ""))),
                fw.get("name", ""),
                ", ".join(fw.get("roles", [])) or "*",
                framework_label(fw, completed),
                fw.get("user", ""),
                resources_text(fw.get("used_resources")),
                resources_text(fw.get("offered_resources")),
                len(fw.get("tasks", [])),
                len(fw.get("completed_tasks", [])),
                timestamp(fw.get("registered_time")),
            )
        )
    return page(
        "Frameworks",
        table(
            ("framework", "name", "roles", "status", "user", "allocated", "offered", "active tasks",
             "completed tasks", "registered"),
            rows, empty="no frameworks",
        ),
    )


def framework_page(state: State, framework_id: str) -> Html | None:
    found = find_framework(state, framework_id)
    if found is None:
        return None
    fw, completed = found
    facts = definitions(
        [
            ("id", fw.get("id", "")),
            ("name", fw.get("name", "")),
            ("status", framework_label(fw, completed)),
            ("user", fw.get("user", "")),
            ("principal", fw.get("principal") or "-"),
            ("roles", ", ".join(fw.get("roles", [])) or "*"),
            ("capabilities", ", ".join(fw.get("capabilities", [])) or "-"),
            ("hostname", fw.get("hostname") or "-"),
            ("web UI", external_link(str(fw.get("webui_url", ""))) if fw.get("webui_url") else "-"),
            ("checkpoint", "yes" if fw.get("checkpoint") else "no"),
            ("failover timeout", duration(fw.get("failover_timeout"))),
            ("registered", timestamp(fw.get("registered_time"))),
            ("re-registered", timestamp(fw.get("reregistered_time"))),
            ("unregistered", timestamp(fw.get("unregistered_time"))),
        ]
    )
    used, offered = fw.get("used_resources", {}), fw.get("offered_resources", {})
    res_rows = [(n, amount(n, _scalar(used, n)), amount(n, _scalar(offered, n))) for n in RESOURCE_NAMES]
    offers = [
        {"id": o.get("id"), "agent_id": o.get("slave_id"), "role": (o.get("allocation_info") or {}).get("role"),
         "resources": o.get("resources")}
        for o in fw.get("offers", [])
    ]
    live = list(fw.get("tasks", []))
    unreachable = list(fw.get("unreachable_tasks", []))
    done = list(fw.get("completed_tasks", []))
    body = [
        facts,
        section("Resources", table(("resource", "allocated (tasks)", "offered (not in use)"), res_rows)),
        section(f"Active tasks ({len(live)})", tasks_table(live, show_framework=False)),
    ]
    if unreachable:
        body.append(section(f"Unreachable tasks ({len(unreachable)})", tasks_table(unreachable, show_framework=False)))
    body += [
        section(f"Completed tasks ({len(done)})", tasks_table(done, show_framework=False)),
        section(f"Outstanding offers ({len(offers)})", _framework_offers_table(offers)),
    ]
    return page(f"Framework {fw.get('name', '')}", join(body), subtitle=tag("p", framework_id, cls="note"))


def _framework_offers_table(offers: Sequence[Mapping[str, Any]]) -> Html:
    return table(
        ("offer", "agent", "role", "resources"),
        [(o["id"], agent_link(str(o["agent_id"])), o["role"], resources_text(o["resources"])) for o in offers],
        empty="no outstanding offers",
    )


def tasks_page(state: State, state_filter: str | None, limit: int = 1000) -> Html:
    tasks = list(all_tasks(state))
    present = sorted({str(t.get("state", "")) for t in tasks})
    chosen = [t for t in tasks if state_filter in (None, "", t.get("state"))]
    filters = tag(
        "p",
        "state: ",
        join(
            [tag("strong", "all") if not state_filter else link("/ui/tasks", "all")]
            + [
                tag("strong", s) if s == state_filter else link(path("ui", "tasks", query={"state": s}), s)
                for s in present
            ],
            " ",
        ),
        cls="filters",
    )
    title = f"Tasks ({state_filter})" if state_filter else "Tasks"
    shown: list[object] = [filters]
    if len(chosen) > limit:
        shown.append(tag("p", f"Showing {limit} of {len(chosen)} tasks (newest updates first); "
                              "filter by state to narrow the list.", cls="note"))
        chosen = sorted(chosen, key=_last_update, reverse=True)[:limit]
    shown.append(tasks_table(chosen))
    return page(title, join(shown))


def _last_update(task: Mapping[str, Any]) -> float:
    statuses = task.get("statuses") or []
    ts = statuses[-1].get("timestamp") if statuses else None
    return float(ts) if isinstance(ts, int | float) else 0.0


def offers_page(offers: Sequence[Mapping[str, Any]]) -> Html:
    note = tag(
        "p",
        "Outstanding offers are resources the master has offered to a framework that it has not "
        "used or declined yet. They are not in use by tasks.",
        cls="note",
    )
    total = sum_resources(o.get("resources", {}) for o in offers)
    return page(f"Outstanding offers ({len(offers)})",
                join([note, tag("p", "offered in all: ", resources_text(total)), offers_table(offers)]))


def roles_page(roles: Sequence[Mapping[str, Any]]) -> Html:
    rows = [
        (
            r["name"],
            number(r.get("weight", 1.0)),
            resources_text(r.get("guarantee")),
            resources_text(r.get("limit")) if r.get("limit") is not None else "no limit",
            resources_text(r.get("allocated")),
            resources_text(r.get("offered")),
            join((framework_link(f) for f in r.get("frameworks", [])), " ") or "-",
        )
        for r in roles
    ]
    return page(
        "Roles",
        table(("role", "weight", "quota guarantee", "quota limit", "allocated", "offered", "frameworks"), rows,
              empty="no roles"),
    )


# --- sandbox --------------------------------------------------------------------------------------


def _task_header(task: Mapping[str, Any], agent: Mapping[str, Any] | None) -> Html:
    fid, tid = str(task.get("framework_id", "")), str(task.get("id", ""))
    return definitions(
        [
            ("task", tid),
            ("state", state_badge(task.get("state", ""))),
            ("framework", framework_link(fid)),
            ("agent", agent_link(str(task.get("slave_id", "")),
                                 f"{task.get('slave_id', '')} ({agent.get('hostname', '')})" if agent else None)),
            ("logs", join((link(path("ui", "tasks", fid, tid, "files", "stdout"), "stdout"),
                           link(path("ui", "tasks", fid, tid, "files", "stderr"), "stderr"),
                           link(path("ui", "tasks", fid, tid, "files"), "sandbox")), " ")),
        ]
    )


def browse_page(task: Mapping[str, Any], agent: Mapping[str, Any] | None, sub: str,
                entries: Sequence[Mapping[str, Any]] | None, error: str | None) -> Html:
    """A sandbox directory listing; ``entries`` are the agent's ``/files/browse`` FileInfo objects
    (their ``path`` relative to the agent's sandbox root, i.e. ``<fid>/<tid>/...``)."""
    fid, tid = str(task.get("framework_id", "")), str(task.get("id", ""))
    prefix = f"{fid}/{tid}/"
    crumbs = [link(path("ui", "tasks", fid, tid, "files"), "sandbox")]
    acc = ""
    for part in [p for p in sub.split("/") if p]:
        acc = f"{acc}/{part}" if acc else part
        crumbs.append(link(path("ui", "tasks", fid, tid, "files", query={"path": acc}), part))
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
                target = link(path("ui", "tasks", fid, tid, "files", query={"path": rel}), name + "/")
                actions: object = "-"
            else:
                target = link(path("ui", "tasks", fid, tid, "files", "view", query={"path": rel}), name)
                actions = link(path("ui", "tasks", fid, tid, "files", "download", query={"path": rel}), "download")
            size = e.get("size", 0)
            rows.append((e.get("mode", ""), target, "-" if is_dir else f"{size} B",
                         timestamp(e.get("mtime")), e.get("uid", ""), actions))
        body.append(table(("mode", "name", "size", "modified", "owner", ""), rows, empty="empty directory"))
    return page(f"Sandbox of {tid}", join(body))


def log_page(task: Mapping[str, Any], agent: Mapping[str, Any] | None, sub: str, data: str | None,
             start: int, end: int, error: str | None) -> Html:
    """The tail of one sandbox file (``data`` is bytes ``start..end`` of it); the script on the
    page appends what the file grows by from ``end`` through the ``read`` JSON endpoint."""
    fid, tid = str(task.get("framework_id", "")), str(task.get("id", ""))
    body: list[object] = [_task_header(task, agent)]
    if error is not None:
        body.append(tag("p", error, cls="error"))
    else:
        src = path("ui", "tasks", fid, tid, "files", "read", query={"path": sub})
        note = f"bytes {start}-{end} of {end}" + (" (earlier output cut, download for all of it)" if start else "")
        body += [
            tag("p", note, " ", link(path("ui", "tasks", fid, tid, "files", "download", query={"path": sub}),
                                     "download"), " ",
                # enabled by the page's script: without it there is nothing to follow with
                tag("label", Html('<input type="checkbox" id="follow" checked disabled> '), "follow"),
                cls="note"),
            # the newline after <pre> is eaten by the HTML parser, so a log's own first one is kept
            tag("pre", Html("\n"), data or "", cls="log", id="log", data_src=src, data_offset=end),
        ]
    return page(f"{sub} of {tid}", join(body))


def not_found_page(what: str, ident: str) -> Html:
    return error_page(404, "Not found", f"No {what} {ident!r} is known to this master.")

