"""``agora maintenance status|schedule|unschedule|down|up`` — Mesos' maintenance schedules.

A machine is ``HOST``, ``HOST@IP`` or ``@IP`` (the hostname and/or the address its agents
register from). ``schedule`` adds a window (``--start``, ``--duration``) for machines to the
master's schedule (they become DRAINING: their offers carry the unavailability and the frameworks
using them get inverse offers); ``unschedule`` takes machines out of it; ``down`` starts the
maintenance (their agents are shut down); ``up`` ends it. ``status`` lists the machines in
maintenance with each framework's answer. The master's ``/maintenance/schedule``,
``/maintenance/status``, ``/machine/down`` and ``/machine/up``.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from typing import Any

import click

from frameworks.cli import cluster
from frameworks.cli.common import (
    CliError,
    http_get_json,
    http_post_json,
    master_group_class,
    master_option,
    master_url,
    run_cli,
)

Row = dict[str, Any]
Machine = dict[str, str]
NS = 1_000_000_000
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


# --- pure ------------------------------------------------------------------------------------


def parse_machine(text: str) -> Machine:
    """``HOST``, ``HOST@IP`` or ``@IP`` as a Mesos ``MachineID``."""
    host, _, ip = text.partition("@")
    if not host and not ip:
        raise CliError(f"machine {text!r}: give HOST, HOST@IP or @IP")
    out: Machine = {}
    if host:
        out["hostname"] = host.lower()
    if ip:
        out["ip"] = ip
    return out


def machine_text(m: Machine) -> str:
    host, ip = m.get("hostname", ""), m.get("ip", "")
    return f"{host}@{ip}" if ip else host


def parse_duration(text: str) -> int:
    """``90s``, ``30m``, ``2h``, ``1d`` (or plain seconds) in nanoseconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if m is None:
        raise CliError(f"duration {text!r}: give a number with s, m, h or d (e.g. 2h)")
    return int(float(m.group(1)) * _UNITS[m.group(2) or "s"] * NS)


def parse_start(text: str, now: float) -> int:
    """``now``, ``+DURATION`` (from now) or an ISO 8601 time (UTC when it names no zone), in
    nanoseconds since the epoch."""
    if text == "now":
        return int(now * NS)
    if text.startswith("+"):
        return int(now * NS) + parse_duration(text[1:])
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as e:
        raise CliError(f"start {text!r}: give now, +DURATION or an ISO 8601 time") from e
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return int(t.timestamp()) * NS + t.microsecond * 1000


def without(schedule: dict[str, Any], machines: list[Machine]) -> dict[str, Any]:
    """The schedule with ``machines`` taken out (a window left empty goes too)."""
    gone = [dict(m) for m in machines]
    windows = []
    for w in schedule.get("windows", []):
        kept = [m for m in w.get("machine_ids", []) if m not in gone]
        if kept:
            windows.append({**w, "machine_ids": kept})
    return {"windows": windows} if windows else {}


def with_window(schedule: dict[str, Any], machines: list[Machine], start_ns: int, duration_ns: int | None) -> dict[str, Any]:
    """The schedule with a new window for ``machines`` (taken out of the windows they were in)."""
    unavailability: dict[str, Any] = {"start": {"nanoseconds": start_ns}}
    if duration_ns is not None:
        unavailability["duration"] = {"nanoseconds": duration_ns}
    rest = without(schedule, machines).get("windows", [])
    return {"windows": [*rest, {"machine_ids": machines, "unavailability": unavailability}]}


def rows(schedule: dict[str, Any], status: dict[str, Any]) -> list[Row]:
    """One row per machine in maintenance: mode, window, each framework's answer."""
    window_of: dict[str, dict[str, Any]] = {}
    for w in schedule.get("windows", []):
        for m in w.get("machine_ids", []):
            window_of[json.dumps(m, sort_keys=True)] = w.get("unavailability", {})
    out: list[Row] = []
    modes = [(d["id"], "draining", d.get("statuses", [])) for d in status.get("draining_machines", [])]
    modes += [(m, "down", []) for m in status.get("down_machines", [])]
    for mid, mode, statuses in modes:
        u = window_of.get(json.dumps(mid, sort_keys=True), {})
        start = u.get("start", {}).get("nanoseconds")
        duration = u.get("duration", {}).get("nanoseconds")
        out.append({
            "machine": machine_text(mid),
            "mode": mode,
            "start": int(start) / NS if start is not None else None,
            "duration": int(duration) / NS if duration is not None else None,
            "answers": {s["framework_id"]["value"]: s["status"] for s in statuses},
        })
    return out


def _when(r: Row) -> str:
    if r["start"] is None:
        return "-"
    text = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r["start"])) + " UTC"
    return text + (f" for {r['duration']:g}s" if r["duration"] is not None else "")


# --- shell -----------------------------------------------------------------------------------


@click.group(cls=master_group_class())
@master_option
def maintenance(master: str | None) -> None:
    """Maintenance schedules (Mesos): schedule machines, see the frameworks' answers, down, up."""


@maintenance.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@master_option
def status(master: str | None, as_json: bool) -> None:
    """Machines in maintenance: DRAINING (scheduled) or DOWN, their window, and each framework's
    answer to the inverse offers (UNKNOWN until it answers, ACCEPT, DECLINE)."""

    def go() -> None:
        base = master_url(master)
        got = rows(http_get_json(base + "/maintenance/schedule") or {}, http_get_json(base + "/maintenance/status") or {})
        cluster._emit(got, as_json, [
            ("machine", lambda r: str(r["machine"])),
            ("mode", lambda r: str(r["mode"])),
            ("unavailable from", _when),
            ("answers", lambda r: " ".join(f"{f}:{s}" for f, s in sorted(r["answers"].items())) or "-"),
        ], "Maintenance")

    run_cli(go)


@maintenance.command()
@click.argument("machines", nargs=-1, required=True)
@click.option("--start", default="now", show_default=True,
              help="When they become unavailable: now, +DURATION (e.g. +2h) or an ISO 8601 time (UTC).")
@click.option("--duration", default=None, help="For how long (e.g. 2h, 30m); default: not said.")
@master_option
def schedule(machines: tuple[str, ...], start: str, duration: str | None, master: str | None) -> None:
    """Add a window for MACHINES (HOST, HOST@IP or @IP) to the schedule: they become DRAINING."""

    def go() -> None:
        ms = [parse_machine(m) for m in machines]
        base = master_url(master)
        current = http_get_json(base + "/maintenance/schedule") or {}
        new = with_window(current, ms, parse_start(start, time.time()),
                          parse_duration(duration) if duration is not None else None)
        http_post_json(base + "/maintenance/schedule", new)
        click.echo(f"scheduled: {' '.join(machine_text(m) for m in ms)}")

    run_cli(go)


@maintenance.command()
@click.argument("machines", nargs=-1, required=True)
@master_option
def unschedule(machines: tuple[str, ...], master: str | None) -> None:
    """Take MACHINES out of the schedule (back UP; a DOWN machine needs `up`)."""

    def go() -> None:
        ms = [parse_machine(m) for m in machines]
        base = master_url(master)
        http_post_json(base + "/maintenance/schedule", without(http_get_json(base + "/maintenance/schedule") or {}, ms))
        click.echo(f"unscheduled: {' '.join(machine_text(m) for m in ms)}")

    run_cli(go)


@maintenance.command()
@click.argument("machines", nargs=-1, required=True)
@master_option
def down(machines: tuple[str, ...], master: str | None) -> None:
    """Start maintenance on scheduled MACHINES: their agents are shut down and refused until `up`."""

    def go() -> None:
        ms = [parse_machine(m) for m in machines]
        http_post_json(master_url(master) + "/machine/down", ms)
        click.echo(f"down: {' '.join(machine_text(m) for m in ms)}")

    run_cli(go)


@maintenance.command()
@click.argument("machines", nargs=-1, required=True)
@master_option
def up(machines: tuple[str, ...], master: str | None) -> None:
    """End maintenance on DOWN MACHINES: out of the schedule, their agents may register again."""

    def go() -> None:
        ms = [parse_machine(m) for m in machines]
        http_post_json(master_url(master) + "/machine/up", ms)
        click.echo(f"up: {' '.join(machine_text(m) for m in ms)}")

    run_cli(go)
