"""The agent's own HTTP endpoints (shell): ``/health``, ``/state`` (with ``gpus``: the devices
and who holds each), ``/metrics``, ``/flags`` (the settings it runs with)."""

from __future__ import annotations

import functools
import logging
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from agent import auth as agent_auth
from agent import mesos_views
from protocol import requestlog
from protocol.mesos import AgentInfo, TaskInfo
from protocol.resources import Resources

if TYPE_CHECKING:
    from agent.ports import AgentView

log = logging.getLogger(__name__)


async def serve(
    view: AgentView, host: Any, agent_info: Callable[[], AgentInfo], server_ssl: ssl.SSLContext | None,
) -> tuple[web.AppRunner, Any]:
    """Listen on ``--host``/``--port``: these endpoints, the sandbox files (``agent/files.py``),
    the v1 operator API (``agent/operator_api.py``) and the executor API (``agent/executor_api.py``,
    calling back ``host``). Returns the runner and the executor API; the port is in ``view.me``."""
    cfg = view.config
    app = web.Application(client_max_size=1024 * 1024)
    if (http_creds := agent_auth.http_credentials(cfg)) is not None:
        app.middlewares.append(agent_auth.middleware(http_creds))
    add_routes(app, view)
    sandbox_files = None
    try:
        from agent import files

        sandbox_files = files.add_routes(app, view.sandboxes)
    except ImportError:  # pragma: no cover
        log.warning("agent.files missing: no sandbox browsing")
    from agent import operator_api

    operator_api.add_routes(app, view, sandbox_files)
    executor_api: Any = None
    try:
        from agent.executor_api import ExecutorAPI

        executor_api = ExecutorAPI(host, agent_info)
        app.router.add_routes(executor_api.routes())
    except ImportError:  # pragma: no cover
        log.warning("agent.executor_api missing: no custom executors")
    requestlog.install()  # a malformed request: one line, rate limited per client
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, cfg.host, cfg.port, ssl_context=server_ssl)
    await site.start()
    view.me.port = int(runner.addresses[0][1])
    return runner, executor_api


def add_routes(app: web.Application, svc: AgentView) -> None:
    app.router.add_get("/health", functools.partial(health, svc))
    app.router.add_get("/state", functools.partial(state_handler, svc))
    app.router.add_get("/slave(1)/state", functools.partial(state_handler, svc))
    app.router.add_get("/metrics", functools.partial(metrics, svc))
    app.router.add_get("/flags", functools.partial(flags_handler, svc))


async def health(svc: AgentView, request: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "registered": bool((link := svc.link()) and link.registered)})

def state(svc: AgentView) -> dict[str, Any]:
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
        "master": link.master if (link := svc.link()) else svc.config.master,
        "registered": bool((link := svc.link()) and link.registered),
        "boot_id": svc.me.boot_id,
        "isolation": svc.isolator.name,
        "isolator": svc.isolator.describe(),
        "gpus": gpus_json(svc),
        "tasks": tasks,
        "recovery": svc.me.recovery_report,
        "stale_frames": link.stale_frames if (link := svc.link()) else 0,
    })

def gpus_json(svc: AgentView) -> list[dict[str, Any]]:
    """The agent's GPU devices, each with the tasks holding it (``framework_id/task_id``)."""
    out = []
    for index, d in sorted(svc.gpus().devices.items()):
        holders = ["/".join(map(str, k)) if isinstance(k, tuple) else str(k) for k in svc.gpus().holders(index)]
        out.append({**d.to_json(), "declared": d.declared, "tasks": holders})
    return out

async def state_handler(svc: AgentView, request: web.Request) -> web.Response:
    return web.json_response(state(svc))

def flags(svc: AgentView) -> dict[str, str]:
    """The settings the agent runs with (flags and ``--config`` file merged), as Mesos' agent
    ``/flags`` shows them (``agent/mesos_views.py``, also in ``/state`` and ``GET_FLAGS``)."""
    return mesos_views.flags(svc)


async def flags_handler(svc: AgentView, request: web.Request) -> web.Response:
    return web.json_response({"flags": flags(svc)})


async def metrics(svc: AgentView, request: web.Request) -> web.Response:
    svc.metrics.running.set(len(svc.tracker.active()))
    return web.Response(body=generate_latest(svc.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})


def _legacy(info: TaskInfo | None) -> dict[str, float | str]:
    if info is None:
        return {}
    try:
        return Resources.from_mesos(info.resources).to_legacy_dict()
    except ValueError:
        return {}
