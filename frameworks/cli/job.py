"""``agora job`` — submit and manage batch jobs through the batch framework's HTTP API.

The batch service is found with ``--batch URL``, ``AGORA_BATCH``, or by asking the master
(``--master``/``AGORA_MASTER``) for the framework named ``agora-batch``: the service publishes
its API address as its ``webui_url``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, TextIO

import attrs
import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from frameworks.batch import jobfile
from frameworks.cli.common import (
    CliError,
    HttpAnswerError,
    ServiceApi,
    clock_time,
    console,
    emit,
    http_get_json,
    json_flag,
    local_user,
    master_group_class,
    master_option,
    state_option,
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


def agent_text(a: dict[str, Any]) -> str:
    """An attempt's agent as ``agora agent show`` takes it: the ``S<n>`` end of its id (hostnames
    are all alike on a local cluster), else the whole id, else the hostname."""
    aid = str(a.get("agent_id") or "")
    tail = aid.rsplit("-", 1)[-1]
    if tail.startswith("S") and tail[1:].isdigit():
        return tail
    return aid or a.get("hostname") or "-"


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


def _tasks_summary(counts: dict[str, int]) -> str:
    return " ".join(f"{k.lower()}:{v}" for k, v in sorted(counts.items()))


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
    "--gang", default=0, show_default=True, type=click.IntRange(0),
    help="Tasks that must start together, all or none (0: no gang, each task starts on its own).",
)
@click.option("--cpus", default=1.0, show_default=True, type=float, help="CPUs per task (fractions allowed).")
@click.option("--mem", default=128.0, show_default=True, type=float, help="MB of memory per task.")
@click.option("--gpus", default=0.0, show_default=True, type=float, help="GPUs per task.")
@click.option("--disk", default=0.0, show_default=True, type=float, help="MB of disk per task.")
@click.option("--priority", default=0, show_default=True, type=int,
              help="Higher starts first (equal: the earlier job); may be negative.")
@click.option("--queue", default="*", show_default=True,
              help="Queue (the role offers come from); the batch framework refuses one it does not subscribe to.")
@click.option("--after", multiple=True, type=int, help="Run after this job succeeds (repeatable).")
@click.option("--after-any", multiple=True, type=int, help="Run after this job ends, however it ends.")
@click.option("--retries", default=0, show_default=True, type=click.IntRange(0), help="Retries per task (of a gang with abort/restart: restarts of the whole gang).")
@click.option("--time-limit", default=None, type=float, help="Seconds per task attempt (a gang with abort/restart: per run of the gang).")
@click.option("--env", multiple=True, help="NAME=VALUE (repeatable).")
@click.option("--constraint", multiple=True, help="Agent attribute NAME=VALUE (repeatable).")
@click.option("--ports", default=0, show_default=True, type=click.IntRange(0, 1000),
              help="Ports per task from its offer, exported as PORT0..PORT<K-1>.")
@click.option("--gang-policy", type=click.Choice(["abort", "restart", "continue"]), default=None,
              help="When a gang's task fails: abort (kill the others, fail the job; the default), restart "
                   "(the whole gang runs again, as one of --retries; the default with --retries) or continue "
                   "(the others run on, each task retried alone).")
@click.option("--after-notok", multiple=True, type=int,
              help="Run after this job fails or is cancelled (Slurm afternotok); cancelled if it succeeds.")
@click.option("--singleton", is_flag=True, help="Wait while an earlier job of the same name and user has not ended.")
@click.option("--preemptible", is_flag=True,
              help="May run on revocable resources, and be preempted (requeued) by a higher-priority --preempt job.")
@click.option("--preempt", is_flag=True,
              help="When it cannot fit, evict lower-priority --preemptible tasks of the same owner (requeued).")
@click.option("--grace", default=None, type=float, help="Seconds between SIGTERM and SIGKILL when a task is killed.")
@click.option("--schedule", default=None,
              help='Periodic: a cron expression in UTC ("*/5 * * * *"; 6 fields: seconds first); each run is a job.')
@click.option("--concurrency", default=None, type=click.Choice(["allow", "forbid", "replace"]),
              help="Periodic: a run falls due while the last one is live: start anyway, skip it, or replace it.")
@click.option("--notify", default=None, help="POST the job's final state (JSON) to this http(s) URL.")
@click.option("--file", "-f", "job_file", default=None, type=click.Path(dir_okay=False, exists=True),
              help="Submit the job(s) of a TOML job file (also: agora job submit FILE.toml).")
@click.option("--shell", "use_shell", is_flag=True, help="Run the command through /bin/sh -c.")
@click.option("--service", "service", default=None, metavar="CMD",
              help="A service job: CMD (run by /bin/sh -c) starts once per task (--count of them) and takes the "
                   "--inputs one line each on stdin, writing one result line each on stdout.")
@click.option("--inputs", "inputs_file", default=None, type=click.File("r"),
              help="With --service: one input (service task) per line; - reads stdin.")
@click.option("--window", default=None, type=click.IntRange(1, 100_000),
              help="With --service: service tasks in flight per instance (default 256).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
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
    after_notok: tuple[int, ...],
    singleton: bool,
    retries: int,
    time_limit: float | None,
    env: tuple[str, ...],
    constraint: tuple[str, ...],
    preemptible: bool,
    ports: int,
    gang_policy: str | None,
    preempt: bool,
    grace: float | None,
    schedule: str | None,
    concurrency: str | None,
    notify: str | None,
    job_file: str | None,
    use_shell: bool,
    service: str | None,
    inputs_file: TextIO | None,
    window: int | None,
    command: tuple[str, ...],
) -> None:
    """Submit CMD [ARGS...] (put `--` before the command), or the jobs of a TOML job file
    (`agora job submit job.toml`: the same fields as these flags, several jobs as [[job]]
    tables, dependencies by name); prints the job id (a file: one `ID NAME` line per job)."""
    if job_file is None and len(command) == 1 and command[0].endswith(".toml") and os.path.isfile(command[0]):
        job_file = command[0]
        command = ()
    if job_file is not None:
        given = [
            p.opts[0] for p in ctx.command.params
            if p.name not in ("job_file", "command", "as_json")
            and ctx.get_parameter_source(p.name or "") is click.core.ParameterSource.COMMANDLINE
        ]
        if given or command:
            raise click.UsageError(
                f"a job file takes no command or flags ({', '.join(given) or ' '.join(command)}): put them in the file"
            )
        _submit_file(ctx, job_file)
        return
    if service is not None:
        if command or use_shell:
            raise click.UsageError("--service CMD is the command: give no other (nor --shell)")
        if inputs_file is None:
            raise click.UsageError("--service needs --inputs FILE (one input per line)")
        command, use_shell = (service,), True
    elif inputs_file is not None or window is not None:
        raise click.UsageError("--inputs and --window go with --service CMD")
    if not command:
        raise click.UsageError("give the command to run (after --), or a job file (job.toml)")
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
        + [{"job_id": j, "kind": "any"} for j in after_any]
        + [{"job_id": j, "kind": "notok"} for j in after_notok],
        "preemptible": preemptible,
        "preempt": preempt,
        "singleton": singleton,
    }
    for key, value in (("grace", grace), ("schedule", schedule), ("concurrency", concurrency), ("notify", notify)):
        if value is not None:
            body[key] = value
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
    if inputs_file is not None:
        body["service"] = True
        body["inputs"] = inputs_file.read().splitlines()
        if window is not None:
            body["window"] = window
    result = API.post(ctx, "/jobs", body)
    emit(ctx, result, lambda r: click.echo(r["id"]))


def _submit_file(ctx: click.Context, path: str) -> None:
    """Validate the whole file here (errors name the line and the field), then submit all its
    jobs in one request: the service makes all of them or none."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        bodies = jobfile.parse(text, path)
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"{path}: {exc}") from exc
    except jobfile.JobFileError as exc:
        raise click.ClickException(str(exc)) from exc
    result = API.post(ctx, "/jobs", {"jobs": bodies})

    def render(r: dict[str, Any]) -> None:
        if len(r["ids"]) == 1:
            click.echo(r["ids"][0])
        else:
            for j in r["jobs"]:
                click.echo(f"{j['id']} {j['name']}")

    emit(ctx, result, render)


def me(ctx: click.Context) -> str:
    """Who "me" is to the batch service: the principal it authenticates this CLI as, else (no
    authentication) this account's name, the owner the CLI's submissions claim."""
    who = API.get(ctx, "/whoami") or {}
    return str(who.get("principal") or local_user() or "anonymous")


def user_filter(ctx: click.Context, user: str | None, mine: bool) -> str | None:
    if user is not None and mine:
        raise click.UsageError("give --user NAME or --me, not both")
    return me(ctx) if mine else user


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
                _tasks_summary(j["tasks"]),
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
                "held" if j.get("held") else _stamp(j.get("next_run")) if j["state"] not in TERMINAL else "-",
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
                          "N/A" if start is None else _stamp(start), j.get("reason") or "")
        console().print(table)

    emit(ctx, data, render)


def _stamp(t: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t)) if t else "-"


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


@job.command()
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
                _stamp(r.get("started_at")), _stamp(r.get("ended_at")),
                _secs(r.get("cpu_seconds")), _mb(r.get("mem_peak_bytes")), _tasks_summary(r["tasks"]),
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
                _stamp(r.get("started_at")), _stamp(r.get("ended_at")),
                elapsed_text(r.get("started_at"), r.get("ended_at")),
                _secs(r.get("cpu_seconds")), _mb(r.get("mem_peak_bytes")),
            )
        console().print(table)

    emit(ctx, rows, render_attempts if attempts else render_jobs)


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
            con.print(f"schedule: {d['schedule']} ({d.get('concurrency')}); next run {_stamp(d.get('next_run'))}; "
                      f"{d.get('runs', 0)} run(s)", markup=False)
        for c in d.get("changes") or ():
            con.print(f"{_stamp(c['at'])}  {c['who']}: {c['what']}", markup=False, highlight=False)
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
