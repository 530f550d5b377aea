"""Periodic (cron) jobs: the schedule and what a due run does.

A periodic job is a template: each time its schedule falls due the core starts a *run*, an
ordinary job of its own (``<name>@<time>``) with the template's spec, and moves the template's
``next_run`` on, in the same write, so a restart neither loses nor doubles a run.

Schedules are cron expressions (``croniter``) in UTC, as Nomad's periodic jobs are by default:
five fields (minute hour day month weekday), ``@hourly`` and the like, or six fields whose first
is the second (``*/2 * * * * *``, as Quartz and Spring write it) for intervals under a minute.

When runs were missed (the service was down, or busy), the runs due meanwhile fold into one: the
latest of them starts and its history says how many it stands for (Kubernetes CronJob and Nomad
also start one run, not all). The concurrency policy decides what happens while an earlier run
is still live: ``allow`` starts the new one, ``forbid`` skips it, ``replace`` cancels the live
run(s) and starts the new one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import attrs
from croniter import CroniterError, croniter

__pure__ = True

MAX_MISSED_COUNTED = 1000  # beyond this a long downtime is reported as "at least N"


def _iter(expr: str, after: float) -> croniter:
    fields = expr.split()
    base = datetime.fromtimestamp(after, tz=UTC)
    return croniter(expr, base, second_at_beginning=len(fields) == 6)


def schedule_error(expr: str) -> str | None:
    """Why ``expr`` is not a usable cron expression, or None."""
    fields = expr.split()
    if not fields:
        return "the cron expression is empty"
    if not expr.startswith("@") and len(fields) not in (5, 6):
        return (
            f"{expr!r} has {len(fields)} fields; a cron expression has 5 (minute hour day month weekday) "
            "or 6 (second first)"
        )
    try:
        _iter(expr, 0.0).get_next(float)
    except (CroniterError, ValueError, KeyError) as exc:
        return f"{expr!r} is not a valid cron expression: {exc}"
    return None


def next_after(expr: str, t: float) -> float:
    """The first time the schedule falls due strictly after ``t``."""
    return float(_iter(expr, t).get_next(float))


@attrs.frozen
class RunDecision:
    """What a periodic job does now that ``now`` has reached its ``next_run``."""

    due_at: float  # the scheduled time this decision is for (the latest one due)
    start: bool  # start a run for ``due_at``
    missed: int  # earlier due times folded into this one (runs that did not happen)
    replace: tuple[int, ...]  # live runs to cancel before starting (concurrency replace)
    skipped: str | None  # why the due run does not start (concurrency forbid)
    next_run: float  # the next time after ``now``


def decide(
    expr: str, concurrency: str, next_run: float, now: float, live_runs: Sequence[int]
) -> RunDecision | None:
    """None while ``now < next_run``; otherwise the run to start (or skip) for the latest due
    time and the next time after ``now``. ``live_runs``: the template's runs not yet ended."""
    if now < next_run:
        return None
    latest, missed = next_run, 0
    t = next_after(expr, next_run)
    while t <= now:
        latest, missed = t, missed + 1
        if missed >= MAX_MISSED_COUNTED:
            # a very long gap: jump to the last due time at or before now
            latest = float(_iter(expr, now + 1).get_prev(float))
            while latest > now:
                latest = float(_iter(expr, latest).get_prev(float))
            t = next_after(expr, now)
            break
        t = next_after(expr, t)
    live = tuple(live_runs)
    if live and concurrency == "forbid":
        why = f"run due {stamp(latest)} skipped: run job {live[-1]} still live (concurrency forbid)"
        return RunDecision(latest, False, missed, (), why, t)
    replace = live if concurrency == "replace" else ()
    return RunDecision(latest, True, missed, replace, None, t)


def stamp(t: float) -> str:
    """``2024-05-01T12:05:00Z``: how runs are named and reported."""
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
