"""The agent's own HTTP endpoints (shell): ``/health``, ``/state`` (with ``gpus``: the devices
and who holds each), ``/metrics``, ``/flags`` (the settings it runs with)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from agent import mesos_views
from protocol.mesos import TaskInfo
from protocol.resources import Resources

if TYPE_CHECKING:
    from agent.service import AgentService


def add_routes(app: web.Application, svc: AgentService) -> None:
    app.router.add_get("/health", functools.partial(health, svc))
    app.router.add_get("/state", functools.partial(state_handler, svc))
    app.router.add_get("/slave(1)/state", functools.partial(state_handler, svc))
    app.router.add_get("/metrics", functools.partial(metrics, svc))
    app.router.add_get("/flags", functools.partial(flags_handler, svc))


async def health(svc: AgentService, request: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "registered": bool(svc.channel and svc.channel.registered)})

def state(svc: AgentService) -> dict[str, Any]:
    tasks: list[dict[str, Any]] = []
    for t in svc.tracker.tasks.values():
        fid, tid = t.key
        tasks.append(
            {
                "framework_id": fid,
                "id": tid,
                "name": t.spec.name,
                "state": t.state.name,
                "pid": t.pid,
                "executor_id": t.spec.executor_id or tid,
                "resources": _legacy(t.spec.info),
                "exit_code": t.exit_code,
                "sandbox": str(mesos_views.sandbox_path(svc, t.spec)),
                "pending_updates": len(svc.updates.pending(fid, tid)),
            }
        )
        used = svc.usage.get((fid, tid))
        if used is not None:
            tasks[-1]["usage"] = used.to_json()
        if t.spec.gpu_devices:
            tasks[-1]["gpus"] = list(t.spec.gpu_devices)
    # Mesos' agent /state (agent/mesos_views.py), then Agora's additions
    return mesos_views.state_json(svc, {
        "master": svc.channel.master if svc.channel else svc.config.master,
        "registered": bool(svc.channel and svc.channel.registered),
        "boot_id": svc.boot_id,
        "isolation": svc.isolator.name,
        "isolator": svc.isolator.describe(),
        "gpus": gpus_json(svc),
        "tasks": tasks,
        "recovery": svc.recovery_report,
        "stale_frames": svc.channel.stale_frames if svc.channel else 0,
    })

def gpus_json(svc: AgentService) -> list[dict[str, Any]]:
    """The agent's GPU devices, each with the tasks holding it (``framework_id/task_id``)."""
    out = []
    for index, d in sorted(svc.gpus.devices.items()):
        holders = ["/".join(map(str, k)) if isinstance(k, tuple) else str(k) for k in svc.gpus.holders(index)]
        out.append({**d.to_json(), "declared": d.declared, "tasks": holders})
    return out

async def state_handler(svc: AgentService, request: web.Request) -> web.Response:
    return web.json_response(state(svc))

def flags(svc: AgentService) -> dict[str, str]:
    """The settings the agent runs with (flags and ``--config`` file merged), as Mesos' agent
    ``/flags`` shows them (``agent/mesos_views.py``, also in ``/state`` and ``GET_FLAGS``)."""
    return mesos_views.flags(svc)


async def flags_handler(svc: AgentService, request: web.Request) -> web.Response:
    return web.json_response({"flags": flags(svc)})


async def metrics(svc: AgentService, request: web.Request) -> web.Response:
    svc.m_running.set(len(svc.tracker.active()))
    return web.Response(body=generate_latest(svc.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})


def _legacy(info: TaskInfo | None) -> dict[str, float | str]:
    if info is None:
        return {}
    try:
        return Resources.from_mesos(info.resources).to_legacy_dict()
    except ValueError:
        return {}
