"""``agora job`` — submit and manage batch jobs through the batch framework's HTTP API.

The batch service is found with ``--batch URL``, ``AGORA_BATCH``, or by asking the master
(``--master``/``AGORA_MASTER``) for the framework named ``agora-batch``: the service publishes
its API address as its ``webui_url``.
"""

from __future__ import annotations

import sys
import time
import urllib.parse
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from frameworks.cli.common import (
    ServiceApi,
    clock_time,
    console,
    emit,
    json_flag,
)

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
SHORT = {"PENDING": "PD", "RUNNING": "R", "SUCCEEDED": "CD", "FAILED": "F", "CANCELLED": "CA"}
POLL = 0.25  # seconds between polls while waiting or following (a CLI loop, not a test)
API = ServiceApi("agora-batch", "batch", "AGORA_BATCH")


def batch_url(batch: str | None, master: str | None) -> str:
    return API.base(batch, master)


def _tasks_summary(counts: dict[str, int]) -> str:
    return " ".join(f"{k.lower()}:{v}" for k, v in sorted(counts.items()))


@click.group()
@click.option(
    "--batch", envvar="AGORA_BATCH", default=None, help="Batch framework URL (default: ask the master)."
)
@click.option(
    "--master", envvar="AGORA_MASTER", default=None, help="Master host:port (default 127.0.0.1:5050)."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.pass_context
def job(ctx: click.Context, batch: str | None, master: str | None, as_json: bool) -> None:
    """Submit and manage batch jobs."""
    ctx.ensure_object(dict)
    ctx.obj.update(batch=batch, master=master, json=as_json)


def _pairs(values: tuple[str, ...], what: str) -> dict[str, str]:
    out = {}
    for v in values:
        if "=" not in v:
            raise click.BadParameter(f"{what} must look like NAME=VALUE, got {v!r}")
        k, _, val = v.partition("=")
        out[k] = val
    return out


@job.command(context_settings={"ignore_unknown_options": True})
@click.option("--name", default=None, help="Job name (default: the command).")
@click.option(
    "--count", "-n", default=1, show_default=True, type=click.IntRange(1), help="Tasks (a job array)."
)
@click.option(
    "--gang", default=0, show_default=True, type=click.IntRange(0), help="Tasks that must start together."
)
@click.option("--cpus", default=1.0, show_default=True, type=float)
@click.option("--mem", default=128.0, show_default=True, type=float, help="MB per task.")
@click.option("--gpus", default=0.0, show_default=True, type=float)
@click.option("--disk", default=0.0, show_default=True, type=float)
@click.option("--priority", default=0, show_default=True, type=int)
@click.option("--queue", default="*", show_default=True, help="Queue (the role offers come from).")
@click.option("--after", multiple=True, type=int, help="Run after this job succeeds (repeatable).")
@click.option("--after-any", multiple=True, type=int, help="Run after this job ends, however it ends.")
@click.option("--retries", default=0, show_default=True, type=click.IntRange(0), help="Retries per task.")
@click.option("--time-limit", default=None, type=float, help="Seconds per task attempt.")
@click.option("--env", multiple=True, help="NAME=VALUE (repeatable).")
@click.option("--constraint", multiple=True, help="Agent attribute NAME=VALUE (repeatable).")
@click.option("--preemptible", is_flag=True, help="May run on revocable resources.")
@click.option("--shell", "use_shell", is_flag=True, help="Run the command through /bin/sh -c.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@json_flag
@click.pass_context
def submit(
    ctx: click.Context,
    name: str | None,
    count: int,
    gang: int,
    cpus: float,
    mem: float,
    gpus: float,
    disk: float,
    priority: int,
    queue: str,
    after: tuple[int, ...],
    after_any: tuple[int, ...],
    retries: int,
    time_limit: float | None,
    env: tuple[str, ...],
    constraint: tuple[str, ...],
    preemptible: bool,
    use_shell: bool,
    command: tuple[str, ...],
) -> None:
    """Submit CMD [ARGS...] (put `--` before the command); prints the job id."""
    body: dict[str, Any] = {
        "count": count,
        "gang": gang,
        "cpus": cpus,
        "mem": mem,
        "gpus": gpus,
        "disk": disk,
        "priority": priority,
        "queue": queue,
        "max_retries": retries,
        "env": _pairs(env, "--env"),
        "constraints": _pairs(constraint, "--constraint"),
        "after": [{"job_id": j, "kind": "success"} for j in after]
        + [{"job_id": j, "kind": "any"} for j in after_any],
        "preemptible": preemptible,
    }
    if name:
        body["name"] = name
    if time_limit is not None:
        body["time_limit"] = time_limit
    if use_shell:
        body["shell"] = " ".join(command)
    else:
        body["argv"] = list(command)
    result = API.post(ctx, "/jobs", body)
    emit(ctx, result, lambda r: click.echo(r["id"]))


@job.command(name="list")
@click.option("--state", default=None, help="Only jobs in this state.")
@json_flag
@click.pass_context
def list_jobs(ctx: click.Context, state: str | None) -> None:
    """List jobs (like squeue, with the reason a job waits)."""
    query = f"?state={urllib.parse.quote(state.upper())}" if state else ""
    data = API.get(ctx, "/jobs" + query)

    def render(d: dict[str, Any]) -> None:
        table = Table(box=None, header_style="bold")
        for col in ("ID", "NAME", "ST", "QUEUE", "PRIO", "TASKS", "REASON"):
            table.add_column(col)
        for j in d["jobs"]:
            table.add_row(
                str(j["id"]),
                j["name"],
                SHORT.get(j["state"], j["state"]),
                j["queue"],
                str(j["priority"]),
                _tasks_summary(j["tasks"]),
                j.get("reason") or "",
            )
        console().print(table)

    emit(ctx, data, render)


@job.command()
@click.argument("job_id", type=int)
@json_flag
@click.pass_context
def show(ctx: click.Context, job_id: int) -> None:
    """Show a job: its spec, state, reason, and every task attempt."""
    data = API.get(ctx, f"/jobs/{job_id}")

    def render(d: dict[str, Any]) -> None:
        con = console()
        con.print(
            f"[bold]job {d['id']}[/bold] {d['name']}  state={d['state']}  queue={d['queue']}  priority={d['priority']}"
        )
        if d.get("reason"):
            con.print(f"reason: {d['reason']}")
        table = Table(box=None, header_style="bold")
        for col in ("TASK", "PHASE", "ATTEMPT", "AGENT", "START", "END", "STATE", "EXIT", "MESSAGE"):
            table.add_column(col)
        for t in d["task_list"]:
            hist = t["history"] or [{}]
            a = hist[-1]
            table.add_row(
                str(t["index"]),
                t["phase"],
                str(t["attempt"]),
                a.get("hostname") or "-",
                clock_time(a.get("started_at")),
                clock_time(a.get("ended_at")),
                a.get("state") or "-",
                "-" if a.get("exit_code") is None else str(a["exit_code"]),
                a.get("message") or "",
            )
        con.print(table)

    emit(ctx, data, render)


@job.command()
@click.argument("job_id", type=int)
@json_flag
@click.pass_context
def cancel(ctx: click.Context, job_id: int) -> None:
    """Cancel a job: pending tasks are dropped, running ones killed."""
    data = API.post(ctx, f"/jobs/{job_id}/cancel", {})
    emit(ctx, data, lambda d: click.echo(f"job {d['id']} {d['state'].lower()}"))


@job.command()
@click.argument("job_id", type=int)
@click.option("--task", "index", default=0, show_default=True, type=int, help="Task index.")
@click.option("--stderr", is_flag=True, help="Show stderr instead of stdout.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the task ends.")
@click.pass_context
def logs(ctx: click.Context, job_id: int, index: int, stderr: bool, follow: bool) -> None:
    """Print a task's stdout (or stderr) from the agent's sandbox."""
    stream = "stderr" if stderr else "stdout"
    offset = 0
    ended = False
    while True:
        chunk = API.get(ctx, f"/jobs/{job_id}/logs?task={index}&stream={stream}&offset={offset}")
        data = chunk.get("data", "")
        if data:
            sys.stdout.write(data)
            sys.stdout.flush()
            offset += len(data.encode())
        if not follow:
            return
        if not data:
            if ended:
                return  # read to the end after the task ended
            # Only that task (a service that ignores ?task= sends them all; pick it by index).
            job_state = API.get(ctx, f"/jobs/{job_id}?task={index}")
            phase = next(t["phase"] for t in job_state["task_list"] if t["index"] == index)
            if phase in TERMINAL:
                ended = True  # what it wrote just before it ended is still to be read
                continue
            time.sleep(POLL)


@job.command()
@click.argument("job_id", type=int)
@click.option("--timeout", default=None, type=float, help="Give up after this many seconds (exit 2).")
@json_flag
@click.pass_context
def wait(ctx: click.Context, job_id: int, timeout: float | None) -> None:
    """Wait for a job to end; exit 0 only if it succeeded (1 failed/cancelled, 2 timeout)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    show_bar = sys.stdout.isatty() and not ctx.obj["json"]
    progress = Progress(
        TextColumn("job {task.fields[job]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[reason]}"),
    )
    bar = progress.add_task("wait", total=None, job=job_id, reason="") if show_bar else None
    if show_bar:
        progress.start()
    try:
        while True:
            # The summary: counts and reason, not every task (a poll costs O(1), whatever the size).
            d = API.get(ctx, f"/jobs/{job_id}?summary=1")
            done = d["tasks"].get("SUCCEEDED", 0)
            if bar is not None:
                progress.update(bar, total=d["count"], completed=done, reason=d.get("reason") or "")
            if d["state"] in TERMINAL:
                break
            if deadline is not None and time.monotonic() > deadline:
                if show_bar:
                    progress.stop()
                click.echo(f"job {job_id} still {d['state'].lower()} after {timeout:g}s", err=True)
                ctx.exit(2)
            time.sleep(POLL)
    finally:
        if show_bar:
            progress.stop()
    if ctx.obj["json"]:
        d = API.get(ctx, f"/jobs/{job_id}")  # the whole job, once
    emit(
        ctx,
        d,
        lambda x: click.echo(
            f"job {x['id']} {x['state'].lower()}" + (f": {x['reason']}" if x.get("reason") else "")
        ),
    )
    ctx.exit(0 if d["state"] == "SUCCEEDED" else 1)
