"""``agora job`` — submit and manage batch jobs through the batch framework's HTTP API.

The batch service is found with ``--batch URL``, ``AGORA_BATCH``, or by asking the master
(``--master``/``AGORA_MASTER``) for the framework named ``agora-batch``: the service publishes
its API address as its ``webui_url``.
"""

from __future__ import annotations

import sys
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import attrs
import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from frameworks.cli.common import (
    CliError,
    ServiceApi,
    clock_time,
    console,
    emit,
    error_text,
    http_get_json,
    json_flag,
    master_option,
)
from frameworks.cli.follow import Chunk, LogStream, json_lines
from frameworks.cli.follow import follow as follow_logs

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


def attempt_rows(detail: dict[str, Any]) -> list[tuple[str, ...]]:
    """``job show``'s table: one row per attempt of each task, oldest first; the task's index and
    phase only on its first row; a task never launched is one row of dashes."""
    rows: list[tuple[str, ...]] = []
    for t in detail.get("task_list", []):
        for n, a in enumerate(t.get("history") or [{}]):
            attempt = a.get("attempt")
            rows.append(
                (
                    str(t["index"]) if n == 0 else "",
                    t["phase"] if n == 0 else "",
                    "-" if attempt is None else str(attempt),
                    a.get("task_id") or "-",
                    a.get("hostname") or "-",
                    clock_time(a.get("started_at")),
                    clock_time(a.get("ended_at")),
                    a.get("state") or "-",
                    "-" if a.get("exit_code") is None else str(a["exit_code"]),
                    a.get("message") or "",
                )
            )
    return rows


def _tasks_summary(counts: dict[str, int]) -> str:
    return " ".join(f"{k.lower()}:{v}" for k, v in sorted(counts.items()))


@click.group()
@click.option(
    "--batch", envvar="AGORA_BATCH", default=None, help="Batch framework URL (default: ask the master)."
)
@master_option
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
@click.option("--queue", default="*", show_default=True,
              help="Queue (the role offers come from); the batch framework refuses one it does not subscribe to.")
@click.option("--after", multiple=True, type=int, help="Run after this job succeeds (repeatable).")
@click.option("--after-any", multiple=True, type=int, help="Run after this job ends, however it ends.")
@click.option("--retries", default=0, show_default=True, type=click.IntRange(0), help="Retries per task (of a gang with abort/restart: restarts of the whole gang).")
@click.option("--time-limit", default=None, type=float, help="Seconds per task attempt (a gang with abort/restart: per run of the gang).")
@click.option("--env", multiple=True, help="NAME=VALUE (repeatable).")
@click.option("--constraint", multiple=True, help="Agent attribute NAME=VALUE (repeatable).")
@click.option("--preemptible", is_flag=True, help="May run on revocable resources.")
@click.option("--ports", default=0, show_default=True, type=click.IntRange(0, 1000),
              help="Ports per task from its offer, exported as PORT0..PORT<K-1>.")
@click.option("--gang-policy", type=click.Choice(["abort", "restart", "continue"]), default=None,
              help="When a gang's task fails: abort (kill the others, fail the job; the default), restart "
                   "(the whole gang runs again, as one of --retries; the default with --retries) or continue "
                   "(the others run on, each task retried alone).")
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
    ports: int,
    gang_policy: str | None,
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
    if ports:
        body["ports"] = ports
    if gang_policy is not None:
        body["gang_policy"] = gang_policy
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
                short_state(j),
                j["queue"],
                str(j["priority"]),
                _tasks_summary(j["tasks"]),
                j.get("reason") or "",
            )
        console().print(table)

    emit(ctx, data, render)


def _stamp(t: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t)) if t else "-"


@job.command()
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1), help="The N most recent.")
@json_flag
@click.pass_context
def history(ctx: click.Context, limit: int) -> None:
    """Finished jobs, newest first, like sacct: state, exit code, elapsed, start, end."""
    done = [j for j in API.get(ctx, "/jobs")["jobs"] if j["state"] in TERMINAL]
    done.sort(key=lambda j: (j.get("ended_at") or 0.0, j["id"]), reverse=True)
    rows = []
    for j in done[:limit]:
        start, end = j.get("started_at"), j.get("ended_at")
        rows.append(
            {
                **j,
                "exit_code": exit_code(API.get(ctx, f"/jobs/{j['id']}")),
                "elapsed": None if start is None or end is None else max(0.0, end - start),
            }
        )

    def render(rs: list[dict[str, Any]]) -> None:
        table = Table(box=None, header_style="bold")
        for col in ("ID", "NAME", "QUEUE", "STATE", "EXIT", "ELAPSED", "START", "END", "TASKS"):
            table.add_column(col)
        for r in rs:
            table.add_row(
                str(r["id"]),
                r["name"],
                r["queue"],
                r["state"],
                "-" if r["exit_code"] is None else str(r["exit_code"]),
                elapsed_text(r.get("started_at"), r.get("ended_at")),
                _stamp(r.get("started_at")),
                _stamp(r.get("ended_at")),
                _tasks_summary(r["tasks"]),
            )
        console().print(table)

    emit(ctx, rows, render)


@job.command()
@click.argument("job_id", type=int)
@json_flag
@click.pass_context
def show(ctx: click.Context, job_id: int) -> None:
    """Show a job: its state, reason, and every attempt of every task (one row each, oldest
    first; a task's index and phase on its first row), with agent, times, state, exit code."""
    data = API.get(ctx, f"/jobs/{job_id}")

    def render(d: dict[str, Any]) -> None:
        con = console()
        con.print(
            f"[bold]job {d['id']}[/bold] {d['name']}  state={d['state']}  queue={d['queue']}  priority={d['priority']}"
        )
        if d.get("reason"):
            con.print(f"reason: {d['reason']}")
        if d.get("gang_policy"):
            con.print(f"gang: {d['gang']} at once, policy {d['gang_policy']}, restarts {d.get('gang_restarts', 0)}"
                      + (f", exit code {d['exit_code']}" if d.get("exit_code") is not None else ""))
        table = Table(box=None, header_style="bold")
        for col in ("TASK", "PHASE", "ATTEMPT", "TASK ID", "AGENT", "START", "END", "STATE", "EXIT", "MESSAGE"):
            table.add_column(col)
        for row in attempt_rows(d):
            table.add_row(*row)
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
@click.option("--task", "index", default=None, type=click.IntRange(0), help="Only this task (default: all).")
@click.option("--stderr", is_flag=True, help="Show stderr instead of stdout.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the task (or job) ends.")
@json_flag
@click.pass_context
def logs(ctx: click.Context, job_id: int, index: int | None, stderr: bool, follow: bool) -> None:
    """Print stdout (or stderr) from the agents' sandboxes: one task as it is, or every task of the
    job with each line prefixed by the task's index ([3] ...); -f follows until the end. --json:
    one {"job", "task", "stream", "line"} object per line."""
    stream = "stderr" if stderr else "stdout"
    count = int(API.get(ctx, f"/jobs/{job_id}?summary=1")["count"])
    if index is None and count == 1:
        index = 0
    if index is not None and index >= count:
        raise click.ClickException(f"job {job_id} has no task {index} (it has {count})")
    as_json = bool(ctx.obj["json"])

    def render(i: int) -> Callable[[str], str] | None:
        return json_lines(job=job_id, task=i, stream=stream) if as_json else None

    if index is not None:
        one = TaskLogs(lambda: {})
        reader = _log_reader(ctx, job_id, index, stream, follow, one)
        streams = [LogStream(reader, prefix="" if as_json else None, render=render(index))]
    else:
        tasks = TaskLogs(lambda: {t["index"]: t for t in API.get(ctx, f"/jobs/{job_id}")["task_list"]})
        streams = [
            LogStream(_log_reader(ctx, job_id, i, stream, True, tasks), prefix="" if as_json else f"[{i}] ", render=render(i))
            for i in range(count)
        ]

    def done() -> bool:
        if index is not None:
            d = API.get(ctx, f"/jobs/{job_id}?task={index}")
            return next(t["phase"] for t in d["task_list"] if t["index"] == index) in TERMINAL
        tasks.refresh()  # one request per round tells which tasks are worth reading
        return tasks.job_over()

    def write(piece: str) -> None:
        sys.stdout.write(piece)
        sys.stdout.flush()

    try:
        follow_logs(streams, keep_following=follow, done=done, sleep=time.sleep, write=write, poll=POLL)
    except KeyboardInterrupt:
        ctx.exit(130)


@attrs.define
class TaskLogs:
    """Which tasks of a job a follower still needs to read, so a round over a big job asks the
    service only about tasks that ran: not a task that never started, nor one that has ended
    and been read to its end since. ``fetch`` gives the job's tasks by index (``task_list``)."""

    fetch: Callable[[], dict[int, dict[str, Any]]]
    tasks: dict[int, dict[str, Any]] = attrs.field(factory=dict)
    finished: set[int] = attrs.field(factory=set)

    def refresh(self) -> None:
        self.tasks = self.fetch()

    def job_over(self) -> bool:
        return bool(self.tasks) and all(t["phase"] in TERMINAL for t in self.tasks.values())

    def skip(self, index: int) -> bool:
        t = self.tasks.get(index)
        if t is None:
            return False  # not known yet (the first round): read it
        return not t.get("history") or index in self.finished

    def read_empty(self, index: int) -> None:
        """Read to the end: once the task has ended for good there is nothing more to come."""
        t = self.tasks.get(index)
        if t is not None and t["phase"] in TERMINAL:
            self.finished.add(index)


def _log_reader(
    ctx: click.Context, job_id: int, index: int, stream: str, lenient: bool, tasks: TaskLogs
) -> Callable[[int], Chunk]:
    """Reads task ``index``'s current attempt (its number is the chunk's generation: a retry starts
    a new file). ``lenient``: a task not started yet, or whose agent is gone, reads as empty."""

    def read(offset: int) -> Chunk:
        if tasks.skip(index):
            return Chunk("")
        path = f"/jobs/{job_id}/logs?task={index}&stream={stream}&offset={offset}"
        try:
            chunk = http_get_json(API.url(ctx) + path)
        except CliError as exc:
            if lenient and (" 404 " in str(exc) or " 503 " in str(exc)):
                return Chunk("")
            raise click.ClickException(error_text(str(exc))) from exc
        if not chunk.get("data"):
            tasks.read_empty(index)
        return Chunk(str(chunk.get("data", "")), chunk.get("attempt"))

    return read


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
