"""``agora agents|frameworks|tasks|offers`` — cluster views read from the master's operator API.

The source is the master's Mesos-shaped ``GET /state`` (``slaves``, ``frameworks`` with their
``tasks``, ``completed_tasks`` and ``offers``). Each view turns it into plain rows (``rows_*``,
pure functions, reused by tests and the web of other tools), printed as a rich table on a
terminal or as JSON with ``--json``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

import click

from frameworks.cli.common import (
    CliError,
    http_get_json,
    http_post_json,
    master_option,
    master_state,
    master_url,
    run_cli,
)
from frameworks.client.placement import attribute_text

Row = dict[str, Any]


# --- pure row builders ---------------------------------------------------------------------------


def _res(d: Any) -> dict[str, Any]:
    return d if isinstance(d, dict) else {}


def _num(d: dict[str, Any], key: str) -> float:
    v = d.get(key, 0.0)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _fmt_num(v: float) -> str:
    return f"{v:g}"


def revocable_used(get_agents: Any) -> dict[str, dict[str, float]]:
    """agent id -> the scalar revocable resources its tasks use, from the operator API's
    ``GET_AGENTS`` answer: its ``allocated_resources`` carry Mesos' ``revocable`` marker, which
    ``/state``'s flattened ``used_resources`` (regular and revocable summed) lose."""
    out: dict[str, dict[str, float]] = {}
    body = get_agents.get("get_agents") if isinstance(get_agents, dict) else None
    agents = (body or {}).get("agents") or []
    for a in agents:
        aid = str((((a.get("agent_info") or {}).get("id")) or {}).get("value", ""))
        for r in a.get("allocated_resources") or []:
            if "revocable" not in r or r.get("type", "SCALAR") != "SCALAR":
                continue
            value = _num(r.get("scalar") or {}, "value")
            if aid and value:
                into = out.setdefault(aid, {})
                into[r.get("name", "")] = into.get(r.get("name", ""), 0.0) + value
    return out


def attributes_text(attributes: dict[str, Any]) -> str:
    """``host_index:1;rack:r1``: scalars as users write them (``1``, not the ``1.0`` of /state)."""
    return ";".join(f"{k}:{attribute_text(v)}" for k, v in sorted(attributes.items()))


def state_agents(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Every agent ``/state`` shows: the registered ones (``slaves``, as in Mesos) and the
    unreachable ones the master keeps apart (``unreachable_agents``)."""
    return [*(state.get("slaves") or []), *(state.get("unreachable_agents") or [])]


def rows_agents(state: dict[str, Any], revocable: dict[str, dict[str, float]] | None = None) -> list[Row]:
    """Agents from ``/state``; ``revocable`` (``revocable_used``) splits each agent's usage:
    ``revocable_used_resources`` is the revocable part of ``used_resources``."""
    rows: list[Row] = []
    for a in state_agents(state):
        total, used = _res(a.get("resources")), _res(a.get("used_resources"))
        offered = _res(a.get("offered_resources"))
        rows.append(
            {
                "id": a.get("id", ""),
                "hostname": a.get("hostname", ""),
                "port": a.get("port"),
                "active": bool(a.get("active", True)),
                "resources": total,
                "used_resources": used,
                "revocable_used_resources": dict((revocable or {}).get(str(a.get("id", "")), {})),
                "offered_resources": offered,
                "attributes": a.get("attributes", {}) or {},
                "registered_time": a.get("registered_time"),
            }
        )
    rows.sort(key=lambda r: (str(r["hostname"]), str(r["id"])))
    return rows


def rows_frameworks(state: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for completed, group in ((False, state.get("frameworks", [])), (True, state.get("completed_frameworks", []))):
        for f in group or []:
            caps = [c if isinstance(c, str) else c.get("type", "") for c in f.get("capabilities", []) or []]
            rows.append(
                {
                    "id": f.get("id", ""),
                    "name": f.get("name", ""),
                    "roles": f.get("roles") or ([f["role"]] if f.get("role") else []),
                    "active": bool(f.get("active", False)) and not completed,
                    "connected": bool(f.get("connected", False)) and not completed,
                    "recovered": bool(f.get("recovered", False)) and not completed,
                    "completed": completed,
                    "status": framework_status(f, completed),
                    "tasks": len(f.get("tasks", []) or []),
                    "completed_tasks": len(f.get("completed_tasks", []) or []),
                    "offers": len(f.get("offers", []) or []),
                    "used_resources": _res(f.get("used_resources") or f.get("resources")),
                    "offered_resources": _res(f.get("offered_resources")),
                    "capabilities": caps,
                }
            )
    return rows


def framework_status(f: dict[str, Any], completed: bool) -> str:
    """One word, the web UI's: ``active`` (subscribed, its stream open), ``disconnected`` (its
    stream gone; removed at its failover timeout unless it comes back), ``recovered`` (known from
    the registry after a master restart, not back yet), ``completed``."""
    if completed:
        return "completed"
    if f.get("active"):
        return "active"
    return "recovered" if f.get("recovered") else "disconnected"


def rows_tasks(state: dict[str, Any], include_completed: bool = False) -> list[Row]:
    rows: list[Row] = []
    for group in (state.get("frameworks", []) or [], state.get("completed_frameworks", []) or []):
        for f in group:
            lists = [f.get("tasks", []) or []]
            if include_completed:
                lists.append(f.get("completed_tasks", []) or [])
            for tasks in lists:
                for t in tasks:
                    rows.append(
                        {
                            "id": t.get("id", ""),
                            "name": t.get("name", ""),
                            "framework_id": t.get("framework_id", f.get("id", "")),
                            "framework": f.get("name", ""),
                            "agent_id": t.get("slave_id", t.get("agent_id", "")),
                            "state": t.get("state", ""),
                            "resources": _res(t.get("resources")),
                            "role": t.get("role"),
                        }
                    )
    rows.sort(key=lambda r: (str(r["framework_id"]), str(r["id"])))
    return rows


def resolve_framework(state: dict[str, Any], key: str) -> str:
    """The id of the framework ``key`` names: its id, or its name when no other framework (active
    or completed) has that name. A name two frameworks share is a ``CliError`` listing their ids."""
    known = [f for group in (state.get("frameworks") or [], state.get("completed_frameworks") or []) for f in group]
    if any(f.get("id") == key for f in known):
        return key
    named = [f for f in known if f.get("name") == key]
    if len(named) == 1:
        return str(named[0].get("id", ""))
    if not named:
        raise CliError(f"no framework {key!r} (an id or a name) known to the master")
    completed = {id(f) for f in state.get("completed_frameworks") or []}
    ids = ", ".join(
        f"{f.get('id', '?')} ({'completed' if id(f) in completed else 'active' if f.get('active') else 'inactive'})"
        for f in named
    )
    raise CliError(f"{len(named)} frameworks are named {key!r}: {ids}; give one's id with --framework ID")


_AGE_KEYS = ("age", "age_secs")
_TIME_KEYS = ("offered_time", "created_time", "created_at", "timestamp", "offered_at")


def _offer_age(o: dict[str, Any], now: float) -> float | None:
    for k in _AGE_KEYS:
        v = o.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return max(0.0, float(v))
    for k in _TIME_KEYS:
        v = o.get(k)
        if isinstance(v, dict):
            v = v.get("nanoseconds")
            if isinstance(v, (int, float)):
                v = v / 1e9
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return max(0.0, now - float(v))
    return None


def rows_offers(state: dict[str, Any], now: float, listing: list[dict[str, Any]] | None = None) -> list[Row]:
    """Outstanding offers with their holder (framework) and age. ``listing`` is the master's own
    offers listing when it has one (it wins); otherwise offers come from ``/state``'s frameworks."""
    names = {f.get("id"): f.get("name", "") for f in state.get("frameworks", []) or []}
    hosts = {a.get("id"): a.get("hostname", "") for a in state.get("slaves", []) or []}
    raw: list[tuple[str, dict[str, Any]]] = []
    if listing is not None:
        raw = [(_id(o.get("framework_id")), o) for o in listing]
    else:
        for f in state.get("frameworks", []) or []:
            raw.extend((f.get("id", ""), o) for o in f.get("offers", []) or [])
    rows: list[Row] = []
    for fid, o in raw:
        agent = _id(o.get("slave_id") or o.get("agent_id"))
        rows.append(
            {
                "id": _id(o.get("id")),
                "framework_id": fid,
                "holder": names.get(fid, ""),
                "agent_id": agent,
                "hostname": o.get("hostname") or hosts.get(agent, ""),
                "resources": _res(o.get("resources")),
                "revocable_resources": _res(o.get("revocable_resources")),
                "age": _offer_age(o, now),
                "idle": o.get("idle_secs"),
                "reusable": o.get("reusable"),
            }
        )
    rows.sort(key=lambda r: (str(r["holder"]), str(r["id"])))
    return rows


def rows_waiting(state: dict[str, Any]) -> list[Row]:
    """Connected frameworks holding no offers, with the master's reason (``offers_reason``)."""
    rows: list[Row] = [
        {"framework_id": f.get("id", ""), "name": f.get("name", ""), "reason": f["offers_reason"]}
        for f in state.get("frameworks", []) or []
        if f.get("active") and f.get("offers_reason") and not f.get("offers")
    ]
    rows.sort(key=lambda r: (str(r["name"]), str(r["framework_id"])))
    return rows


def _id(v: Any) -> str:
    if isinstance(v, dict):
        return str(v.get("value", ""))
    return "" if v is None else str(v)


# --- rendering -------------------------------------------------------------------------------------


def _res_text(d: dict[str, Any], used: dict[str, Any] | None = None, revocable: dict[str, Any] | None = None) -> str:
    """``cpus 2, mem 512``; with ``used``: ``cpus 1/2`` (used/total); with ``revocable`` (the part
    of ``used`` on revocable resources, not counted in the total): ``cpus 2/2 (+2 revocable)``."""
    parts = []
    for name in ("cpus", "mem", "gpus", "disk"):
        total = _num(d, name)
        if name in ("gpus", "disk") and total == 0 and not (used and _num(used, name)):
            continue
        if used is not None:
            rev = _num(revocable or {}, name)
            text = f"{name} {_fmt_num(max(0.0, _num(used, name) - rev))}/{_fmt_num(total)}"
            parts.append(text + (f" (+{_fmt_num(rev)} revocable)" if rev else ""))
        else:
            parts.append(f"{name} {_fmt_num(total)}")
    return ", ".join(parts)


def usage_text(r: Row) -> str:
    """An agent row's resources as used/total, revocable use apart."""
    return _res_text(r["resources"], r["used_resources"], r.get("revocable_used_resources"))


def load_revocable(base: str) -> dict[str, dict[str, float]]:
    """``revocable_used`` of the master at ``base`` (one ``GET_AGENTS`` call); empty when the master
    will not answer it (usage then shows regular and revocable together, as ``/state`` has it)."""
    try:
        return revocable_used(http_post_json(base + "/api/v1", {"type": "GET_AGENTS"}))
    except CliError:
        return {}


def _age_text(age: float | None) -> str:
    if age is None:
        return "-"
    if age < 60:
        return f"{age:.1f}s"
    if age < 3600:
        return f"{age / 60:.1f}m"
    return f"{age / 3600:.1f}h"


def _render(rows: list[Row], columns: list[tuple[str, Callable[[Row], str]]], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title if rows else f"{title}: none")
    for name, _ in columns:
        # ids are never truncated (they are what you copy into the next command)
        table.add_column(name, overflow="fold" if name in ("id", "offer", "why no offers") else "ellipsis")
    for r in rows:
        table.add_row(*[fn(r) for _, fn in columns])
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 200))  # piped: no terminal width to respect
    console.print(table)


def _emit(rows: list[Row], as_json: bool, columns: list[tuple[str, Callable[[Row], str]]], title: str) -> None:
    if as_json:
        sys.stdout.write(json.dumps(rows, sort_keys=True) + "\n")
    else:
        _render(rows, columns, title)


def load_state(master: str | None) -> tuple[str, dict[str, Any]]:
    """The master's base URL (``--master``, resolved once) and its ``/state``."""
    base = master_url(master)
    return base, master_state(base, timeout=5.0)


def _options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--json", "as_json", is_flag=True, help="Print plain JSON instead of a table.")(f)
    return master_option(f)


# --- commands --------------------------------------------------------------------------------------


@click.command()
@_options
def agents(master: str | None, as_json: bool) -> None:
    """List the cluster's agents with their resources (used/total; revocable use apart)."""

    def go() -> None:
        base, state = load_state(master)
        rows = rows_agents(state, load_revocable(base))
        _emit(
            rows,
            as_json,
            [
                ("id", lambda r: str(r["id"])),
                ("hostname", lambda r: f"{r['hostname']}:{r['port']}" if r["port"] else str(r["hostname"])),
                ("active", lambda r: "yes" if r["active"] else "no"),
                ("resources (used/total)", usage_text),
                ("offered", lambda r: _res_text(r["offered_resources"])),
                ("attributes", lambda r: attributes_text(r["attributes"])),
            ],
            "Agents",
        )

    run_cli(go)


@click.command()
@_options
def frameworks(master: str | None, as_json: bool) -> None:
    """List registered (and completed) frameworks."""

    def go() -> None:
        _, state = load_state(master)
        _emit(
            rows_frameworks(state),
            as_json,
            [
                ("id", lambda r: str(r["id"])),
                ("name", lambda r: str(r["name"])),
                ("roles", lambda r: ",".join(r["roles"])),
                ("status", lambda r: str(r["status"])),
                ("tasks", lambda r: f"{r['tasks']} (+{r['completed_tasks']} done)"),
                ("offers", lambda r: str(r["offers"])),
                ("used", lambda r: _res_text(r["used_resources"])),
                ("offered", lambda r: _res_text(r["offered_resources"])),
            ],
            "Frameworks",
        )

    run_cli(go)


@click.command()
@_options
@click.option("--all", "include_completed", is_flag=True, help="Include completed tasks.")
@click.option("--framework", "framework_id", default=None, metavar="ID|NAME",
              help="Only this framework's tasks: its id, or its name if no other framework has it.")
def tasks(master: str | None, as_json: bool, include_completed: bool, framework_id: str | None) -> None:
    """List tasks (running; --all adds completed ones)."""

    def go() -> None:
        _, state = load_state(master)
        rows = rows_tasks(state, include_completed)
        if framework_id:
            fid = resolve_framework(state, framework_id)
            rows = [r for r in rows if r["framework_id"] == fid]
        _emit(
            rows,
            as_json,
            [
                ("id", lambda r: str(r["id"])),
                ("name", lambda r: str(r["name"])),
                ("framework", lambda r: str(r["framework"] or r["framework_id"])),
                ("agent", lambda r: str(r["agent_id"])),
                ("state", lambda r: str(r["state"])),
                ("resources", lambda r: _res_text(r["resources"])),
            ],
            "Tasks",
        )

    run_cli(go)


def _offers_listing(base: str) -> list[dict[str, Any]] | None:
    """The master's own offers listing (``GET /api/v1/offers``) if it serves one, else None."""
    try:
        data = http_get_json(base + "/api/v1/offers", timeout=3.0)
    except CliError:
        return None
    if isinstance(data, dict):
        data = data.get("offers")
    if isinstance(data, list) and all(isinstance(o, dict) for o in data):
        return data
    return None


@click.command()
@_options
def offers(master: str | None, as_json: bool) -> None:
    """List outstanding offers with their holder and age."""

    def go() -> None:
        base, state = load_state(master)
        rows = rows_offers(state, time.time(), _offers_listing(base))
        _emit(
            rows,
            as_json,
            [
                ("offer", lambda r: str(r["id"])),
                ("holder", lambda r: str(r["holder"] or r["framework_id"])),
                ("agent", lambda r: str(r["hostname"] or r["agent_id"])),
                ("resources", lambda r: _res_text(r["resources"])),
                ("revocable", lambda r: _res_text(r["revocable_resources"]) if r["revocable_resources"] else "-"),
                ("kind", lambda r: "lease" if r["reusable"] else ("classic" if r["reusable"] is False else "-")),
                ("age", lambda r: _age_text(r["age"])),
                ("idle", lambda r: _age_text(r["idle"]) if isinstance(r["idle"], (int, float)) else "-"),
            ],
            "Offers",
        )
        waiting = rows_waiting(state)
        if waiting and not as_json:  # nothing waits in silence (e.g. GPU agents, no GPU_RESOURCES)
            _render(
                waiting,
                [("framework", lambda r: str(r["name"] or r["framework_id"])), ("why no offers", lambda r: str(r["reason"]))],
                "Frameworks without offers",
            )

    run_cli(go)


def all_commands() -> Iterable[click.Command]:
    return (agents, frameworks, tasks, offers)
