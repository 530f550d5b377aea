"""The web UI's cluster pages as pure functions of the operator views (the task, sandbox and
pailer pages are in ``master.webui.sandbox``).

Inputs are the plain data the operator endpoints serve, or the part of it a page shows: ``state``
is shaped like ``OperatorApi.state_dict()`` (``/state``) but holds only the keys the page reads,
``snapshot`` is ``/metrics/snapshot``, ``offers`` the ``/api/v1/offers`` list and ``roles`` the
role rows ``master.webui.handlers`` builds from GET_ROLES/GET_QUOTA. Each function returns a whole
page (``Html``) or ``None`` for an unknown id (the shell answers 404).

Vocabulary on every resource table: *total* is what the reachable agents have, *allocated* what
running tasks hold, *offered* what sits in outstanding offers (not in use: a framework may still
decline it) and *idle* the rest. Offered and allocated are never added together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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
from master.webui.model import (
    RoleNode,
    State,
    active_and_completed,
    agent_label,
    all_frameworks,
    all_tasks,
    empty_offers,
    find_agent,
    find_framework,
    framework_label,
    framework_names,
    last_update,
    maintenance_rows,
    resource_split,
    role_tree,
    sum_resources,
    task_states,
    tasks_with_kind,
)
from master.webui.model import scalar as _scalar
from protocol.version import AGORA_VERSION

__pure__ = True

HOME_TASKS = 25  # newest active / completed tasks on the summary page


def task_url(framework_id: str, task_id: str, *rest: str, query: Mapping[str, object] | None = None) -> str:
    return path("ui", "tasks", framework_id, task_id, *rest, query=query)


def task_link(task: Mapping[str, Any], text: object | None = None) -> Html:
    """A link to the task's page (a table cuts a long id short: the whole one on hover)."""
    tid = str(task.get("id", ""))
    return tag("a", tid if text is None else text, href=task_url(str(task.get("framework_id", "")), tid), title=tid)


def logs_links(framework_id: str, task_id: str) -> Html:
    """stdout / stderr (the pailer), their downloads, and the sandbox: a task's logs in one click."""
    f = (framework_id, task_id, "files")
    return tag("span", join((
        link(task_url(*f, "stdout"), "stdout"),
        link(task_url(*f, "stderr"), "stderr"),
        tag("a", "⤓stdout", href=task_url(*f, "download", query={"path": "stdout"}), title="download stdout"),
        tag("a", "⤓stderr", href=task_url(*f, "download", query={"path": "stderr"}), title="download stderr"),
        link(task_url(*f), "sandbox"),
    ), " "), cls="logs")


# --- shared fragments -----------------------------------------------------------------------------


def split_table(rows: Sequence[tuple[str, float, float, float, float]]) -> Html:
    return table(
        ("resource", "total", "allocated (tasks)", "offered (not in use)", "idle"),
        [(name, *(amount(name, v) for v in values)) for name, *values in rows],
        cls="resources",
    )


def tasks_table(tasks: Iterable[Mapping[str, Any]], *, show_framework: bool = True,
                show_agent: bool = True, newest_first: bool = False,
                names: Mapping[str, str] | None = None) -> Html:
    """One row per task (sorted by framework and id, or as given with ``newest_first``); the
    task id links to the task's page, the framework shows its name (``names``: id -> name; the
    id on hover) and the last column links to its logs."""
    headers: list[str] = ["task", "name", "state"]
    if show_framework:
        headers.append("framework")
    if show_agent:
        headers.append("agent")
    headers += ["role", "resources", "last update", "logs"]
    rows = []
    ordered = list(tasks) if newest_first else sorted(tasks, key=lambda t: (str(t.get("framework_id")),
                                                                             str(t.get("id"))))
    for t in ordered:
        fid, tid = str(t.get("framework_id", "")), str(t.get("id", ""))
        row: list[object] = [task_link(t), tag("span", t.get("name", ""), cls="wrap"), state_badge(t.get("state", ""))]
        if show_framework:
            row.append(framework_link(fid, (names or {}).get(fid)))
        if show_agent:
            row.append(agent_link(str(t.get("slave_id", ""))))
        row += [
            t.get("role", ""),
            resources_text(t.get("resources")),
            timestamp(last_update(t)),
            logs_links(fid, tid),
        ]
        rows.append(row)
    return table(headers, rows, empty="no tasks")


def offers_table(offers: Iterable[Mapping[str, Any]], *, show_framework: bool = True,
                 names: Mapping[str, str] | None = None) -> Html:
    headers = ["offer", "framework", "agent", "hostname", "role", "resources", "revocable", "kind", "age"]
    if not show_framework:
        headers.remove("framework")
    rows = []
    for o in offers:
        row: list[object] = [tag("span", o.get("id", ""), cls="id", title=o.get("id", ""))]
        if show_framework:
            fid = str(o.get("framework_id", ""))
            row.append(framework_link(fid, (names or {}).get(fid)))
        row += [
            agent_link(str(o.get("agent_id", ""))),
            o.get("hostname", ""),
            o.get("role", ""),
            resources_text(o.get("resources")),
            resources_text(o.get("revocable_resources")),
            "lease" if o.get("reusable") else ("classic" if o.get("reusable") is False else "-"),
            duration(o.get("age_secs")),
        ]
        rows.append(row)
    return table(headers, rows, empty="no outstanding offers")


# --- pages ----------------------------------------------------------------------------------------


def summary_page(state: State, snapshot: Mapping[str, float], offers: Sequence[Mapping[str, Any]],
                 limit: int = HOME_TASKS) -> Html:
    """The home page: master, cluster counts, resources total / allocated / offered / idle,
    tasks by state, and the newest ``limit`` active and completed tasks."""
    total = {n: snapshot.get(f"master/{n}_total", 0.0) for n in RESOURCE_NAMES}
    used = {n: snapshot.get(f"master/{n}_used", 0.0) for n in RESOURCE_NAMES}
    offered = sum_resources(o.get("resources", {}) for o in offers)
    agents = state.get("slaves", [])
    active = sum(1 for a in agents if a.get("active"))
    fws = state.get("frameworks", [])
    master = definitions(
        [
            ("master id", state.get("id", "")),
            ("version", f"Agora {AGORA_VERSION} (Mesos API {state.get('version', '')})"),
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
            (link("/ui/offers", "outstanding offers"), offers_count_text(offers)),
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
    live, done = active_and_completed(state)
    for title, tasks in (("Active tasks", live), ("Completed tasks", done)):
        more = (tag("p", f"the newest {limit} of {len(tasks)}: ", link("/ui/tasks", "all tasks"), cls="note")
                if len(tasks) > limit else "")
        body.append(section(f"{title} ({len(tasks)})", more,
                            tasks_table(tasks[:limit], newest_first=True, names=framework_names(state))))
    return page("Cluster summary", join(body))


def offers_count_text(offers: Sequence[Mapping[str, Any]]) -> str:
    """How many outstanding offers have something in them, and apart, the reusable offers whose
    tasks use all they hold (they are outstanding, but offer nothing: the offered columns read 0)."""
    empty = empty_offers(offers)
    if not empty:
        return str(len(offers))
    return (f"{len(offers) - empty} with resources; {empty} more reusable "
            f"{'offer' if empty == 1 else 'offers'} fully in use by their tasks")


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
    # scalars as users write them: host_index:1, not the 1.0 of /state
    return "; ".join(
        f"{k}:{int(v) if isinstance(v, float) and v.is_integer() else v}" for k, v in sorted(attrs.items())
    ) or "-"


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
            ("status", f"{agent_label(a)} ({a.get('phase', '')})"
                       + (f": {a.get('drain_reason')}" if a.get("draining") and a.get("drain_reason") else "")),
            ("maintenance", operator_call_form(
                agent_id, "REACTIVATE_AGENT" if agent_label(a) == "draining" or a.get("draining") else "DRAIN_AGENT")),
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
        section(f"Active tasks ({len(live)})", tasks_table(live, show_agent=False, names=framework_names(state))),
        section(f"Completed tasks ({len(done)})", tasks_table(done, show_agent=False, names=framework_names(state))),
    ]
    return page(f"Agent {agent_id}", join(body), subtitle=tag("p", a.get("hostname", ""), cls="note"))


def frameworks_page(state: State) -> Html:
    rows = []
    for fw, completed in all_frameworks(state):
        rows.append(
            (
                framework_link(str(fw.get("id", ""))),
                fw.get("name", ""),
                ", ".join(fw.get("roles") or [fw.get("role") or "*"]),
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
            ("roles", ", ".join(fw.get("roles") or [fw.get("role") or "*"])),
            ("capabilities", ", ".join(fw.get("capabilities", [])) or "-"),
            ("hostname", fw.get("hostname") or "-"),
            ("web UI", external_link(str(fw.get("webui_url", ""))) if fw.get("webui_url") else "-"),
            ("checkpoint", "yes" if fw.get("checkpoint") else "no"),
            ("failover timeout", duration(fw.get("failover_timeout"))),
            ("registered", timestamp(fw.get("registered_time"))),
            ("re-registered", timestamp(fw.get("reregistered_time"))),
            ("unregistered", timestamp(fw.get("unregistered_time"))),
            # why a connected framework holding no offer gets none (e.g. GPU agents only)
            *([("why no offers", str(fw["offers_reason"]))] if fw.get("offers_reason") else []),
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
        chosen = sorted(chosen, key=last_update, reverse=True)[:limit]
    shown.append(tasks_table(chosen, names=framework_names(state)))
    return page(title, join(shown))


def offers_page(offers: Sequence[Mapping[str, Any]], names: Mapping[str, str] | None = None) -> Html:
    note = tag(
        "p",
        "Outstanding offers are resources the master has offered to a framework that it has not "
        "used or declined yet. They are not in use by tasks. A reusable offer (kind lease) stays "
        "outstanding while its framework's tasks run in it: it holds only what they leave unused, "
        "possibly nothing.",
        cls="note",
    )
    total = sum_resources(o.get("resources", {}) for o in offers)
    return page(f"Outstanding offers ({len(offers)})",
                join([note, tag("p", "offered in all: ", resources_text(total), f" ({offers_count_text(offers)})"),
                      offers_table(offers, names=names)]))


def roles_page(roles: Sequence[Mapping[str, Any]], names: Mapping[str, str] | None = None) -> Html:
    """The role hierarchy as a tree (subtree totals of allocated and offered), then one row per
    role with its weight and quota."""
    rows = [
        (
            r["name"],
            number(r.get("weight", 1.0)),
            resources_text(r.get("guarantee")),
            resources_text(r.get("limit")) if r.get("limit") is not None else "no limit",
            resources_text(r.get("allocated")),
            resources_text(r.get("offered")),
            join((framework_link(f, (names or {}).get(f)) for f in r.get("frameworks", [])), " ") or "-",
        )
        for r in roles
    ]
    tree = role_tree(roles)
    body = [
        section("Role tree", tag("p", "A parent's allocated and offered include its children's "
                                      "(eng/ml is under eng).", cls="note"),
                _role_list(tree) if tree else tag("p", "no roles", cls="empty")),
        section("Roles", table(("role", "weight", "quota guarantee", "quota limit", "allocated", "offered",
                                "frameworks"), rows, empty="no roles")),
    ]
    return page("Roles", join(body))


def _role_list(nodes: Sequence[RoleNode]) -> Html:
    items = []
    for n in nodes:
        name = tag("span", n.label, cls="role-name" if n.role is not None else "role-name implicit",
                   title=n.name, data_role=n.name)
        weight = f" weight {number(n.role.get('weight', 1.0))}" if n.role is not None else " (no role of its own)"
        facts = tag("span", weight, "; allocated ", resources_text(n.allocated),
                    "; offered ", resources_text(n.offered), cls="note")
        items.append(tag("li", name, facts, _role_list(n.children) if n.children else ""))
    return tag("ul", *items, cls="roles")


def operator_call_form(agent_id: str, call: str) -> Html:
    """A button that POSTs ``call`` (DRAIN_AGENT / REACTIVATE_AGENT) for the agent to the
    operator API (``/api/v1``, as JSON, by the page's script); the page reloads on success."""
    label = {"DRAIN_AGENT": "drain", "REACTIVATE_AGENT": "reactivate"}.get(call, call.lower())
    reason = (Html('<input type="text" name="reason" placeholder="reason (optional)" size="18"> ')
              if call == "DRAIN_AGENT" else "")
    return tag("form", reason, tag("button", label, type="submit"), tag("span", "", cls="result"),
               cls="operator-call", method="post", action="/api/v1", data_call=call, data_agent=agent_id)


def maintenance_page(state: State) -> Html:
    """Agents out of service (draining, or deactivated because unreachable) with their state,
    then the others; each with its drain / reactivate button."""
    rows = maintenance_rows(state)
    out = [r for r in rows if r.out_of_service]

    def cells(r: Any) -> tuple[object, ...]:
        return (agent_link(r.agent_id), r.address, tag("span", r.state, cls="maint-state"), r.phase,
                r.reason or "-", r.window or "-", r.live_tasks, resources_text(r.allocated),
                operator_call_form(r.agent_id, r.action))

    headers = ("agent", "address", "state", "phase", "reason", "maintenance window", "live tasks", "allocated", "action")
    body = [
        tag("p", "Drain takes an agent out of service: no new offers, and every task on it is killed "
                 "(it is drained once they all ended); a deactivated agent only gets no offers. "
                 "Reactivate puts it back in service. The buttons send DRAIN_AGENT / "
                 "REACTIVATE_AGENT to the operator API (POST /api/v1) and need JavaScript. An agent whose "
                 "machine is in a maintenance schedule (agora maintenance, /maintenance/schedule) shows "
                 "its window: its offers carry it and its frameworks are asked to give it back.", cls="note"),
        section(f"Out of service ({len(out)})", table(headers, [cells(r) for r in out],
                                                       empty="every agent is in service")),
        section(f"In service ({len(rows) - len(out)})",
                table(headers, [cells(r) for r in rows if not r.out_of_service], empty="none")),
    ]
    return page("Maintenance", join(body))


def not_found_page(what: str, ident: str) -> Html:
    return error_page(404, "Not found", f"No {what} {ident!r} is known to this master.")

