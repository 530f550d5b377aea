"""``agora elastic`` — submit and manage elastic training jobs through the elastic framework's API.

The service is found with ``--elastic URL``, ``AGORA_ELASTIC``, or by asking the master
(``--master``/``AGORA_MASTER``) for the framework named ``agora-elastic``: the service publishes
its API address as its ``webui_url``.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from frameworks.cli.common import (
    CliError,
    ServiceApi,
    answer_error,
    clock_time,
    console,
    emit,
    http_error_detail,
    json_flag,
    master_group_class,
    master_option,
    open_url,
    state_option,
    unreachable,
)
from frameworks.cli.follow import LineBuffer, json_lines

FRAMEWORK_NAME = "agora-elastic"
SHORT = {
    "PENDING": "PD",
    "STARTING": "ST",
    "RUNNING": "R",
    "SCALING": "SC",
    "SUCCEEDED": "CD",
    "FAILED": "F",
    "CANCELLED": "CA",
}


TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")
API = ServiceApi(FRAMEWORK_NAME, "elastic", "AGORA_ELASTIC")


def elastic_url(elastic: str | None, master: str | None) -> str:
    return API.base(elastic, master)


def post_toml(url: str, text: str, timeout: float = 10.0) -> Any:
    req = urllib.request.Request(
        url,
        data=text.encode(),
        method="POST",
        headers={"Content-Type": "application/toml", "Accept": "application/json"},
    )
    try:
        with open_url(req, timeout) as resp:  # the CA and the token, as every other request
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        err = answer_error("POST", url, exc.code, http_error_detail(exc))
        raise CliError(f"submit refused: {err}") from exc
    except OSError as exc:  # the answer broke off while being read
        raise unreachable(url, exc) from exc


def _num(v: Any, fmt: str = "{:.3f}") -> str:
    return "-" if v is None else fmt.format(v)


@click.group(cls=master_group_class())
@click.option(
    "--elastic", envvar="AGORA_ELASTIC", default=None, help="Elastic framework URL (default: ask the master)."
)
@master_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.pass_context
def elastic(ctx: click.Context, elastic: str | None, master: str | None, as_json: bool) -> None:
    """Submit and manage elastic training jobs (workers grow and shrink between min and max)."""
    ctx.ensure_object(dict)
    ctx.obj.update(elastic=elastic, master=master, json=as_json)


@elastic.command()
@click.argument("job_file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--set",
    "-s",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a spec field (scaling.max_workers=8, or a unique bare name: epochs=20); repeatable.",
)
@click.option(
    "--max", "max_workers", type=click.IntRange(1), default=None, help="Override scaling.max_workers."
)
@click.option(
    "--min", "min_workers", type=click.IntRange(1), default=None, help="Override scaling.min_workers."
)
@json_flag
@click.pass_context
def submit(
    ctx: click.Context,
    job_file: Path | None,
    settings: tuple[str, ...],
    max_workers: int | None,
    min_workers: int | None,
) -> None:
    """Submit JOB_FILE (a TOML job spec) and/or --set fields; prints the job id."""
    if job_file is None and not settings:
        raise click.UsageError("give a JOB_FILE (TOML) and/or --set KEY=VALUE fields")
    text = job_file.read_text() if job_file is not None else ""
    flags: dict[str, str] = {}
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--set")
        flags[key.strip()] = value
    if max_workers is not None:
        flags["scaling.max_workers"] = str(max_workers)
    if min_workers is not None:
        flags["scaling.min_workers"] = str(min_workers)
    if flags:
        import tomllib

        from frameworks.elastic.spec import SpecError, from_flags, to_mapping

        where = str(job_file) if job_file is not None else "--set"
        try:
            body: Any = to_mapping(from_flags(flags, base=tomllib.loads(text)))
        except tomllib.TOMLDecodeError as exc:
            raise click.ClickException(f"{where}: invalid TOML: {exc}") from exc
        except SpecError as exc:
            raise click.ClickException(f"{where}: {exc}") from exc
        result = API.post(ctx, "/jobs", body)
    else:
        try:
            result = post_toml(API.url(ctx) + "/jobs", text)
        except CliError as exc:
            raise click.ClickException(str(exc)) from exc
    emit(ctx, result, lambda r: click.echo(r["id"]))


@elastic.command(name="list")
@state_option(SHORT)
@json_flag
@click.pass_context
def list_jobs(ctx: click.Context, state: str | None) -> None:
    """List elastic jobs with their workers, progress and the reason they are not at their maximum."""
    data = API.get(ctx, "/jobs" + (f"?state={state}" if state else ""))

    def render(d: dict[str, Any]) -> None:
        table = Table(box=None, header_style="bold")
        for col in (
            "ID",
            "NAME",
            "USER",
            "ST",
            "WORKERS",
            "MIN..MAX",
            "GEN",
            "PROGRESS",
            "SAMPLES/S",
            "LOSS",
            "ACC",
            "REASON",
        ):
            table.add_column(col)
        for j in d["jobs"]:
            table.add_row(
                str(j["id"]),
                j["name"],
                j.get("user") or "-",
                SHORT.get(j["state"], j["state"]),
                f"{j['workers']}"
                + (f" ({j['revocable_workers']} rev)" if j.get("revocable_workers") else ""),
                f"{j['min_workers']}..{j['max_workers']}",
                _num(j.get("generation"), "{}"),
                _num(j.get("progress"), "{:.0%}"),
                _num(j.get("samples_per_second"), "{:.0f}"),
                _num(j.get("loss")),
                _num(j.get("test_accuracy") if j.get("test_accuracy") is not None else j.get("accuracy")),
                j.get("reason") or "",
            )
        console().print(table)

    emit(ctx, data, render)


@elastic.command()
@click.argument("job_id", type=int)
@json_flag
@click.pass_context
def show(ctx: click.Context, job_id: int) -> None:
    """Show a job: workers, generation, progress (samples/s, loss, accuracy) and why it is not at max."""
    data = API.get(ctx, f"/jobs/{job_id}")

    def render(d: dict[str, Any]) -> None:
        con = console()
        con.print(
            f"[bold]elastic job {d['id']}[/bold] {d['name']}  user={d.get('user') or '-'}  state={d['state']}  "
            f"workers={d['workers']} ({d['running']} running, {d['revocable_workers']} revocable)  "
            f"min..max={d['min_workers']}..{d['max_workers']}  priority={d['priority']}  role={d['role']}"
        )
        met = d.get("metrics") or {}
        con.print(
            f"generation {_num(met.get('generation'), '{}')}  world size {_num(met.get('world_size'), '{}')}  "
            f"epoch {_num(met.get('epoch'), '{}')}/{_num(met.get('epochs'), '{}')}  "
            f"progress {_num(met.get('progress'), '{:.1%}')}  samples/s {_num(met.get('samples_per_second'), '{:.1f}')}  "
            f"loss {_num(met.get('loss'))}  accuracy {_num(met.get('accuracy'))}"
            + (
                f"  test accuracy {_num(met['reports']['test_accuracy'])}"
                if met.get("reports", {}).get("test_accuracy") is not None
                else ""
            )
        )
        if d.get("reason"):
            con.print(f"reason: {d['reason']}")
        elif d["state"] not in TERMINAL:  # nothing holds it back: it runs all the workers it may
            con.print(f"at its maximum of {d['max_workers']} worker(s)")
        last = d.get("last_failure")
        if last:
            con.print(
                f"last worker failure: {last['cause']} ({last['in_a_row']} in a row, "
                f"at {clock_time(last['at'])}; {d.get('failures_in_a_row', 0)} without training progress)"
            )
        if d.get("coordinator"):
            con.print(f"coordinator: {d['coordinator']}")
        table = Table(box=None, header_style="bold", title="workers")
        for col in ("TASK", "PHASE", "HOST", "KIND", "LAUNCHED", "RESOURCES"):
            table.add_column(col)
        for w in d["worker_list"]:
            table.add_row(
                w["task_id"],
                w["phase"],
                w["hostname"],
                "revocable" if w["revocable"] else "regular",
                clock_time(w["launched_at"]),
                w["resources"],
            )
        con.print(table)
        if d.get("ended_workers"):
            ended = Table(box=None, header_style="bold", title="ended workers (latest)")
            for col in ("TASK", "ENDING", "STATE", "ENDED", "MESSAGE"):
                ended.add_column(col)
            for w in d["ended_workers"][-8:]:
                ended.add_row(
                    w["task_id"],
                    w["ending"] or "-",
                    w["state"] or "-",
                    clock_time(w["ended_at"]),
                    w["message"] or "",
                )
            con.print(ended)
        counts = d.get("counts") or {}
        if counts:
            con.print("workers so far: " + "  ".join(f"{k} {v}" for k, v in sorted(counts.items())))

    emit(ctx, data, render)


@elastic.command()
@click.argument("job_id", type=int)
@click.option("--max", "max_workers", type=click.IntRange(1), default=None, help="New maximum worker count.")
@click.option("--min", "min_workers", type=click.IntRange(1), default=None, help="New minimum worker count.")
@json_flag
@click.pass_context
def scale(ctx: click.Context, job_id: int, max_workers: int | None, min_workers: int | None) -> None:
    """Change a job's worker range (it grows or shrinks to follow)."""
    if max_workers is None and min_workers is None:
        raise click.UsageError("give --max N and/or --min N")
    body: dict[str, int] = {}
    if max_workers is not None:
        body["max_workers"] = max_workers
    if min_workers is not None:
        body["min_workers"] = min_workers
    data = API.post(ctx, f"/jobs/{job_id}/scale", body)
    emit(ctx, data, lambda d: click.echo(f"job {d['id']}: {d['min_workers']}..{d['max_workers']} workers"))


@elastic.command()
@click.argument("job_id", type=int)
@json_flag
@click.pass_context
def cancel(ctx: click.Context, job_id: int) -> None:
    """Cancel a job: its workers are killed."""
    data = API.post(ctx, f"/jobs/{job_id}/cancel", {})
    emit(ctx, data, lambda d: click.echo(f"job {d['id']} {d['state'].lower()}"))


@elastic.command()
@click.argument("job_id", type=int)
@click.option("--worker", "index", type=int, default=None, help="Worker index (default: the first live one).")
@click.option("--stderr", is_flag=True, help="Show stderr instead of stdout.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the job ends.")
@json_flag
@click.pass_context
def logs(ctx: click.Context, job_id: int, index: int | None, stderr: bool, follow: bool) -> None:
    """Print a worker's stdout (or stderr) from its agent's sandbox. --json: one
    {"job", "worker", "stream", "line"} object per line."""
    stream = "stderr" if stderr else "stdout"
    offset = 0
    worker = "" if index is None else f"&worker={index}"
    lines: LineBuffer | None = LineBuffer("") if ctx.obj["json"] else None
    render: Callable[[str], str] | None = None

    def write(pieces: list[str]) -> None:
        for piece in pieces:
            sys.stdout.write(piece if render is None else render(piece))
        sys.stdout.flush()

    while True:
        chunk = API.get(ctx, f"/jobs/{job_id}/logs?stream={stream}&offset={offset}{worker}")
        if not worker:  # stay with the worker picked first
            worker = f"&worker={chunk['worker']}"
        if lines is not None and render is None:
            render = json_lines(job=job_id, worker=chunk.get("worker"), stream=stream)
        data = chunk.get("data", "")
        if data:
            write([data] if lines is None else lines.feed(data))
            offset += len(data.encode())
        if not follow or (not data and API.get(ctx, f"/jobs/{job_id}")["state"] in TERMINAL):
            if lines is not None:
                write(lines.flush())  # a last line without its newline
            return
        if not data:
            time.sleep(0.5)
