"""The elastic service's HTTP API: requests turned into ``ElasticCore`` calls on the service;
the HTTP status of a refusal is decided here (``error_status``), never in the core.

HTTP API (JSON):

- ``POST /api/v1/jobs`` — a job spec: TOML text (``Content-Type: application/toml`` or
  ``{"toml": "..."}``) or the spec as a JSON object -> ``201 {"id": N, "state": ...}``
- ``GET /api/v1/jobs`` -> ``{"jobs": [summary, ...]}``
- ``GET /api/v1/jobs/{id}`` -> workers, generation, progress, the reason it is not at its maximum
- ``POST /api/v1/jobs/{id}/scale`` ``{"max_workers": N, "min_workers": M?}``
- ``POST /api/v1/jobs/{id}/cancel``
- ``GET /api/v1/jobs/{id}/logs?worker=N&stream=stdout|stderr&offset=O&length=L`` — a worker's
  output from its agent's sandbox (default: the first live worker, else the last one that ended)
- ``GET /health``, ``GET /api/v1/framework``, ``GET /metrics`` (Prometheus)
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from frameworks.client import api_auth, webui
from frameworks.client.api_auth import OwnerError, job_owner, principal_of
from frameworks.elastic import metrics, pages
from frameworks.elastic.jobs import (
    Job,
    JobConflict,
    NoSuchJob,
    ServiceError,
    job_detail,
    job_summary,
)
from frameworks.elastic.ports import ElasticPort
from frameworks.elastic.spec import SpecError, from_mapping, parse_toml
from frameworks.elastic.state import JobState
from frameworks.kit.http import html as _html
from protocol import codec
from protocol.acls import Action, job_problem, submit_problem


class ElasticApi:
    """The routes of the elastic service's API, each a handler on the port it is given
    (``ports.ElasticPort``: the service, or an in-memory port in a test)."""

    def __init__(self, port: ElasticPort) -> None:
        self.port = port

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/health", self._health),
            web.get("/", self._ui_jobs),
            web.get("/ui", self._ui_jobs),
            web.get("/ui/jobs/{id}", self._ui_job),
            web.get("/api/v1/whoami", self._whoami),
            web.get("/api/v1/framework", self._framework),
            web.post("/api/v1/jobs", self._submit),
            web.get("/api/v1/jobs", self._list),
            web.get("/api/v1/jobs/{id}", self._show),
            web.post("/api/v1/jobs/{id}/scale", self._scale),
            web.post("/api/v1/jobs/{id}/cancel", self._cancel),
            web.get("/api/v1/jobs/{id}/logs", self._logs),
            web.get("/metrics", self._metrics),
        ]

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def _ui_jobs(self, request: web.Request) -> web.Response:
        jobs = [job_summary(j) for j in self.port.jobs.values()]
        return _html(pages.jobs_page(jobs, master=self.port.master_ui(), principal=principal_of(request)))

    async def _ui_job(self, request: web.Request) -> web.Response:
        try:
            job = self.port.job(_job_id(request))
        except ServiceError as exc:
            return _html(webui.error_page(pages.SERVICE, error_status(exc), exc.reason), error_status(exc))
        stream = request.query.get("stream", "stdout")
        try:
            worker = int(request.query["worker"]) if "worker" in request.query else None
        except ValueError:
            return _html(webui.error_page(pages.SERVICE, 400, "worker must be an integer"), 400)
        if stream not in ("stdout", "stderr"):
            return _html(webui.error_page(pages.SERVICE, 400, "stream must be stdout or stderr"), 400)
        return _html(pages.job_page(self._detail(job), worker=worker, stream=stream, master=self.port.master_ui(),
                                    principal=principal_of(request)))

    async def _whoami(self, request: web.Request) -> web.Response:
        return web.json_response(api_auth.whoami(request, self.port.auth))

    def _denied(self, request: web.Request, job: Job, action: Action, what: str) -> web.Response | None:
        """``403`` unless the request's principal owns ``job`` or an ACL lets it (``action``)."""
        problem = job_problem(self.port.auth.acls, action, principal_of(request), job.user, what)
        return None if problem is None else api_auth.forbidden(problem)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.port.metrics_text(), headers={"Content-Type": metrics.CONTENT_TYPE})

    async def _framework(self, request: web.Request) -> web.Response:
        conn = self.port.connection()
        counts: dict[str, int] = {}
        for job in self.port.jobs.values():
            counts[job.state.value] = counts.get(job.state.value, 0) + 1
        return web.json_response(
            {
                "framework_id": conn.framework_id,
                "connected": conn.connected,
                "master": conn.master,
                "jobs": counts,
                "offers": conn.offers,
                "coordinators": {str(k): url for k, url in self.port.coordinator_urls().items()},
            }
        )

    async def _submit(self, request: web.Request) -> web.Response:
        raw = await request.read()
        claimed: Any = None
        try:
            if request.content_type in ("application/toml", "text/plain", "text/x-toml"):
                spec = parse_toml(raw.decode("utf-8", "replace"))
            else:
                try:
                    body = codec.loads_json(raw or b"{}")
                except ValueError as exc:
                    return _error(400, f"body is not valid JSON: {exc}")
                if not isinstance(body, dict):
                    return _error(400, 'the spec must be a JSON object (or {"toml": "..."})')
                claimed = body.pop("user", None)  # the owner it claims: checked against the principal
                spec = parse_toml(str(body["toml"])) if "toml" in body else from_mapping(body)
        except SpecError as exc:
            return _error(400, f"invalid job spec: {exc}")
        try:
            owner = job_owner(principal_of(request), claimed)
        except OwnerError as exc:
            return _error(exc.status, str(exc))
        if spec.role not in self.port.roles and "*" not in self.port.roles:
            return _error(400, f"role {spec.role!r} is not one of the framework's roles {list(self.port.roles)}")
        if (problem := submit_problem(self.port.auth.acls, principal_of(request), spec.role)) is not None:
            return api_auth.forbidden(problem)
        job_id = await self.port.submit_durably(spec, owner)  # durable before we answer
        return web.json_response({"id": job_id, "state": self.port.jobs[job_id].state.value}, status=201)

    async def _list(self, request: web.Request) -> web.Response:
        want = request.query.get("state")
        if want is not None and want.upper() not in JobState.__members__:
            return _error(400, f"state: unknown job state {want!r} (one of {', '.join(JobState.__members__)})")
        jobs = [
            job_summary(j)
            for j in sorted(self.port.jobs.values(), key=lambda j: j.job_id)
            if want is None or j.state.value == want.upper()
        ]
        return web.json_response({"jobs": jobs})

    async def _show(self, request: web.Request) -> web.Response:
        try:
            job = self.port.job(_job_id(request))
        except ServiceError as exc:
            return _error(error_status(exc), exc.reason)
        return web.json_response(self._detail(job))

    def _detail(self, job: Job) -> dict[str, Any]:
        """``job_detail`` with its coordinator's status (generation, workers, shards, recent log)."""
        out = job_detail(job)
        st = self.port.coordinator_status(job.job_id)
        if st is not None:
            out["coordinator_status"] = {
                "generation": st["generation"],
                "world_size": st["world_size"],
                "workers": st["workers"],
                "shards": {k: v for k, v in st["shards"].items() if k != "set_aside_detail"},
                "log": st["log"][-15:],
            }
        return out

    async def _scale(self, request: web.Request) -> web.Response:
        try:
            body = codec.loads_json(await request.read() or b"{}")
            if not isinstance(body, dict):
                raise ValueError("expected a JSON object")
            hi = body.get("max_workers", body.get("max"))
            lo = body.get("min_workers", body.get("min"))
            for v in (hi, lo):
                if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
                    raise ValueError(f"worker counts must be integers, got {v!r}")
            if hi is None and lo is None:
                raise ValueError("give max_workers and/or min_workers")
            if (denied := self._denied(request, self.port.job(_job_id(request)), Action.MANAGE_JOBS, "scale")):
                return denied
            self.port.scale(_job_id(request), max_workers=hi, min_workers=lo)
        except ServiceError as exc:
            return _error(error_status(exc), exc.reason)
        except ValueError as exc:
            return _error(400, str(exc))
        return web.json_response(job_summary(self.port.jobs[_job_id(request)]))

    async def _cancel(self, request: web.Request) -> web.Response:
        try:
            if (denied := self._denied(request, self.port.job(_job_id(request)), Action.MANAGE_JOBS, "cancel")):
                return denied
            self.port.cancel(_job_id(request))
        except ServiceError as exc:
            return _error(error_status(exc), exc.reason)
        return web.json_response(job_summary(self.port.jobs[_job_id(request)]))

    async def _logs(self, request: web.Request) -> web.Response:
        """A worker's stdout/stderr, read from its agent's sandbox (``/files/read``)."""
        try:
            job = self.port.job(_job_id(request))
            offset = int(request.query.get("offset", "0"))
            length = int(request.query.get("length", str(64 * 1024)))
            index = int(request.query["worker"]) if "worker" in request.query else None
        except ServiceError as exc:
            return _error(error_status(exc), exc.reason)
        except ValueError:
            return _error(400, "worker, offset and length must be integers")
        stream = request.query.get("stream", "stdout")
        if stream not in ("stdout", "stderr"):
            return _error(400, "stream must be stdout or stderr")
        if (denied := self._denied(request, job, Action.VIEW_JOB_LOGS, "read the logs of")):
            return denied
        workers = sorted(job.workers.values(), key=lambda w: w.index) + sorted(
            job.ended, key=lambda w: -w.index
        )
        chosen = [w for w in workers if index is None or w.index == index]
        if not chosen:
            return _error(404, f"job {job.job_id} has no worker {index}")
        w = chosen[0]
        got = await self.port.read_sandbox(w.agent_id, w.task_id, stream, offset, length)
        if got.data is None:
            return _error(got.status, got.error or f"agent {w.agent_id} of worker {w.task_id} is not reachable from here")
        return web.json_response({"worker": w.index, "task_id": w.task_id, "stream": stream, **got.data})


def _job_id(request: web.Request) -> int:
    try:
        return int(request.match_info["id"])
    except ValueError:
        raise NoSuchJob(f"no elastic job {request.match_info['id']!r}") from None


def error_status(exc: ServiceError) -> int:
    """The HTTP status for a request the core refused."""
    if isinstance(exc, NoSuchJob):
        return 404
    if isinstance(exc, JobConflict):
        return 409
    return 400


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)
