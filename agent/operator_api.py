"""The agent's v1 operator API (shell): ``POST /api/v1`` (and ``/slave(1)/api/v1``) with a JSON
``agent::Call``, answered with Mesos' ``agent::Response`` in JSON, from the same read model as
``/state`` (``agent/mesos_views.py``).

Calls: ``GET_HEALTH``, ``GET_FLAGS``, ``GET_VERSION``, ``GET_METRICS``, ``GET_STATE``,
``GET_CONTAINERS``, ``GET_FRAMEWORKS``, ``GET_EXECUTORS``, ``GET_TASKS``, ``LIST_FILES``,
``READ_FILE`` (sandboxes, with the confinement of ``/files/*``). Any other Mesos agent call is
answered ``400`` "Agent call X is not supported by this agent"; a body that is not JSON ``415``.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import os
import stat
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from agent import mesos_views
from protocol import codec
from protocol.task_states import is_terminal

if TYPE_CHECKING:
    from agent.files import SandboxFiles
    from agent.ports import AgentView

READ_LIMIT = 16 << 20  # READ_FILE without a length: at most this many bytes

# Mesos' agent calls this agent does not serve, and what to use instead
UNSUPPORTED = {
    "SET_LOGGING_LEVEL": "", "GET_LOGGING_LEVEL": "",
    "GET_AGENT": "use GET_STATE", "GET_RESOURCE_PROVIDERS": "", "ADD_RESOURCE_PROVIDER_CONFIG": "",
    "UPDATE_RESOURCE_PROVIDER_CONFIG": "", "REMOVE_RESOURCE_PROVIDER_CONFIG": "", "MARK_RESOURCE_PROVIDER_GONE": "",
    "PRUNE_IMAGES": "", "GET_OPERATIONS": "", "LAUNCH_NESTED_CONTAINER": "", "WAIT_NESTED_CONTAINER": "",
    "KILL_NESTED_CONTAINER": "", "REMOVE_NESTED_CONTAINER": "", "LAUNCH_NESTED_CONTAINER_SESSION": "",
    "ATTACH_CONTAINER_INPUT": "", "ATTACH_CONTAINER_OUTPUT": "", "LAUNCH_CONTAINER": "", "WAIT_CONTAINER": "",
    "KILL_CONTAINER": "", "REMOVE_CONTAINER": "",
}


class _Bad(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def add_routes(app: web.Application, svc: AgentView, files: SandboxFiles | None) -> None:
    handler = functools.partial(call, svc, files)
    app.router.add_post("/api/v1", handler)
    app.router.add_post("/slave(1)/api/v1", handler)


async def call(svc: AgentView, files: SandboxFiles | None, request: web.Request) -> web.Response:
    ctype = (request.headers.get("Content-Type") or "").split(";")[0].strip().lower()
    if ctype != "application/json":
        return web.Response(status=415, text=f"Unsupported media type '{ctype}' (this agent's operator API speaks application/json)")
    try:
        body = json.loads(await request.read())
    except ValueError as e:
        return web.Response(status=400, text=f"Failed to parse body into JSON: {e}")
    if not isinstance(body, dict) or not isinstance(body.get("type"), str):
        return web.Response(status=400, text="Failed to validate agent::Call: Expecting 'type' to be present")
    t = body["type"]
    try:
        result = await _answer(svc, files, t, body)
    except _Bad as e:
        return web.Response(status=e.status, text=e.message)
    if result is None:
        return web.Response(status=200)
    return web.json_response({"type": t, t.lower(): result})


async def _answer(svc: AgentView, files: SandboxFiles | None, t: str, body: dict[str, Any]) -> dict[str, Any] | None:
    if t == "GET_HEALTH":
        return {"healthy": True}
    if t == "GET_FLAGS":
        return {"flags": [{"name": k, "value": v} for k, v in mesos_views.flags(svc).items()]}
    if t == "GET_VERSION":
        return {"version_info": {"version": svc.me.version, "build_date": "", "build_time": 0.0, "build_user": ""}}
    if t == "GET_METRICS":
        return {"metrics": metrics(svc)}
    if t == "GET_FRAMEWORKS":
        return get_frameworks(svc)
    if t == "GET_EXECUTORS":
        return get_executors(svc)
    if t == "GET_TASKS":
        return get_tasks(svc)
    if t == "GET_STATE":
        return {"get_tasks": get_tasks(svc), "get_executors": get_executors(svc), "get_frameworks": get_frameworks(svc)}
    if t == "GET_CONTAINERS":
        return {"containers": containers(svc)}
    if t == "LIST_FILES":
        path = _path(body, "list_files")
        return {"file_infos": await asyncio.to_thread(_list_files, _files(files), path)}
    if t == "READ_FILE":
        args = body.get("read_file")
        path = _path(body, "read_file")
        assert isinstance(args, dict)
        offset, length = args.get("offset", 0), args.get("length")
        if not isinstance(offset, int) or offset < 0 or (length is not None and (not isinstance(length, int) or length < 0)):
            raise _Bad(400, "Failed to validate agent::Call: 'read_file.offset' and 'read_file.length' must be non-negative integers")
        size, data = await asyncio.to_thread(_read_file, _files(files), path, offset, length)
        return {"size": size, "data": base64.b64encode(data).decode("ascii")}
    if t in UNSUPPORTED:
        hint = f" ({UNSUPPORTED[t]})" if UNSUPPORTED[t] else ""
        raise _Bad(400, f"Agent call {t} is not supported by this agent{hint}")
    raise _Bad(400, f"Failed to validate agent::Call: unknown call type '{t}'")


def _path(body: dict[str, Any], key: str) -> str:
    args = body.get(key)
    if not isinstance(args, dict):
        raise _Bad(400, f"Failed to validate agent::Call: Expecting '{key}' to be present")
    path = args.get("path")
    if not isinstance(path, str) or not path:
        raise _Bad(400, f"Failed to validate agent::Call: Expecting '{key}.path' to be present")
    return path


def _files(files: SandboxFiles | None) -> SandboxFiles:
    if files is None:
        raise _Bad(400, "this agent serves no sandbox files")
    return files


def _refused(e: Exception) -> _Bad:
    status = getattr(e, "status", 400)
    return _Bad(404 if status == 404 else (403 if status == 403 else 400), getattr(e, "message", str(e)))


def _file_info(path: str, st: os.stat_result) -> dict[str, Any]:
    import grp
    import pwd

    try:
        uid = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        uid = str(st.st_uid)
    try:
        gid = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        gid = str(st.st_gid)
    return {"path": path, "nlink": st.st_nlink, "size": st.st_size, "mtime": {"nanoseconds": st.st_mtime_ns},
            "mode": st.st_mode, "uid": uid, "gid": gid}


def _list_files(files: SandboxFiles, path: str) -> list[dict[str, Any]]:
    from agent.files import _Refused

    try:
        real = files.resolve(path)
        base = path.rstrip("/") or "/"
        if not os.path.isdir(real):
            fd, st = files.open(path)
            os.close(fd)
            return [_file_info(base, st)]
        fd, _ = files.open(path, directory=True)
        try:
            entries = []
            with os.scandir(fd) as it:
                for entry in it:
                    try:
                        entries.append((entry.name, entry.stat(follow_symlinks=False)))
                    except OSError:
                        continue
        finally:
            os.close(fd)
    except _Refused as e:
        raise _refused(e) from None
    return [_file_info(f"{base}/{name}", st) for name, st in sorted(entries)]


def _read_file(files: SandboxFiles, path: str, offset: int, length: int | None) -> tuple[int, bytes]:
    from agent.files import _Refused

    try:
        fd, st = files.open(path)
    except _Refused as e:
        raise _refused(e) from None
    try:
        if not stat.S_ISREG(st.st_mode):
            raise _Bad(400, f"'{path}' is not a regular file")
        n = READ_LIMIT if length is None else min(length, READ_LIMIT)
        return st.st_size, os.pread(fd, n, offset) if offset < st.st_size else b""
    finally:
        os.close(fd)


def metrics(svc: AgentView) -> list[dict[str, Any]]:
    """The agent's Prometheus samples as Mesos' ``Metric`` list (name, value)."""
    from prometheus_client import generate_latest

    svc.metrics.running.set(len(svc.tracker.active()))
    out = []
    for family in text_string_to_metric_families(generate_latest(svc.metrics.registry).decode()):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out.append({"name": f"{s.name}{{{labels}}}" if labels else s.name, "value": float(s.value)})
    return out


def _framework_info(svc: AgentView, fid: str) -> dict[str, Any]:
    fi = svc.tracker.frameworks.get(fid)
    if fi is None:
        return {"id": {"value": fid}, "name": "", "user": ""}
    out: dict[str, Any] = codec.to_builtins(fi)
    out.setdefault("id", {"value": fid})
    return out


def get_frameworks(svc: AgentView) -> dict[str, Any]:
    done = mesos_views.completed_framework_ids(svc, mesos_views.executors(svc))
    fids = sorted({*svc.tracker.frameworks, *(k[0] for k in svc.tracker.tasks)} - set(done))
    return {"frameworks": [{"framework_info": _framework_info(svc, f)} for f in fids],
            "completed_frameworks": [{"framework_info": _framework_info(svc, f)} for f in done]}


def _executor_info(svc: AgentView, ex: mesos_views.ExecutorView) -> dict[str, Any]:
    if ex.info is not None:
        out: dict[str, Any] = codec.to_builtins(ex.info)
        out.setdefault("framework_id", {"value": ex.framework_id})
        return out
    cmd = ex.tasks[0].spec.info.command if ex.tasks[0].spec.info is not None else None
    return {"executor_id": {"value": ex.executor_id}, "framework_id": {"value": ex.framework_id},
            "type": "CUSTOM", "command": codec.to_builtins(cmd) if cmd is not None else {}}


def get_executors(svc: AgentView) -> dict[str, Any]:
    execs = mesos_views.executors(svc)
    live = {(e.framework_id, e.executor_id) for e in execs}
    done = [e for fid in svc.tracker.completed.frameworks() for e in mesos_views.completed_executors(svc, fid, live)]
    return {"executors": [{"executor_info": _executor_info(svc, e)} for e in execs],
            "completed_executors": [{"executor_info": _executor_info(svc, e)} for e in done]}


def _task(svc: AgentView, t: Any) -> dict[str, Any]:
    fid, tid = t.key
    info = t.spec.info
    out: dict[str, Any] = {
        "name": t.spec.name,
        "task_id": {"value": tid},
        "framework_id": {"value": fid},
        "agent_id": {"value": svc.me.agent_id or ""},
        "state": t.state.name,
        "resources": codec.to_builtins(info.resources) if info is not None else [],
        "statuses": [{"task_id": {"value": tid}, "state": t.state.name,
                      "timestamp": t.started_at or 0.0,
                      "container_status": {"container_id": {"value": mesos_views._container(
                          svc, fid, t.spec.executor_id or tid)}}}],
    }
    if t.spec.executor_id is not None:
        out["executor_id"] = {"value": t.spec.executor_id}
    if info is not None and info.health_check is not None:
        out["health_check"] = codec.to_builtins(info.health_check)
    if info is not None and info.labels is not None and info.labels.labels:
        out["labels"] = codec.to_builtins(info.labels)
    return out


def get_tasks(svc: AgentView) -> dict[str, Any]:
    launched: list[dict[str, Any]] = []
    terminated: list[dict[str, Any]] = []
    for t in svc.tracker.tasks.values():
        (terminated if is_terminal(t.state) else launched).append(_task(svc, t))
    return {"pending_tasks": [], "queued_tasks": [], "launched_tasks": launched,
            "terminated_tasks": terminated,
            "completed_tasks": [_task(svc, t) for t in mesos_views.forgotten_tasks(svc)]}


def containers(svc: AgentView) -> list[dict[str, Any]]:
    """One entry per executor container with a live task: ids, and the usage the agent measured."""
    out = []
    for ex in mesos_views.executors(svc):
        live = [t for t in ex.tasks if not is_terminal(t.state)]
        if not live:
            continue
        entry: dict[str, Any] = {
            "framework_id": {"value": ex.framework_id},
            "executor_id": {"value": ex.executor_id},
            "executor_name": ex.info.name if ex.info is not None and ex.info.name else ex.executor_id,
            "container_id": {"value": mesos_views._container(svc, ex.framework_id, ex.executor_id)},
            "container_status": {"executor_pid": live[0].pid} if live[0].pid else {},
        }
        stats: dict[str, float] = {}
        for t in live:
            used = svc.usage.get(t.key)
            if used is None:
                continue
            u = used.to_json()
            stats["cpus_system_time_secs"] = 0.0
            stats["cpus_user_time_secs"] = stats.get("cpus_user_time_secs", 0.0) + float(u.get("cpu_seconds", 0.0))
            stats["mem_rss_bytes"] = stats.get("mem_rss_bytes", 0.0) + float(u.get("mem_rss_bytes", 0))
            stats["timestamp"] = float(u.get("timestamp", 0.0))
        if stats:
            entry["resource_statistics"] = stats
        out.append(entry)
    return out
