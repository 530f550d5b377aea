"""``agora agent list|show|drain|reactivate`` — agents as ``sinfo``/``scontrol`` show nodes.

States (``agent_state``, from the master's ``/state``): ``active``; ``draining`` (DRAIN_AGENT:
nothing new is offered, its tasks are being killed) and ``drained`` (every task ended and
acknowledged: safe to take down), from the agent's ``drain_info`` (Mesos' ``DrainInfo``); ``gone``
(drained with ``--mark-gone``); ``deactivated`` (DEACTIVATE_AGENT: no offers, tasks run on; or not
reachable for offers); ``disconnected`` (registered, its connection gone: within the ping timeout);
``unreachable`` (missed its pings); ``recovering`` (known from the registry after a master
restart, not back yet). Draining shows the operator's reason. ``drain`` and ``reactivate`` are the
operator API's ``DRAIN_AGENT`` and ``REACTIVATE_AGENT`` calls.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from frameworks.cli import cluster
from frameworks.cli.common import (
    CliError,
    http_post_json,
    master_group_class,
    master_option,
    run_cli,
)
from frameworks.cli.task import TERMINAL_TASK_STATES

Row = dict[str, Any]


# --- pure ------------------------------------------------------------------------------------


def agent_state(a: dict[str, Any], running_tasks: int) -> str:
    phase = a.get("phase", "")
    drain = (a.get("drain_info") or {}).get("state")
    if drain == "DRAINED" and ((a.get("drain_info") or {}).get("config") or {}).get("mark_gone"):
        return "gone"
    if phase == "UNREACHABLE":
        return "unreachable"
    if phase == "RECOVERED":
        return "recovering"
    if drain in ("DRAINING", "DRAINED"):
        return str(drain).lower()
    if phase == "DRAINING" or a.get("draining"):
        return "deactivated"
    if a.get("deactivated"):
        return "deactivated"
    if not a.get("active", True):
        return "disconnected"
    return "active"


def running_tasks(state: dict[str, Any]) -> dict[str, list[str]]:
    """agent id -> ids of its tasks that have not ended."""
    out: dict[str, list[str]] = {}
    for f in state.get("frameworks") or []:
        for t in f.get("tasks") or []:
            if t.get("state") not in TERMINAL_TASK_STATES:
                out.setdefault(t.get("slave_id", ""), []).append(str(t.get("id", "")))
    return out


def rows_agents(state: dict[str, Any], revocable: dict[str, dict[str, float]] | None = None) -> list[Row]:
    """``cluster.rows_agents`` plus state, drain reason and running tasks; recovered agents too."""
    tasks = running_tasks(state)
    raw = {a.get("id"): a for a in cluster.state_agents(state)}
    rows = cluster.rows_agents(state, revocable)
    for r in rows:
        a = raw.get(r["id"], {})
        r["tasks"] = sorted(tasks.get(r["id"], []))
        r["state"] = agent_state(a, len(r["tasks"]))
        r["reason"] = a.get("drain_reason") or None
    for a in state.get("recovered_slaves") or []:
        rows.append(
            {
                "id": a.get("id", ""),
                "hostname": a.get("hostname", ""),
                "port": a.get("port"),
                "active": False,
                "resources": {},
                "used_resources": {},
                "revocable_used_resources": {},
                "offered_resources": {},
                "attributes": {},
                "registered_time": None,
                "tasks": [],
                "state": "recovering",
                "reason": None,
            }
        )
    return rows


def find_agent(rows: list[Row], key: str) -> Row:
    """The agent whose id is ``key``, else the one whose id ends with ``-key`` (``S0``) or whose
    ``hostname:port`` is ``key``; an unknown or ambiguous key is a ``CliError``."""
    exact = [r for r in rows if r["id"] == key]
    if exact:
        return exact[0]
    near = [r for r in rows if str(r["id"]).endswith("-" + key) or f"{r['hostname']}:{r['port']}" == key]
    if len(near) == 1:
        return near[0]
    if not near:
        raise CliError(f"no agent {key!r} known to the master")
    raise CliError(f"agent {key!r} is ambiguous: {', '.join(sorted(str(r['id']) for r in near))}")


def drain_call(agent_id: str, grace: float | None, reason: str | None, mark_gone: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"agent_id": {"value": agent_id}}
    if grace is not None:
        body["max_grace_period"] = {"nanoseconds": int(grace * 1e9)}
    if mark_gone:
        body["mark_gone"] = True
    if reason:
        body["reason"] = reason
    return {"type": "DRAIN_AGENT", "drain_agent": body}


def reactivate_call(agent_id: str) -> dict[str, Any]:
    return {"type": "REACTIVATE_AGENT", "reactivate_agent": {"agent_id": {"value": agent_id}}}


# --- shell -----------------------------------------------------------------------------------


def _options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--json", "as_json", is_flag=True, help="Print JSON.")(f)
    return master_option(f)


def _load(master: str | None, usage: bool = False) -> tuple[str, list[Row]]:
    """The agents' rows; ``usage``: with their revocable use apart (one more request)."""
    base, state = cluster.load_state(master)
    return base, rows_agents(state, cluster.load_revocable(base) if usage else None)


def _act(master: str | None, key: str, call: Callable[[str], dict[str, Any]]) -> Row:
    """Send the operator ``call`` (made for the agent's full id) about the agent ``key``; its row after."""
    base, rows = _load(master)
    agent_id = str(find_agent(rows, key)["id"])
    http_post_json(base + "/api/v1", call(agent_id))
    _, after = _load(master)
    return find_agent(after, agent_id)


def _host(r: Row) -> str:
    return f"{r['hostname']}:{r['port']}" if r["port"] else str(r["hostname"])


@click.group(cls=master_group_class())
@master_option
def agent(master: str | None) -> None:
    """Agents like sinfo: list with states and drain reasons, show, drain, reactivate."""


@agent.command(name="list")
@_options
@click.option("--state", "only", default=None, help="Only agents in this state (e.g. drained).")
def list_agents(master: str | None, as_json: bool, only: str | None) -> None:
    """Agents with state (active/draining/drained/...), resources used/total (revocable use
    apart: cpus 2/2 (+2 revocable)), tasks, reason."""

    def go() -> None:
        _, rows = _load(master, usage=True)
        if only:
            rows = [r for r in rows if r["state"] == only.lower()]
        cluster._emit(
            rows,
            as_json,
            [
                ("id", lambda r: str(r["id"])),
                ("host", _host),
                ("state", lambda r: str(r["state"])),
                ("resources (used/total)", cluster.usage_text),
                ("tasks", lambda r: str(len(r["tasks"]))),
                ("reason", lambda r: str(r["reason"] or "")),
            ],
            "Agents",
        )

    run_cli(go)


@agent.command()
@click.argument("agent_id")
@_options
def show(agent_id: str, master: str | None, as_json: bool) -> None:
    """One agent (id, its -S<n> suffix, or host:port): state, reason, resources, tasks."""

    def go() -> None:
        _, rows = _load(master, usage=True)
        r = find_agent(rows, agent_id)
        if as_json:
            click.echo(json.dumps(r, indent=2, sort_keys=True))
            return
        click.echo(f"agent {r['id']}  {_host(r)}")
        click.echo(f"  state      {r['state']}" + (f"  reason: {r['reason']}" if r["reason"] else ""))
        click.echo(f"  resources  {cluster.usage_text(r)} (used/total)")
        click.echo(f"  offered    {cluster._res_text(r['offered_resources']) or '-'}")
        attrs_text = cluster.attributes_text(r["attributes"])
        click.echo(f"  attributes {attrs_text or '-'}")
        click.echo(f"  tasks      {' '.join(r['tasks']) or '-'}")

    run_cli(go)


@agent.command()
@click.argument("agent_id")
@click.option("--grace", default=None, type=click.FloatRange(0),
              help="Seconds a task may take to stop after SIGTERM before SIGKILL (max_grace_period; "
                   "default: each task's kill policy).")
@click.option("--mark-gone", is_flag=True, help="Mark the agent gone once drained (it may not register again).")
@click.option("--reason", default=None, help="Why (shown by `agora agent list`).")
@_options
def drain(
    agent_id: str, grace: float | None, mark_gone: bool, reason: str | None, master: str | None, as_json: bool
) -> None:
    """Take an agent out of service: no new offers, every task on it killed now (SIGTERM, SIGKILL
    after the grace; TASK_KILLED with REASON_AGENT_DRAINING); drained once they all ended.
    DRAIN_AGENT."""

    def go() -> None:
        now = _act(master, agent_id, lambda aid: drain_call(aid, grace, reason, mark_gone))
        if as_json:
            click.echo(json.dumps(now, indent=2, sort_keys=True))
        else:
            click.echo(f"agent {now['id']} {now['state']}" + (f": {now['reason']}" if now["reason"] else ""))

    run_cli(go)


@agent.command()
@click.argument("agent_id")
@_options
def reactivate(agent_id: str, master: str | None, as_json: bool) -> None:
    """Offer a drained (or deactivated) agent's resources again. REACTIVATE_AGENT."""

    def go() -> None:
        now = _act(master, agent_id, reactivate_call)
        if as_json:
            click.echo(json.dumps(now, indent=2, sort_keys=True))
        else:
            click.echo(f"agent {now['id']} {now['state']}")

    run_cli(go)
