"""``agora task list|show|logs|attach|download|kill`` — one task, wherever it runs (the Mesos CLI's
``task``).

A task is found by id in the master's ``/state`` (running and completed tasks of every
framework); its agent is the ``slaves`` entry with that id, whose ``hostname:port`` also serves
the sandbox (``/files/read?path=<framework>/<task>/stdout``). ``logs -f`` follows the file by
offset until the task is terminal, then drains it (see ``follow``); ``download`` fetches a whole
file (``/files/download``). ``kill`` asks the framework that owns the task: the master's operator
API has no kill, a framework kills its own tasks (the batch framework through ``POST
/api/v1/jobs/J/tasks/I/kill``).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

import click

from frameworks.cli import cluster
from frameworks.cli.common import (
    CliError,
    answer_error,
    http_error_detail,
    http_post_json,
    master_group_class,
    master_option,
    master_state,
    open_url,
    run_cli,
    unreachable,
)
from frameworks.cli.follow import Chunk, LineBuffer, LogStream, follow, json_lines, last_lines
from protocol.agent_channel import AGENT_HTTPS
from protocol.ids import sandbox_path
from protocol.usage import usage_from_json, usage_text

TERMINAL_TASK_STATES = frozenset(
    {
        "TASK_FINISHED",
        "TASK_FAILED",
        "TASK_KILLED",
        "TASK_LOST",
        "TASK_ERROR",
        "TASK_DROPPED",
        "TASK_GONE",
        "TASK_GONE_BY_OPERATOR",
    }
)
POLL = 0.5  # seconds between reads while following (a CLI loop)
DONE_EVERY = 4  # ask the master whether the task ended every 4th read (2 s): each ask is a whole /state
READ_LENGTH = 64 * 1024

Row = dict[str, Any]


# --- pure ------------------------------------------------------------------------------------


def task_matches(state: dict[str, Any], task_id: str, framework: str | None = None) -> list[Row]:
    """Every framework's task ``task_id`` (running or completed), one row per framework with the
    framework's name and API address; within a framework a running copy wins over a completed one.
    ``framework`` (an id or a name) keeps only that framework's."""
    found: dict[str, Row] = {}
    for group in (state.get("frameworks") or [], state.get("completed_frameworks") or []):
        for f in group:
            if framework is not None and framework not in (f.get("id"), f.get("name")):
                continue
            for completed, tasks in ((False, f.get("tasks") or []), (True, f.get("completed_tasks") or [])):
                for t in tasks:
                    if t.get("id") != task_id:
                        continue
                    row = {
                        "id": task_id,
                        "name": t.get("name", ""),
                        "state": t.get("state", ""),
                        "framework_id": t.get("framework_id") or f.get("id", ""),
                        "framework": f.get("name", ""),
                        "framework_url": f.get("webui_url") or None,
                        "agent_id": t.get("slave_id") or t.get("agent_id", ""),
                        "executor_id": t.get("executor_id", ""),
                        "resources": t.get("resources") or {},
                        "role": t.get("role"),
                        "statuses": t.get("statuses") or [],
                        "usage": t.get("usage"),
                        "completed": completed,
                    }
                    key = str(row["framework_id"])
                    if key not in found or (found[key]["completed"] and not completed):
                        found[key] = row
    return list(found.values())


def find_task(state: dict[str, Any], task_id: str, framework: str | None = None) -> Row | None:
    """The task ``task_id`` (see ``task_matches``), or None. Task ids are unique only within a
    framework: an id that two frameworks use is a ``CliError`` naming them with their ids (pick one
    with ``--framework``: its id always, its name when no other framework of that name has it)."""
    rows = task_matches(state, task_id, framework)
    if len(rows) > 1:
        names = ", ".join(f"{r['framework'] or '?'} (id {r['framework_id']}, {r['state'] or '?'})" for r in rows)
        shared = len({r["framework"] for r in rows}) < len(rows)  # a name does not tell them apart
        raise CliError(
            f"task id {task_id!r} is used by {len(rows)} frameworks: {names}; "
            + ("choose one with --framework ID" if shared else "choose one with --framework ID|NAME")
        )
    return rows[0] if rows else None


def agent_url(state: dict[str, Any], agent_id: str) -> str | None:
    """The agent's API base URL from ``/state``: ``https`` when it registered the ``HTTPS``
    capability (as the master's offers and web UI decide), whatever CA the CLI was given."""
    for a in state.get("slaves") or []:
        if a.get("id") == agent_id and a.get("hostname") and a.get("port"):
            scheme = "https" if AGENT_HTTPS in (a.get("capabilities") or ()) else "http"
            return f"{scheme}://{a['hostname']}:{a['port']}"
    return None


def sandbox_file(framework_id: str, task_id: str, name: str, executor_id: str = "") -> str:
    """The path the agent's ``/files/*`` endpoints know a task's file by: a task of a task group
    (run under its executor's id) has its sandbox under the executor's, as Mesos nests them."""
    return f"{sandbox_path(framework_id, task_id, executor_id)}/{name}"


def batch_task(task_id: str) -> tuple[int, int] | None:
    """``j<job>-<index>-<attempt>`` (the batch framework's task ids) -> (job, index)."""
    parts = task_id.split("-")
    if len(parts) != 3 or not parts[0].startswith("j"):
        return None
    try:
        return int(parts[0][1:]), int(parts[1])
    except ValueError:
        return None


# --- shell -----------------------------------------------------------------------------------


def _locate(master: str | None, task_id: str, framework: str | None = None) -> tuple[str, dict[str, Any], Row]:
    base, state = cluster.load_state(master)
    row = find_task(state, task_id, framework)
    if row is None:
        where = f" in framework {framework!r}" if framework is not None else ""
        raise CliError(f"no task {task_id!r}{where} known to the master at {base}")
    row["agent_url"] = agent_url(state, row["agent_id"])
    return base, state, row


def files_read(agent: str, path: str, offset: int, length: int = READ_LENGTH) -> tuple[str, int] | None:
    """``(data, offset)`` from the agent's ``/files/read``; None if the file does not exist."""
    q = urllib.parse.urlencode({"path": path, "offset": str(offset), "length": str(length)})
    url = f"{agent}/files/read?{q}"
    try:
        with open_url(urllib.request.Request(url), timeout=10.0) as resp:
            body = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        detail = http_error_detail(exc)
        if exc.code == 404:
            return None
        raise answer_error("GET", url, exc.code, detail) from exc
    except OSError as exc:  # the answer broke off while being read
        raise unreachable(url, exc) from exc
    except ValueError as exc:
        raise CliError(f"{url} did not answer JSON") from exc
    return str(body.get("data", "")), int(body.get("offset", offset))


def _reader(row: Row, stream: str, must_exist: bool) -> Callable[[int], Chunk]:
    agent = row.get("agent_url")
    if not agent:
        raise CliError(f"task {row['id']}: its agent {row['agent_id'] or '?'} is not registered with the master")
    path = sandbox_file(row["framework_id"], row["id"], stream, row.get("executor_id") or "")

    def read(offset: int) -> Chunk:
        got = files_read(agent, path, offset)
        if got is None:
            if must_exist:
                raise CliError(f"task {row['id']} has no {stream} on agent {row['agent_id']} (sandbox removed?)")
            return Chunk("")  # not created yet: the task is still launching
        return Chunk(got[0], offset=got[1])

    return read


def _tail_offset(row: Row, stream: str, n: int) -> tuple[str, int]:
    """The last ``n`` lines of a task's ``stream`` and the file size they end at."""
    agent = str(row["agent_url"])
    path = sandbox_file(row["framework_id"], row["id"], stream, row.get("executor_id") or "")
    end = files_read(agent, path, -1)
    if end is None:
        return "", 0
    size = end[1]
    window = 8 * 1024
    while True:
        start = max(0, size - window)
        text, pos, clipped = "", start, False
        while pos < size:
            got = files_read(agent, path, pos, min(READ_LENGTH, size - pos))
            if got is None or not got[0]:
                break
            if got[1] > pos:  # a rotated log keeps less than was asked for: it starts there
                text, start, clipped = "", got[1], True
            text += got[0]
            pos = got[1] + len(got[0].encode("utf-8"))
        lines, enough = last_lines(text, n, from_start=start == 0)
        if enough or clipped:  # (nothing older is kept)
            return lines, size
        window *= 4


def _run(fn: Callable[[], None]) -> None:
    try:
        run_cli(fn)
    except KeyboardInterrupt:
        sys.stdout.flush()
        raise SystemExit(130) from None


def _write(piece: str) -> None:
    sys.stdout.write(piece)
    sys.stdout.flush()


def _terminal_check(base: str, task_id: str, framework_id: str) -> Callable[[], bool]:
    """Whether the task (of framework ``framework_id``) ended, asked of the master at ``base``
    (resolved once per command: a ``zk://`` master is not looked up in ZooKeeper at every poll)."""

    def done() -> bool:
        row = find_task(master_state(base, timeout=5.0), task_id, framework_id)
        return row is None or row["state"] in TERMINAL_TASK_STATES

    return done


def _framework_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--framework", default=None, metavar="ID|NAME",
        help="The framework whose task it is (needed when two frameworks use the same task id).",
    )(f)


def _options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--json", "as_json", is_flag=True, help="Print JSON.")(f)
    return master_option(_framework_option(f))


@click.group(cls=master_group_class())
@master_option
def task(master: str | None) -> None:
    """Inspect tasks: list, show, logs (-f), attach, download, kill."""


task.add_command(cluster.tasks, name="list")


@task.command()
@click.argument("task_id")
@_options
def show(task_id: str, master: str | None, as_json: bool, framework: str | None) -> None:
    """A task: state, framework, agent, resources, sandbox, status history."""

    def go() -> None:
        _, _, row = _locate(master, task_id, framework)
        row["sandbox"] = sandbox_file(row["framework_id"], row["id"], "", row.get("executor_id") or "")
        if as_json:
            click.echo(json.dumps(row, indent=2, sort_keys=True))
            return
        click.echo(f"task {row['id']}  {row['name']}")
        for k in ("state", "framework", "framework_id", "agent_id", "agent_url", "role", "sandbox"):
            click.echo(f"  {k:13} {row.get(k) or '-'}")
        click.echo(f"  {'resources':13} {cluster._res_text(row['resources'])}")
        used = usage_from_json(row.get("usage"))
        if used is not None:
            click.echo(f"  {'usage':13} {usage_text(used, running=row['state'] not in TERMINAL_TASK_STATES)}")
        for s in row["statuses"]:
            stamp = time.strftime("%H:%M:%S", time.localtime(s.get("timestamp") or 0))
            click.echo(f"  {stamp}  {s.get('state', '')}")

    _run(go)


@task.command()
@click.argument("task_id")
@click.option("--stderr", is_flag=True, help="stderr instead of stdout.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the task ends.")
@click.option("--tail", "-n", "tail", default=None, type=click.IntRange(0), help="Start with the last N lines.")
@_options
def logs(
    task_id: str, stderr: bool, follow: bool, tail: int | None, master: str | None, as_json: bool, framework: str | None
) -> None:
    """Print a task's stdout (or stderr) from its agent's sandbox; -f follows it to the end.
    --json: one {"task", "stream", "line"} object per line."""
    stream = "stderr" if stderr else "stdout"

    def go() -> None:
        base, _, row = _locate(master, task_id, framework)
        read = _reader(row, stream, must_exist=not follow)
        render = json_lines(task=task_id, stream=stream) if as_json else None
        start = 0
        if tail is not None:
            text, start = _tail_offset(row, stream, tail)
            for piece in [text] if render is None else LineBuffer("").feed(text):
                _write(piece if render is None else render(piece))
        s = LogStream(read, offset=start, prefix="" if as_json else None, render=render)
        _follow([s], follow, base, row)

    _run(go)


def _follow(streams: list[LogStream], keep: bool, base: str, row: Row) -> None:
    follow(
        streams,
        keep_following=keep,
        done=_terminal_check(base, str(row["id"]), str(row["framework_id"])),
        sleep=time.sleep,
        write=_write,
        poll=POLL,
        done_every=DONE_EVERY,
    )


@task.command()
@click.argument("task_id")
@_options
def attach(task_id: str, master: str | None, as_json: bool, framework: str | None) -> None:
    """Follow a task's stdout and stderr together (lines prefixed [stdout]/[stderr]) until it ends;
    Ctrl-C detaches. The sandbox files carry no timestamps, so lines are not in time order across
    the two streams: each poll (every 0.5 s) prints what stdout gained, then what stderr gained."""

    def go() -> None:
        base, _, row = _locate(master, task_id, framework)
        streams = [
            LogStream(
                _reader(row, s, must_exist=False),
                prefix="" if as_json else f"[{s}] ",
                render=json_lines(task=task_id, stream=s) if as_json else None,
            )
            for s in ("stdout", "stderr")
        ]
        _follow(streams, True, base, row)

    _run(go)


@task.command()
@click.argument("task_id")
@_options
def kill(task_id: str, master: str | None, as_json: bool, framework: str | None) -> None:
    """Ask the task's framework to kill it (batch tasks: like a crash, retried if retries remain)."""

    def go() -> None:
        _, _, row = _locate(master, task_id, framework)
        if row["state"] in TERMINAL_TASK_STATES:
            raise CliError(f"task {task_id} already ended ({row['state']})")
        ref = batch_task(task_id)
        if row["framework"] != "agora-batch" or ref is None or not row["framework_url"]:
            raise CliError(
                f"task {task_id} belongs to framework {row['framework'] or row['framework_id']}, "
                "which agora cannot ask to kill a task (only the batch framework can be)"
            )
        job_id, index = ref
        out = http_post_json(f"{row['framework_url']}/api/v1/jobs/{job_id}/tasks/{index}/kill", {})
        if as_json:
            click.echo(json.dumps(out, indent=2, sort_keys=True))
        else:
            click.echo(f"killing task {task_id} (job {job_id} task {index})")

    _run(go)


@task.command()
@click.argument("task_id")
@click.option("--stderr", is_flag=True, help="stderr instead of stdout.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True), default=None, help="File to write (default: stdout).")
@master_option
@_framework_option
def download(task_id: str, stderr: bool, output: str | None, master: str | None, framework: str | None) -> None:
    """Download a task's whole stdout (or stderr) file from its sandbox (the agent's /files/download)."""
    stream = "stderr" if stderr else "stdout"

    def go() -> None:
        _, _, row = _locate(master, task_id, framework)
        if not row.get("agent_url"):
            raise CliError(f"task {task_id}: its agent {row['agent_id'] or '?'} is not registered with the master")
        path = sandbox_file(row["framework_id"], task_id, stream, row.get("executor_id") or "")
        q = urllib.parse.urlencode({"path": path})
        url = f"{row['agent_url']}/files/download?{q}"
        try:
            with open_url(urllib.request.Request(url), timeout=30.0) as resp:
                if output is None:
                    shutil.copyfileobj(resp, sys.stdout.buffer)
                    sys.stdout.buffer.flush()
                else:
                    with open(output, "wb") as out:
                        shutil.copyfileobj(resp, out)
        except urllib.error.HTTPError as exc:
            detail = http_error_detail(exc)
            if exc.code == 404:
                raise CliError(f"task {task_id} has no {stream} on agent {row['agent_id']} (sandbox removed?)") from exc
            raise answer_error("GET", url, exc.code, detail) from exc
        except (urllib.error.URLError, OSError) as exc:
            raise unreachable(url, exc) from exc

    _run(go)
