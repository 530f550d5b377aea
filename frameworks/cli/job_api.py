"""What every ``agora job`` command shares: the batch service's API (found with ``--batch URL``,
``AGORA_BATCH``, or by asking the master for the framework named ``agora-batch``, whose
``webui_url`` is its API), who "me" is, and how job states, times and exit codes are shown."""

from __future__ import annotations

import time
from typing import Any

import click

from frameworks.cli.common import ServiceApi, local_user

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
SHORT = {"PENDING": "PD", "RUNNING": "R", "SUCCEEDED": "CD", "FAILED": "F", "CANCELLED": "CA"}
ACTIVE_PHASES = ("LAUNCHING", "RUNNING")
POLL = 0.25  # seconds between polls while waiting or following (a CLI loop, not a test)


API = ServiceApi("agora-batch", "batch", "AGORA_BATCH")


def batch_url(batch: str | None, master: str | None) -> str:
    return API.base(batch, master)


def short_state(j: dict[str, Any]) -> str:
    """squeue's code for a job summary: PD R CD F CA, and CG (completing) for a job that has ended
    while some of its tasks are still being killed."""
    tasks = j.get("tasks") or {}
    if j["state"] in TERMINAL and any(tasks.get(p, 0) for p in ACTIVE_PHASES):
        return "CG"
    return SHORT.get(j["state"], j["state"])


def elapsed_text(start: float | None, end: float | None) -> str:
    """sacct's Elapsed, ``[D-]HH:MM:SS``; ``-`` for a job that never started."""
    if start is None or end is None:
        return "-"
    secs = max(0, round(end - start))
    days, rest = divmod(secs, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def exit_code(detail: dict[str, Any]) -> int | None:
    """A job's exit code as sacct shows it: an aborted gang's is its failing rank's; otherwise
    the highest among its tasks' last attempts."""
    if isinstance(detail.get("exit_code"), int):
        return int(detail["exit_code"])
    codes = [t["history"][-1].get("exit_code") for t in detail.get("task_list", []) if t.get("history")]
    known = [c for c in codes if isinstance(c, int)]
    return max(known) if known else None


def agent_text(a: dict[str, Any]) -> str:
    """An attempt's agent as ``agora agent show`` takes it: the ``S<n>`` end of its id (hostnames
    are all alike on a local cluster), else the whole id, else the hostname."""
    aid = str(a.get("agent_id") or "")
    tail = aid.rsplit("-", 1)[-1]
    if tail.startswith("S") and tail[1:].isdigit():
        return tail
    return aid or a.get("hostname") or "-"


def tasks_summary(counts: dict[str, int]) -> str:
    return " ".join(f"{k.lower()}:{v}" for k, v in sorted(counts.items()))


def me(ctx: click.Context) -> str:
    """Who "me" is to the batch service: the principal it authenticates this CLI as, else (no
    authentication) this account's name, the owner the CLI's submissions claim."""
    who = API.get(ctx, "/whoami") or {}
    return str(who.get("principal") or local_user() or "anonymous")


def user_filter(ctx: click.Context, user: str | None, mine: bool) -> str | None:
    if user is not None and mine:
        raise click.UsageError("give --user NAME or --me, not both")
    return me(ctx) if mine else user


def stamp(t: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t)) if t else "-"
