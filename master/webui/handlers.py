"""The web UI's aiohttp handlers (shell): gather the operator views, render with
``master.webui.pages``, and fetch sandbox listings and logs from the task's agent.

The agent's address is the one the master knows from its registration (``hostname:port`` in
``/state``'s ``slaves``); its ``/files/browse``, ``/files/read`` and ``/files/download`` endpoints
(``agent/files.py``) are asked with the query built by aiohttp (never by pasting strings), a short
timeout, and an unreachable agent becomes a page that says so (502), not a 500. One aiohttp
``ClientSession`` serves every such request; it is opened on first use and closed with the app
(``add_webui`` hooks it to the app's cleanup).

Each page asks the operator views only for what it shows (``master.views`` ``master_json``,
``agents_json``, ``frameworks_json``, ``task_json``): the agents page builds no framework, a log
poll builds one task and one agent.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

from master.auth import sandbox_denied, visible_state
from master.lifecycles import AgentPhase
from master.views import legacy_resources
from master.webui import model, pages, sandbox
from master.webui.html import Html, error_page
from protocol import codec, tls
from protocol.acls import TASK_LISTS
from protocol.agent_channel import AGENT_HTTPS
from protocol.ids import sandbox_path
from protocol.resources import Resources

if TYPE_CHECKING:
    from master.ports import OperatorPort

log = logging.getLogger("agora.master.webui")

TAIL_BYTES = 64 * 1024
AGENT_TIMEOUT = aiohttp.ClientTimeout(total=5.0, connect=2.0)
WILDCARDS = frozenset({"0.0.0.0", "::", "[::]"})


def add_webui(app: web.Application, svc: OperatorPort) -> WebUI:
    """Mount the UI on the master's ``app``; its HTTP client to the agents closes with the app."""
    ui = WebUI(svc)
    app.add_routes(ui.routes())
    app.on_cleanup.append(ui.on_cleanup)
    return ui


def _html(body: Html, status: int = 200) -> web.Response:
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8",
                        headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"})


class _AgentError(Exception):
    """The agent could not be asked, or refused; ``status`` is what the UI answers."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def sandbox_subpath(raw: str) -> str | None:
    """A path inside the task's sandbox as the UI accepts it: relative, no ``..`` component, no
    NUL; normalized (``a//b/`` -> ``a/b``, empty for the sandbox itself). ``None`` if refused."""
    if "\x00" in raw or raw.startswith("/"):
        return None
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if ".." in parts:
        return None
    return posixpath.join(*parts) if parts else ""


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class WebUI:
    def __init__(self, svc: OperatorPort) -> None:
        self.svc = svc
        self._http: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        """The one session to the agents (opened lazily: it needs the running loop)."""
        if self._http is None or self._http.closed:
            cfg = self.svc.config  # https agents are verified against the master's --tls-ca
            ctx = tls.client_context(cfg.tls_ca, ca_flag="--tls-ca") if cfg.tls_ca else True
            self._http = aiohttp.ClientSession(timeout=AGENT_TIMEOUT, connector=aiohttp.TCPConnector(ssl=ctx))
        return self._http

    def _agent_headers(self) -> dict[str, str]:
        """The master's credential for agents run with ``--authenticate-http``
        (``--agent-http-credential``; re-read on SIGHUP with the other auth files)."""
        header = self.svc.auth.agent_http_header
        return {"Authorization": header} if header else {}

    async def close(self) -> None:
        """Close the session to the agents (idempotent)."""
        http, self._http = self._http, None
        if http is not None and not http.closed:
            await http.close()

    async def on_cleanup(self, _app: web.Application) -> None:
        await self.close()

    def routes(self) -> list[web.RouteDef]:
        """Every page answers 503 while the master recovers (``_when_ready``)."""
        task = "/ui/tasks/{framework_id}/{task_id}/files"
        pages: list[tuple[str, Handler]] = [
            ("/", self.summary),
            ("/ui", self.summary),
            ("/ui/", self.summary),
            ("/ui/agents", self.agents),
            ("/ui/agents/{agent_id}", self.agent),
            ("/ui/frameworks", self.frameworks),
            ("/ui/frameworks/{framework_id}", self.framework),
            ("/ui/tasks", self.tasks),
            ("/ui/offers", self.offers),
            ("/ui/roles", self.roles),
            ("/ui/maintenance", self.maintenance),
            ("/ui/tasks/{framework_id}/{task_id}", self.task),
            (task, self.browse),
            (task + "/read", self.read),
            (task + "/download", self.download),
            (task + "/view", self.view),
            (task + "/{stream:stdout|stderr}", self.view),
        ]
        return [web.get(path, self._when_ready(handler)) for path, handler in pages]

    def _when_ready(self, handler: Handler) -> Handler:
        async def guarded(request: web.Request) -> web.StreamResponse:
            if not self.svc.ready:
                page = error_page(503, "Master is recovering", "The master is recovering its state; try again shortly.")
                return _html(page, 503)
            return await handler(request)

        return guarded

    # --- the operator views ---------------------------------------------------------------------

    def _state(self, request: web.Request, *, master: bool = False, agents: bool | str = False,
               frameworks: bool | str = False) -> dict[str, Any]:
        """The part of ``/state`` a page shows: the master's own fields, the agents (all, or the
        one with that id) and the frameworks (all, or the one with that id) -- those the request's
        principal may view (``view_frameworks``/``view_tasks``, as ``/state`` filters them)."""
        views = self.svc.operator_api
        out: dict[str, Any] = views.master_json() if master else {}
        if agents is not False:
            out["slaves"] = views.agents_json(None if agents is True else agents)
            if agents is True:
                out["recovered_slaves"] = [
                    {"id": a.agent_id, "hostname": a.hostname, "port": a.port}
                    for a in self.svc.state.agents.values() if a.phase is AgentPhase.RECOVERED
                ]
        if frameworks is not False:
            out["frameworks"], out["completed_frameworks"] = views.frameworks_json(
                None if frameworks is True else frameworks)
            out = visible_state(self.svc, request, out)
        return out

    def _offers(self, request: web.Request) -> list[dict[str, Any]]:
        """What ``GET /api/v1/offers`` serves, less offers to frameworks the principal may not view."""
        seen = self._visible_framework_ids(request)
        return [o for o in self.svc.operator_api.offers_list() if str(o.get("framework_id", "")) in seen]

    def _visible_framework_ids(self, request: web.Request) -> set[str]:
        state = self._state(request, frameworks=True)
        return {str(fw.get("id", "")) for fw in (*state["frameworks"], *state["completed_frameworks"])}

    def _roles(self, request: web.Request, offers: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """GET_ROLES joined with GET_QUOTA and the offered resources per role (the frameworks
        listed: those the principal may view)."""
        seen = self._visible_framework_ids(request)
        api = self.svc.operator_api
        quotas = {
            c["role"]: c
            for c in codec.to_builtins(api.get_quota()).get("status", {}).get("configs", [])
        }
        out = []
        for r in api.get_roles().roles:
            q = quotas.get(r.name, {})
            limits = q.get("limits")
            out.append(
                {
                    "name": r.name,
                    "weight": r.weight,
                    "frameworks": [f.value for f in r.frameworks if f.value in seen],
                    "allocated": legacy_resources(Resources.from_mesos(r.allocated)),
                    "offered": model.sum_resources(o["resources"] for o in offers if o["role"] == r.name),
                    "guarantee": {k: v["value"] for k, v in q.get("guarantees", {}).items()},
                    "limit": {k: v["value"] for k, v in limits.items()} if limits else None,
                }
            )
        return out

    # --- pages ----------------------------------------------------------------------------------

    async def summary(self, request: web.Request) -> web.Response:
        state = self._state(request, master=True, agents=True, frameworks=True)
        return _html(pages.summary_page(state, self.svc.operator_api.snapshot(), self._offers(request)))

    async def agents(self, request: web.Request) -> web.Response:
        return _html(pages.agents_page(self._state(request, agents=True)))

    async def agent(self, request: web.Request) -> web.Response:
        aid = request.match_info["agent_id"]
        return self._or_404(pages.agent_page(self._state(request, agents=aid, frameworks=True), aid), "agent", aid)

    async def frameworks(self, request: web.Request) -> web.Response:
        return _html(pages.frameworks_page(self._state(request, frameworks=True)))

    async def framework(self, request: web.Request) -> web.Response:
        fid = request.match_info["framework_id"]
        return self._or_404(pages.framework_page(self._state(request, frameworks=fid), fid), "framework", fid)

    async def tasks(self, request: web.Request) -> web.Response:
        return _html(pages.tasks_page(self._state(request, frameworks=True), request.query.get("state") or None))

    async def offers(self, request: web.Request) -> web.Response:
        return _html(pages.offers_page(self._offers(request), self._framework_names()))

    async def roles(self, request: web.Request) -> web.Response:
        return _html(pages.roles_page(self._roles(request, self._offers(request)), self._framework_names()))

    def _framework_names(self) -> dict[str, str]:
        """framework id -> name, live and completed (ids not visible to the request are not shown
        by the pages that use it: offers and roles list only frameworks it may view)."""
        st = self.svc.state
        out = {f.framework_id: f.info.name for f in st.completed_frameworks}
        out.update({fid: f.info.name for fid, f in st.frameworks.items()})
        return out

    async def maintenance(self, request: web.Request) -> web.Response:
        return _html(pages.maintenance_page(self._state(request, agents=True, frameworks=True)))

    async def task(self, request: web.Request) -> web.Response:
        fid, tid = request.match_info["framework_id"], request.match_info["task_id"]
        found = self._find_task(request, fid, tid)
        if found is None:
            return _html(pages.not_found_page("task", f"{fid}/{tid}"), 404)
        return _html(sandbox.task_page(*found, now=time.time()))

    @staticmethod
    def _or_404(body: Html | None, what: str, ident: str) -> web.Response:
        return _html(pages.not_found_page(what, ident), 404) if body is None else _html(body)

    # --- sandbox --------------------------------------------------------------------------------

    def _find_task(
        self, request: web.Request | None, fid: str, tid: str
    ) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
        """The task's ``/state`` entry and its agent's (None if the master no longer has it, or --
        given the request -- its principal may not view it: ``view_frameworks``/``view_tasks``)."""
        views = self.svc.operator_api
        task = views.task_json(fid, tid)
        if task is None or (request is not None and not self._may_view_task(request, fid, tid)):
            return None
        agents = views.agents_json(str(task.get("slave_id", "")))
        name = self._framework_names().get(fid)  # the task pages show it, the id on hover
        return ({**task, "framework_name": name} if name else task), (agents[0] if agents else None)

    def _may_view_task(self, request: web.Request, fid: str, tid: str) -> bool:
        seen = self._state(request, frameworks=fid)
        return any(
            str(t.get("id", "")) == tid
            for fw in (*seen["frameworks"], *seen["completed_frameworks"])
            for key in TASK_LISTS for t in fw.get(key, ())
        )

    def _task_and_agent(
        self, request: web.Request
    ) -> tuple[dict[str, Any], dict[str, Any] | None, str] | web.Response:
        """The task, its agent's ``/state`` entry (None if the master no longer has it) and the
        requested sandbox sub-path; or the error page to answer."""
        fid, tid = request.match_info["framework_id"], request.match_info["task_id"]
        found = self._find_task(None, fid, tid)  # sandboxes: access_sandboxes decides (403)
        if found is None:
            return _html(pages.not_found_page("task", f"{fid}/{tid}"), 404)
        raw = request.match_info.get("stream") or request.query.get("path", "")
        sub = sandbox_subpath(raw)
        if sub is None:
            return _html(error_page(400, "Bad path", f"{raw!r} is not a path inside the task's sandbox."), 400)
        if (denied := sandbox_denied(self.svc, request, fid, tid)) is not None:  # access_sandboxes
            return _html(error_page(403, "Forbidden", denied), 403)
        task, agent = found
        return task, agent, sub

    @staticmethod
    def _agent_url(task: dict[str, Any], agent: dict[str, Any] | None) -> str:
        if agent is None:
            raise _AgentError(502, f"Agent {task.get('slave_id')} of this task is no longer known to the master; "
                                   "its sandbox cannot be reached from here.")
        host, port = str(agent.get("hostname", "")), agent.get("port")
        if not host or not isinstance(port, int) or port <= 0:
            raise _AgentError(502, f"Agent {agent.get('id')} did not register an address to reach it at.")
        if host in WILDCARDS:
            raise _AgentError(502, f"Agent {agent.get('id')} registered the wildcard address {host}, which does "
                                   "not say where to reach it; start it with --host <its reachable address>.")
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        scheme = "https" if AGENT_HTTPS in (agent.get("capabilities") or ()) else "http"
        return f"{scheme}://{host}:{port}"

    async def _agent_json(self, task: dict[str, Any], agent: dict[str, Any] | None, endpoint: str,
                          params: dict[str, str]) -> Any:
        base = self._agent_url(task, agent)
        try:
            async with self._client().get(f"{base}/files/{endpoint}", params=params,
                                          headers=self._agent_headers()) as resp:
                if resp.status != 200:
                    detail = (await resp.text())[:500]
                    status = resp.status if resp.status in (400, 403, 404) else 502
                    raise _AgentError(status, f"The agent at {base} answered {resp.status}: {detail}")
                return await resp.json()
        except (aiohttp.ClientError, TimeoutError, ValueError) as e:
            raise _AgentError(
                502, f"The agent at {base} is unreachable ({type(e).__name__}: {e or 'no answer in time'})."
            ) from e

    @staticmethod
    def _agent_path(task: dict[str, Any], sub: str) -> str:
        base = sandbox_path(str(task.get("framework_id")), str(task.get("id")), str(task.get("executor_id") or ""))
        return f"{base}/{sub}" if sub else base

    async def browse(self, request: web.Request) -> web.Response:
        got = self._task_and_agent(request)
        if isinstance(got, web.Response):
            return got
        task, agent, sub = got
        try:
            entries = await self._agent_json(task, agent, "browse", {"path": self._agent_path(task, sub)})
        except _AgentError as e:
            return _html(sandbox.browse_page(task, agent, sub, None, e.message), e.status)
        if not isinstance(entries, list):
            entries = []
        return _html(sandbox.browse_page(task, agent, sub, [e for e in entries if isinstance(e, dict)], None))

    async def view(self, request: web.Request) -> web.Response:
        got = self._task_and_agent(request)
        if isinstance(got, web.Response):
            return got
        task, agent, sub = got
        if not sub:
            return _html(error_page(400, "Bad path", "Which file? Give ?path=<file in the sandbox>."), 400)
        agent_path = self._agent_path(task, sub)
        try:
            end = await self._agent_json(task, agent, "read", {"path": agent_path, "offset": "-1"})
            size = int(end.get("offset", 0)) if isinstance(end, dict) else 0
            start = max(0, size - TAIL_BYTES)
            got_data = await self._agent_json(
                task, agent, "read", {"path": agent_path, "offset": str(start), "length": str(size - start)}
            )
        except _AgentError as e:
            return _html(sandbox.log_page(task, agent, sub, None, 0, 0, e.message), e.status)
        data = str(got_data.get("data", "")) if isinstance(got_data, dict) else ""
        # we asked for exactly start..size (files only grow): follow from size, even if a
        # character cut at either end came back as U+FFFD
        return _html(sandbox.log_page(task, agent, sub, data, start, size, None,
                                      chunk=TAIL_BYTES))

    async def read(self, request: web.Request) -> web.Response:
        """JSON for the log tailer: ``{"data", "offset", "next_offset"}`` from ``offset``."""
        got = self._task_and_agent(request)
        if isinstance(got, web.Response):
            return got
        task, agent, sub = got
        try:
            offset = max(0, int(request.query.get("offset", "0")))
        except ValueError:
            return web.json_response({"error": "offset must be an integer"}, status=400)
        try:
            out = await self._agent_json(
                task, agent, "read", {"path": self._agent_path(task, sub), "offset": str(offset),
                                      "length": str(TAIL_BYTES)}
            )
        except _AgentError as e:
            return web.json_response({"error": e.message}, status=e.status)
        data = str(out.get("data", "")) if isinstance(out, dict) else ""
        start = int(out.get("offset", offset)) if isinstance(out, dict) else offset
        data, next_offset = model.follow_chunk(data, start)
        return web.json_response({"data": data, "offset": start, "next_offset": next_offset})

    async def download(self, request: web.Request) -> web.StreamResponse:
        """The whole file, streamed through from the agent's ``/files/download``."""
        got = self._task_and_agent(request)
        if isinstance(got, web.Response):
            return got
        task, agent, sub = got
        try:
            base = self._agent_url(task, agent)
        except _AgentError as e:
            return _html(error_page(e.status, "Agent unreachable", e.message), e.status)
        name = sub.rsplit("/", 1)[-1] or "download"
        resp: web.StreamResponse | None = None
        timeout = aiohttp.ClientTimeout(total=None, connect=2.0, sock_read=10.0)
        try:
            async with self._client().get(f"{base}/files/download", params={"path": self._agent_path(task, sub)},
                                          timeout=timeout, headers=self._agent_headers()) as up:
                if up.status != 200:
                    detail = (await up.text())[:500]
                    status = up.status if up.status in (400, 403, 404) else 502
                    return _html(error_page(status, "Agent refused", f"The agent at {base} answered {up.status}: "
                                                                      f"{detail}"), status)
                resp = web.StreamResponse(headers={
                    "Content-Type": "application/octet-stream",
                    "Content-Disposition": up.headers.get("Content-Disposition", f'attachment; filename="{name}"'),
                })
                if up.content_length is not None:
                    resp.content_length = up.content_length
                await resp.prepare(request)
                async for chunk in up.content.iter_chunked(64 * 1024):
                    await resp.write(chunk)
                await resp.write_eof()
                return resp
        except (aiohttp.ClientError, TimeoutError) as e:
            msg = f"The agent at {base} is unreachable ({type(e).__name__}: {e or 'no answer in time'})."
            log.info("sandbox download of %s failed: %s", sub, msg)
            if resp is not None and resp.prepared:
                return resp  # the headers are out: the client sees a short body
            return _html(error_page(502, "Agent unreachable", msg), 502)
