"""``agora job history``: finished jobs or their task attempts, newest first, like ``sacct`` (what
they used, as the agents measured it), as a table, JSON or CSV."""

from __future__ import annotations

import csv
import io
import time
import urllib.parse
from typing import Any

import click
from rich.table import Table

from frameworks.cli.common import (
    console,
    emit,
    json_flag,
)
from frameworks.cli.job_api import (
    API,
    SHORT,
    elapsed_text,
    stamp,
    tasks_summary,
    user_filter,
)

LONG = {code: name for name, code in SHORT.items()}


# what a job state means for one attempt (``history --attempts --state``)
ATTEMPT_STATES = {
    "SUCCEEDED": ("TASK_FINISHED",),
    "FAILED": ("TASK_FAILED", "TASK_ERROR", "TASK_LOST", "TASK_DROPPED", "TASK_GONE", "TASK_GONE_BY_OPERATOR"),
    "CANCELLED": ("TASK_KILLED",),
    "RUNNING": ("TASK_RUNNING",),
}


_SPAN = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_when(text: str, now: float) -> float:
    """A point in time for ``--since``/``--until``: ``2h``, ``30m``, ``7d`` (that long ago), an
    ISO date or date and time (local), or Unix seconds."""
    t = text.strip()
    if t and t[-1] in _SPAN and t[:-1].replace(".", "", 1).isdigit():
        return now - float(t[:-1]) * _SPAN[t[-1]]
    try:
        return float(t)
    except ValueError:
        pass
    for fmt in ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return time.mktime(time.strptime(t, fmt))
        except ValueError:
            continue
    raise click.BadParameter(f"{text!r}: expected 2h / 30m / 7d (ago), a date (2026-11-27[T10:00]) or Unix seconds")


def job_states(text: str | None) -> list[str]:
    """``--state``: job states by name or squeue code (CD, F, CA...), comma-separated."""
    out = []
    for part in (text or "").split(","):
        p = part.strip().upper()
        if not p:
            continue
        name = LONG.get(p, p)
        if name not in SHORT:
            raise click.BadParameter(f"{part!r}: expected one of {', '.join(SHORT)} (or {', '.join(LONG)})")
        out.append(name)
    return out


def _mb(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.1f}M"


def _secs(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


HISTORY_COLUMNS = ("id", "name", "user", "queue", "state", "exit_code", "elapsed", "started_at", "ended_at",
                   "cpu_seconds", "mem_peak_bytes", "attempts")


ATTEMPT_COLUMNS = ("job_id", "idx", "attempt", "task_id", "name", "user", "queue", "state", "exit_code", "agent_id",
                   "hostname", "started_at", "ended_at", "cpu_seconds", "mem_peak_bytes", "cpus", "mem", "gpus")


@click.command()
@click.option("--user", "-u", default=None, help="Only this user's jobs (sacct -u).")
@click.option("--me", "mine", is_flag=True, help="Only my jobs.")
@click.option("--queue", "-q", default=None, help="Only jobs of this queue.")
@click.option("--state", "-s", default=None, help="Only jobs in these states (names or codes, comma-separated).")
@click.option("--since", "-S", default=None, help="Jobs that ended at or after: 2h, 7d (ago), 2026-11-27[T10:00] or Unix seconds.")
@click.option("--until", "-E", default=None, help="Jobs submitted (attempts started) before this time.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 100_000), help="The N most recent.")
@click.option("--attempts", is_flag=True, help="One row per task attempt (agent, times, CPU seconds, peak memory).")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV (a header, then one line per row).")
@json_flag
@click.pass_context
def history(
    ctx: click.Context, user: str | None, mine: bool, queue: str | None, state: str | None, since: str | None,
    until: str | None, limit: int, attempts: bool, as_csv: bool,
) -> None:
    """Jobs newest first, like sacct: user, queue, state, exit code, elapsed, start, end, and what
    they used (CPU seconds, peak memory, as the agents measured); --attempts: every task attempt."""
    now = time.time()
    params: dict[str, str] = {"limit": str(limit)}
    if (who := user_filter(ctx, user, mine)) is not None:
        params["user"] = who
    if queue is not None:
        params["queue"] = queue
    states = job_states(state)
    if states:
        params["state"] = ",".join(
            s for name in states for s in (ATTEMPT_STATES.get(name, ()) if attempts else (name,)))
    if since is not None:
        params["since"] = repr(parse_when(since, now))
    if until is not None:
        params["until"] = repr(parse_when(until, now))
    query = "?" + urllib.parse.urlencode(params)
    columns: tuple[str, ...]
    if attempts:
        rows = API.get(ctx, "/accounting" + query)["attempts"]
        columns = ATTEMPT_COLUMNS
    else:
        rows = API.get(ctx, "/history" + query)["jobs"]
        columns = HISTORY_COLUMNS
    if as_csv:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for r in rows:
            writer.writerow(["" if r.get(c) is None else r.get(c) for c in columns])
        click.echo(out.getvalue(), nl=False)
        return

    def render_jobs(rs: list[dict[str, Any]]) -> None:
        table = Table(box=None, header_style="bold")
        for col in ("ID", "NAME", "USER", "QUEUE", "STATE", "EXIT", "ELAPSED", "START", "END", "CPU-S", "MAXRSS",
                    "TASKS"):
            table.add_column(col)
        for r in rs:
            table.add_row(
                str(r["id"]), r["name"], r.get("user") or "-", r["queue"], r["state"],
                "-" if r["exit_code"] is None else str(r["exit_code"]),
                elapsed_text(r.get("started_at"), r.get("ended_at")),
                stamp(r.get("started_at")), stamp(r.get("ended_at")),
                _secs(r.get("cpu_seconds")), _mb(r.get("mem_peak_bytes")), tasks_summary(r["tasks"]),
            )
        console().print(table)

    def render_attempts(rs: list[dict[str, Any]]) -> None:
        table = Table(box=None, header_style="bold")
        for col in ("JOB", "TASK", "ATT", "USER", "QUEUE", "STATE", "EXIT", "AGENT", "START", "END", "ELAPSED",
                    "CPU-S", "MAXRSS"):
            table.add_column(col)
        for r in rs:
            table.add_row(
                str(r["job_id"]), str(r["idx"]), str(r["attempt"]), r.get("user") or "-", r["queue"], r["state"],
                "-" if r["exit_code"] is None else str(r["exit_code"]), r.get("hostname") or r.get("agent_id") or "-",
                stamp(r.get("started_at")), stamp(r.get("ended_at")),
                elapsed_text(r.get("started_at"), r.get("ended_at")),
                _secs(r.get("cpu_seconds")), _mb(r.get("mem_peak_bytes")),
            )
        console().print(table)

    emit(ctx, rows, render_attempts if attempts else render_jobs)
