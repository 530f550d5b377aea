"""``agora job`` — submit and manage batch jobs through the batch framework's HTTP API.

The batch service is found with ``--batch URL``, ``AGORA_BATCH``, or by asking the master
(``--master``/``AGORA_MASTER``) for the framework named ``agora-batch``: the service publishes
its API address as its ``webui_url``. ``submit`` is ``job_submit.py``, ``history``
``job_history.py``; what they share, ``job_api.py``.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import attrs
import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from frameworks.batch import jobfile
from frameworks.cli.common import (
    CliError,
    HttpAnswerError,
    clock_time,
    console,
    emit,
    http_get_json,
    json_flag,
    master_group_class,
    master_option,
    state_option,
)
from frameworks.cli.follow import Chunk, LogStream, json_lines
from frameworks.cli.follow import follow as follow_logs
from frameworks.cli.job_api import (
    API,
    POLL,
    SHORT,
    TERMINAL,
    agent_text,
    short_state,
    stamp,
    tasks_summary,
    user_filter,
)
from frameworks.cli.job_history import history
from frameworks.cli.job_submit import submit

# the state of an attempt still under way (its record has a state only once it ended)
ACTIVE_STATE = {"LAUNCHING": "TASK_STAGING", "RUNNING": "TASK_RUNNING"}


def attempt_rows(detail: dict[str, Any]) -> list[tuple[str, ...]]:
    """``job show``'s table: one row per attempt of each task, oldest first; the task's index and
    phase only on its first row; a task never launched is one row of dashes. The latest attempt
    of a task under way shows its live state (TASK_STAGING, TASK_RUNNING)."""
    rows: list[tuple[str, ...]] = []
    for t in detail.get("task_list", []):
        history = t.get("history") or [{}]
        for n, a in enumerate(history):
            attempt = a.get("attempt")
            state = a.get("state") or (
                ACTIVE_STATE.get(t.get("phase", "")) if attempt is not None and n == len(history) - 1 else None
            )
            rows.append(
                (
                    str(t["index"]) if n == 0 else "",
                    t["phase"] if n == 0 else "",
                    "-" if attempt is None else str(attempt),
                    a.get("task_id") or "-",
                    "-" if attempt is None else agent_text(a),
                    clock_time(a.get("started_at")),
                    clock_time(a.get("ended_at")),
                    state or "-",
                    "-" if a.get("exit_code") is None else str(a["exit_code"]),
                    a.get("message") or "",
                )
            )
    return rows


@click.group(cls=master_group_class())
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


job.add_command(submit)
job.add_command(history)


@job.command(name="list")
@state_option(SHORT)
@click.option("--periodic", is_flag=True, help="Only periodic jobs: schedule, policy, next run, last run.")
@click.option("--start", "starts", is_flag=True,
              help="Pending jobs with their expected start (squeue --start), from running jobs' time limits.")
@click.option("--user", "-u", default=None, help="Only this user's jobs (squeue -u).")
@click.option("--me", "mine", is_flag=True, help="Only my jobs (the principal I authenticate as).")
@json_flag
@click.pass_context
def list_jobs(ctx: click.Context, state: str | None, periodic: bool, starts: bool, user: str | None, mine: bool) -> None:
    """List jobs (like squeue, with the reason a job waits)."""
    if periodic and starts:
        raise click.UsageError("--periodic and --start are separate views; give one")
    params = {}
    if state:
        params["state"] = state
    if periodic:
        params["periodic"] = "1"
    who = user_filter(ctx, user, mine)
    if who is not None:
        params["user"] = who
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    if starts:
        _list_starts(ctx, who)
        return
    data = API.get(ctx, "/jobs" + query)
    if periodic:
        _render_periodic(ctx, data)
        return

    def render(d: dict[str, Any]) -> None:
        table = Table(box=None, header_style="bold")
        for col in ("ID", "NAME", "USER", "ST", "QUEUE", "PRIO", "TASKS", "REASON"):
            table.add_column(col)
        for j in d["jobs"]:
            table.add_row(
                str(j["id"]),
                j["name"],
                j.get("user") or "-",
                short_state(j),
                j["queue"],
                str(j["priority"]),
                tasks_summary(j["tasks"]),
                j.get("reason") or "",
            )
        console().print(table)

    emit(ctx, data, render)


def _render_periodic(ctx: click.Context, data: dict[str, Any]) -> None:
    def render(d: dict[str, Any]) -> None:
        table = Table(box=None, header_style="bold")
        for col in ("ID", "NAME", "SCHEDULE", "CONCURRENCY", "NEXT RUN", "RUNS", "LAST RUN", "STATE"):
            table.add_column(col)
        for j in d["jobs"]:
            last = j.get("last_run_id")
            table.add_row(
                str(j["id"]), j["name"], j.get("schedule") or "", j.get("concurrency") or "",
                "held" if j.get("held") else stamp(j.get("next_run")) if j["state"] not in TERMINAL else "-",
                str(j.get("runs", 0)), "-" if last is None else f"job {last}", j["state"],
            )
        console().print(table)

    emit(ctx, data, render)


def _list_starts(ctx: click.Context, user: str | None) -> None:
    """``--start``: the pending jobs (not periodic templates), earliest expected start first,
    the unknown ones (N/A) last."""
    params = {"state": "PENDING", "start": "1", **({"user": user} if user is not None else {})}
    data = API.get(ctx, f"/jobs?{urllib.parse.urlencode(params)}")
    data["jobs"] = sorted(
        (j for j in data["jobs"] if not j.get("schedule")),
        key=lambda j: (j.get("expected_start") is None, j.get("expected_start") or 0.0, j["id"]),
    )

    def render(d: dict[str, Any]) -> None:
        table = Table(box=None, header_style="bold")
        for col in ("ID", "NAME", "USER", "PRIO", "START", "REASON"):
            table.add_column(col)
        for j in d["jobs"]:
            start = j.get("expected_start")
            table.add_row(str(j["id"]), j["name"], j.get("user") or "-", str(j["priority"]),
                          "N/A" if start is None else stamp(start), j.get("reason") or "")
        console().print(table)

    emit(ctx, data, render)


@job.command()
@click.argument("job_id", type=int)
@click.option("--toml", "as_toml", is_flag=True, help="Print the job as a job file that submits it again.")
@json_flag
@click.pass_context
def show(ctx: click.Context, job_id: int, as_toml: bool) -> None:
    """Show a job: its state, reason, what was done to it and by whom (hold, update,
    requeue...), and every attempt of every task (one row each, oldest first; a task's index and
    phase on its first row), with agent, times, state, exit code."""
    data = API.get(ctx, f"/jobs/{job_id}")
    if as_toml:
        if data["spec"].get("service"):
            raise click.ClickException(
                f"job {job_id} is a service job: a job file does not carry its inputs; "
                "submit it again with --service CMD --inputs FILE"
            )
        click.echo(jobfile.to_toml(data["spec"], f"job {job_id} ({data['state'].lower()}); submit with: agora job submit FILE"), nl=False)
        return

    def render(d: dict[str, Any]) -> None:
        con = console()
        con.print(
            f"[bold]job {d['id']}[/bold] {d['name']}  state={d['state']}  queue={d['queue']}  priority={d['priority']}"
            f"  user={d.get('user') or '-'}" + (f"  runs as={d['run_as']}" if d.get("run_as") else ""),
            markup=True, highlight=False,
        )
        if d.get("reason"):
            con.print(f"reason: {d['reason']}", markup=False)
        if d.get("gang_policy"):
            con.print(f"gang: {d['gang']} at once, policy {d['gang_policy']}, restarts {d.get('gang_restarts', 0)}"
                      + (f", exit code {d['exit_code']}" if d.get("exit_code") is not None else ""), markup=False)
        if d.get("service"):
            sv = d["service"]
            con.print(f"service tasks: {sv['done']} done, {sv['failed']} failed, {sv['cancelled']} cancelled, "
                      f"{sv['sent']} running, {sv['pending']} pending, of {sv['total']}", markup=False)
        if d.get("schedule"):
            con.print(f"schedule: {d['schedule']} ({d.get('concurrency')}); next run {stamp(d.get('next_run'))}; "
                      f"{d.get('runs', 0)} run(s)", markup=False)
        for c in d.get("changes") or ():
            con.print(f"{stamp(c['at'])}  {c['who']}: {c['what']}", markup=False, highlight=False)
        table = Table(box=None, header_style="bold")
        for col in ("TASK", "PHASE", "ATTEMPT", "TASK ID", "AGENT", "START", "END", "STATE", "EXIT", "MESSAGE"):
            table.add_column(col)
        for row in attempt_rows(d):
            table.add_row(*row)
        con.print(table)

    emit(ctx, data, render)


@job.command()
@click.argument("job_id", type=int)
@click.option("--state", "-s", default=None, type=click.Choice(["done", "failed", "cancelled", "pending", "sent"]),
              help="Only service tasks in this state.")
@json_flag
@click.pass_context
def results(ctx: click.Context, job_id: int, state: str | None) -> None:
    """A service job's service tasks, in input order: INDEX, STATE and the result (or why it
    failed), tab-separated, one line each (--json: one JSON object per line, with the input,
    failures and times)."""
    offset = 0
    while True:
        query = f"/jobs/{job_id}/results?offset={offset}&limit=10000" + (f"&state={state}" if state else "")
        page = API.get(ctx, query)
        for t in page["tasks"]:
            if (ctx.obj or {}).get("json"):
                click.echo(json.dumps(t))
            else:
                click.echo(f"{t['index']}\t{t['state']}\t{t['result'] if t['result'] is not None else ''}")
        if "next" not in page:
            return
        offset = page["next"]


def _act(ctx: click.Context, job_id: int, action: str, done: str, body: dict[str, Any] | None = None) -> None:
    data = API.post(ctx, f"/jobs/{job_id}/{action}", body or {})
    emit(ctx, data, lambda d: click.echo(f"job {d['id']} {done}" + (f" ({d['state'].lower()})" if action == "requeue" else "")))


@job.command()
@click.argument("job_id", type=int)
@json_flag
@click.pass_context
def hold(ctx: click.Context, job_id: int) -> None:
    """Hold a job: its pending tasks are not started (running ones go on), a periodic job starts
    no run, until `release` (scontrol hold)."""
    _act(ctx, job_id, "hold", "held")


@job.command()
@click.argument("job_id", type=int)
@json_flag
@click.pass_context
def release(ctx: click.Context, job_id: int) -> None:
    """Release a held job."""
    _act(ctx, job_id, "release", "released")


@job.command()
@click.argument("job_id", type=int)
@json_flag
@click.pass_context
def requeue(ctx: click.Context, job_id: int) -> None:
    """Run a finished or running job again from the start: running tasks are killed, every
    task goes back to pending, retries start afresh (scontrol requeue)."""
    _act(ctx, job_id, "requeue", "requeued")


@job.command()
@click.argument("job_id", type=int)
@click.option("--priority", type=int, default=None, help="New priority (higher starts first).")
@click.option("--time-limit", type=float, default=None, help="Seconds per task attempt (running ones too).")
@click.option("--count", "-n", type=click.IntRange(1), default=None,
              help="Add tasks, or drop pending ones that never ran (not under a started gang).")
@click.option("--cpus", type=float, default=None, help="Per task; only while no task of the job runs.")
@click.option("--mem", type=float, default=None, help="MB per task; only while no task runs.")
@click.option("--gpus", type=float, default=None, help="Per task; only while no task runs.")
@click.option("--disk", type=float, default=None, help="Per task; only while no task runs.")
@click.option("--gang", type=click.IntRange(0), default=None, help="Only while the gang has not started.")
@click.option("--queue", default=None, help="Only while no task runs.")
@click.option("--retries", type=click.IntRange(0), default=None, help="Retries per task.")
@click.option("--name", default=None, help="New job name.")
@click.option("--grace", type=float, default=None, help="Seconds between SIGTERM and SIGKILL when a task is killed.")
@click.option("--notify", default=None, help="POST the job's final state (JSON) to this http(s) URL.")
@click.option("--schedule", default=None, help="A periodic job's cron expression.")
@click.option("--concurrency", default=None, type=click.Choice(["allow", "forbid", "replace"]),
              help="Periodic: a run falls due while the last one is live: start anyway, skip it, or replace it.")
@click.option("--preemptible/--no-preemptible", default=None,
              help="May run on revocable resources, and be preempted by a higher-priority --preempt job.")
@click.option("--preempt/--no-preempt", default=None,
              help="When it cannot fit, evict lower-priority --preemptible tasks of the same owner.")
@json_flag
@click.pass_context
def update(ctx: click.Context, job_id: int, **fields: Any) -> None:
    """Change a job that has not ended (scontrol update): priority, time limit, retries, name
    at any time; per-task resources, gang and queue only while none of its tasks runs; the count
    by adding tasks or dropping pending ones. A refused update changes nothing."""
    names = {"retries": "max_retries"}
    body = {names.get(k, k): v for k, v in fields.items() if v is not None and k != "as_json"}
    if not body:
        raise click.UsageError("give at least one field to change (see --help)")
    data = API.post(ctx, f"/jobs/{job_id}/update", body)
    emit(ctx, data, lambda d: click.echo(f"job {d['id']} updated"))


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

    noted: set[object] = set()

    def read(offset: int) -> Chunk:
        if tasks.skip(index):
            return Chunk("")
        path = f"/jobs/{job_id}/logs?task={index}&stream={stream}&offset={offset}"
        try:
            chunk = http_get_json(API.url(ctx) + path)
        except HttpAnswerError as exc:
            if lenient and exc.code in (404, 503):
                return Chunk("")
            raise click.ClickException(str(exc)) from exc
        except CliError as exc:
            raise click.ClickException(str(exc)) from exc
        if not chunk.get("data"):
            tasks.read_empty(index)
        kept = chunk.get("kept")
        if isinstance(kept, dict) and chunk.get("attempt") not in noted:  # the sandbox is gone: say what this is
            noted.add(chunk.get("attempt"))
            click.echo(f"job {job_id} task {index}: {kept.get('note')}", err=True)
        offset = chunk.get("offset")
        return Chunk(str(chunk.get("data", "")), chunk.get("attempt"), offset if isinstance(offset, int) else None)

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


@job.command()
@click.option("--user", "-u", default=None, help="Only this user's jobs.")
@click.option("--me", "mine", is_flag=True, help="Only my jobs.")
@json_flag
@click.pass_context
def priority(ctx: click.Context, user: str | None, mine: bool) -> None:
    """Each pending job's priority and its weighted factors, highest first (like sprio): the
    owner's fair share, the job's own priority, its age and size."""
    who = user_filter(ctx, user, mine)
    data = API.get(ctx, "/priority")
    if who is not None:
        data["jobs"] = [j for j in data["jobs"] if j.get("user") == who]

    def render(d: dict[str, Any]) -> None:
        w = d["weights"]
        table = Table(box=None, header_style="bold")
        for col in ("ID", "USER", "QUEUE", "PRIORITY", "FAIRSHARE", "JOBPRIO", "AGE", "SIZE", "NICE"):
            table.add_column(col, justify="right" if col not in ("USER", "QUEUE") else "left")
        for j in d["jobs"]:
            table.add_row(
                str(j["id"]), j.get("user") or "-", j["queue"], f"{j['priority']:.0f}",
                f"{w['weight_fairshare'] * j['fairshare']:.0f}", f"{w['weight_priority'] * j['job_priority']:.0f}",
                f"{w['weight_age'] * j['age']:.0f}", f"{w['weight_size'] * j['size']:.0f}", str(j["nice"]),
            )
        console().print(table)
        click.echo(
            f"weights: fairshare {w['weight_fairshare']:g}, priority {w['weight_priority']:g}, "
            f"age {w['weight_age']:g} (full at {w['max_age']:g}s), size {w['weight_size']:g}"
        )

    emit(ctx, data, render)
