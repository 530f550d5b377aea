"""``agora events`` — watch the cluster through the master's operator event stream.

It sends ``SUBSCRIBE`` to ``POST /api/v1`` (JSON) and prints one line per event until Ctrl-C:
``SUBSCRIBED`` (a summary of the snapshot), then ``TASK_ADDED``, ``TASK_UPDATED``,
``AGENT_ADDED``, ``AGENT_REMOVED``, ``FRAMEWORK_ADDED``/``UPDATED``/``REMOVED`` (see
``master/operator_stream.py``). ``--json`` prints each event as it came (Mesos JSON, one object
per line). ``HEARTBEAT`` events keep the stream alive and are shown only with ``--heartbeats``;
when neither an event nor a heartbeat arrives for five heartbeat intervals the command fails
(the master is gone or the network is partitioned).

``event_line`` (pure) turns one event into its line; ``read_events`` reads a RecordIO stream.
"""

from __future__ import annotations

import json
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import IO, Any

import click

from frameworks.cli.common import (
    CliError,
    Unreachable,
    answer_error,
    http_error_detail,
    master_option,
    master_unreachable,
    master_url,
    open_url,
)

DEFAULT_HEARTBEAT = 15.0
MAX_RECORD = 256 * 1024 * 1024  # a SUBSCRIBED snapshot of a large cluster is big; a bad header is not


# --- pure formatting ------------------------------------------------------------------------------


def _id(v: Any) -> str:
    return str(v.get("value", "")) if isinstance(v, dict) else ("" if v is None else str(v))


def _scalars(resources: Any) -> str:
    """``cpus:2;mem:1024`` from Mesos ``Resource`` objects (scalars summed by name)."""
    sums: dict[str, float] = {}
    for r in resources if isinstance(resources, list) else []:
        if isinstance(r, dict) and isinstance(r.get("scalar"), dict):
            value = r["scalar"].get("value")
            if isinstance(value, (int, float)):
                sums[str(r.get("name", "?"))] = sums.get(str(r.get("name", "?")), 0.0) + float(value)
    return ";".join(f"{k}:{v:g}" for k, v in sums.items())


def _framework(rec: Any) -> str:
    rec = rec if isinstance(rec, dict) else {}
    info = rec.get("framework_info") or {}
    # one word, as `agora frameworks` and the web UI say it
    status = "recovered" if rec.get("recovered") else "active" if rec.get("active") else "disconnected"
    return f"{_id(info.get('id'))} {info.get('name', '')!s} ({status})"


def event_line(ev: dict[str, Any]) -> str:
    """One event as one line of text (without a timestamp)."""
    t = str(ev.get("type", "UNKNOWN"))
    body = ev.get(t.lower())
    b: dict[str, Any] = body if isinstance(body, dict) else {}
    if t == "SUBSCRIBED":
        st = b.get("get_state") or {}
        agents = len((st.get("get_agents") or {}).get("agents") or [])
        fws = len((st.get("get_frameworks") or {}).get("frameworks") or [])
        tasks = len((st.get("get_tasks") or {}).get("tasks") or [])
        hb = b.get("heartbeat_interval_seconds")
        beat = f", heartbeat every {hb:g}s" if isinstance(hb, (int, float)) else ""
        return f"{t} {agents} agents, {fws} frameworks, {tasks} tasks{beat}"
    if t == "TASK_ADDED":
        task = b.get("task") or {}
        return (
            f"{t} task {_id(task.get('task_id'))} of framework {_id(task.get('framework_id'))}"
            f" on agent {_id(task.get('agent_id'))} {task.get('state', '')} {_scalars(task.get('resources'))}"
        ).rstrip()
    if t == "TASK_UPDATED":
        status = b.get("status") or {}
        line = f"{t} task {_id(status.get('task_id'))} of framework {_id(b.get('framework_id'))} {b.get('state', '')}"
        extra = [str(status[k]) for k in ("reason", "message") if status.get(k)]
        return f"{line} ({'; '.join(extra)})" if extra else line
    if t == "AGENT_ADDED":
        agent = b.get("agent") or {}
        info = agent.get("agent_info") or {}
        return (
            f"{t} agent {_id(info.get('id'))} {info.get('hostname', '')}:{info.get('port', '')}"
            f" {_scalars(agent.get('total_resources') or info.get('resources'))}"
        ).rstrip()
    if t == "AGENT_REMOVED":
        return f"{t} agent {_id(b.get('agent_id'))}"
    if t in ("FRAMEWORK_ADDED", "FRAMEWORK_UPDATED"):
        return f"{t} framework {_framework(b.get('framework'))}"
    if t == "FRAMEWORK_REMOVED":
        info = b.get("framework_info") or {}
        return f"{t} framework {_id(info.get('id'))} {info.get('name', '')!s}".rstrip()
    return t


STYLES = {
    "SUBSCRIBED": "bold",
    "TASK_ADDED": "cyan",
    "TASK_UPDATED": "blue",
    "AGENT_ADDED": "green",
    "AGENT_REMOVED": "red",
    "FRAMEWORK_ADDED": "green",
    "FRAMEWORK_UPDATED": "yellow",
    "FRAMEWORK_REMOVED": "red",
    "HEARTBEAT": "dim",
}


# --- the stream ---------------------------------------------------------------------------------


def read_events(stream: IO[bytes]) -> Iterator[dict[str, Any]]:
    """The JSON events of a RecordIO stream (``<length>\\n<json>``), until it ends."""
    while True:
        header = stream.readline(32)
        if not header:
            return
        text = header.strip()
        if not text.isdigit() or int(text) > MAX_RECORD:
            raise CliError(f"bad record header from the master: {header[:32]!r}")
        size = int(text)
        data = stream.read(size)
        if len(data) < size:
            return  # the stream ended mid-record
        try:
            ev = json.loads(data)
        except ValueError as exc:
            raise CliError(f"the master sent an event that is not JSON: {data[:200]!r}") from exc
        if isinstance(ev, dict):
            yield ev


def subscribe(base: str, timeout: float) -> Any:
    """Open the stream (``POST /api/v1`` SUBSCRIBE); the response to read events from."""
    req = urllib.request.Request(
        base + "/api/v1",
        data=b'{"type": "SUBSCRIBE"}',
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    try:
        return open_url(req, timeout)
    except urllib.error.HTTPError as exc:
        detail = http_error_detail(exc)
        raise answer_error("POST", req.full_url, exc.code, detail) from exc
    except Unreachable as exc:
        raise master_unreachable(base, exc) from exc


def _set_read_timeout(resp: Any, seconds: float) -> None:
    """Wait up to ``seconds`` for the next bytes (five heartbeats, once SUBSCRIBED says them)."""
    sock = getattr(getattr(getattr(resp, "fp", None), "raw", None), "_sock", None)
    if isinstance(sock, socket.socket):
        sock.settimeout(seconds)


def job_event_line(ev: dict[str, Any]) -> str:
    """One batch job event as a line: ``job 12 (train) finished SUCCEEDED: ...``."""
    detail = f": {ev['detail']}" if ev.get("detail") else ""
    return f"job {ev.get('job_id')} ({ev.get('name', '')}) {ev.get('kind')} {ev.get('state', '')}{detail}"


def follow_jobs(
    batch: str | None, master: str | None, as_json: bool, count: int, job_ids: tuple[int, ...], since: int | None
) -> None:
    """``agora events --jobs``: the batch service's job events (``GET /api/v1/events``, one JSON
    object a line, a heartbeat every 15 s) until Ctrl-C or ``count`` events."""
    from frameworks.cli.common import framework_url

    query = []
    if job_ids:
        query.append("jobs=" + ",".join(str(j) for j in job_ids))
    if since is not None:
        query.append(f"since={since}")
    shown = 0
    try:
        base = framework_url("agora-batch", batch, "AGORA_BATCH", master)
        req = urllib.request.Request(
            base + "/api/v1/events" + ("?" + "&".join(query) if query else ""), headers={"Accept": "application/x-ndjson"}
        )
        try:
            resp = open_url(req, 5 * DEFAULT_HEARTBEAT)
        except urllib.error.HTTPError as exc:
            raise CliError(f"GET {req.full_url}: HTTP {exc.code} {http_error_detail(exc)}".rstrip()) from exc
        with resp:
            for raw in resp:
                ev = json.loads(raw)
                if ev.get("kind") == "heartbeat":
                    continue
                if as_json:
                    sys.stdout.write(json.dumps(ev, sort_keys=True) + "\n")
                else:
                    stamp = time.strftime("%H:%M:%S", time.localtime(ev.get("at") or time.time()))
                    sys.stdout.write(f"{stamp} {job_event_line(ev)}\n")
                sys.stdout.flush()
                shown += 1
                if count and shown >= count:
                    return
    except KeyboardInterrupt:
        return
    except TimeoutError as exc:
        raise click.ClickException("no event or heartbeat from the batch service for 75 s") from exc
    except CliError as exc:
        raise click.ClickException(str(exc)) from exc
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"the job event stream broke: {exc}") from exc
    raise click.ClickException("the batch service closed the event stream")


@click.command()
@master_option
@click.option("--json", "as_json", is_flag=True, help="Print each event as one line of Mesos JSON.")
@click.option("--heartbeats", is_flag=True, help="Also print the HEARTBEAT events.")
@click.option("--count", type=click.IntRange(min=0), default=0, help="Stop after this many events (0: until Ctrl-C).")
@click.option("--jobs", "jobs", is_flag=True,
              help="The batch service's job events instead: submitted, started, finished, preempted, requeued...")
@click.option("--job", "job_ids", multiple=True, type=int, help="With --jobs: only this job (repeatable).")
@click.option("--since", type=int, default=None, help="With --jobs: first the kept events numbered after N.")
@click.option("--batch", envvar="AGORA_BATCH", default=None, help="With --jobs: the batch service URL (default: ask the master).")
def events(
    master: str | None, as_json: bool, heartbeats: bool, count: int, jobs: bool, job_ids: tuple[int, ...],
    since: int | None, batch: str | None,
) -> None:
    """Follow the cluster's events (agents, frameworks, tasks) until Ctrl-C; --jobs: the batch
    jobs' events."""
    from rich.markup import escape

    from frameworks.cli.common import console

    if jobs:
        follow_jobs(batch, master, as_json, count, job_ids, since)
        return
    if job_ids or since is not None:
        raise click.UsageError("--job and --since go with --jobs")
    out = None if as_json else console()
    shown = 0
    try:
        base = master_url(master)
        resp = subscribe(base, 5 * DEFAULT_HEARTBEAT)
        with resp:
            for ev in read_events(resp):
                t = str(ev.get("type", ""))
                if t == "SUBSCRIBED":
                    hb = (ev.get("subscribed") or {}).get("heartbeat_interval_seconds")
                    if isinstance(hb, (int, float)) and hb > 0:
                        _set_read_timeout(resp, 5 * float(hb))
                if t == "HEARTBEAT" and not heartbeats:
                    continue
                if out is None:
                    sys.stdout.write(json.dumps(ev, sort_keys=True) + "\n")
                    sys.stdout.flush()
                else:
                    stamp = time.strftime("%H:%M:%S")
                    style = STYLES.get(t, "")
                    line = escape(event_line(ev))
                    out.print(f"[dim]{stamp}[/dim] [{style}]{line}[/{style}]" if style else f"[dim]{stamp}[/dim] {line}")
                shown += 1
                if count and shown >= count:
                    return
    except KeyboardInterrupt:
        return
    except TimeoutError as exc:
        raise click.ClickException("no event or heartbeat from the master for five heartbeat intervals") from exc
    except CliError as exc:
        raise click.ClickException(str(exc)) from exc
    except OSError as exc:
        raise click.ClickException(f"the event stream broke: {exc}") from exc
    if not count or shown < count:
        raise click.ClickException("the master closed the event stream")
