"""The batch service's HTTP API (JSON by default, msgpack with ``Content-Type``/``Accept:
application/x-msgpack``): requests turned into ``BatchCore`` calls, answered once what they
changed is written. Routes and what each answers: ``frameworks/batch/README.md``.

- ``POST /api/v1/jobs`` (a job spec, see ``model.spec_from_dict``) -> ``201 {"id": N}``
- ``GET /api/v1/jobs[?state=PENDING]`` -> ``{"jobs": [summary, ...]}``
- ``GET /api/v1/jobs/{id}`` -> the job with its tasks, attempts and reason (``?summary=1``:
  without the tasks, for pollers; ``?task=I``: with task ``I`` only)
- ``POST /api/v1/jobs/{id}/cancel``
- ``POST /api/v1/jobs/{id}/tasks/{index}/kill`` -> kill that task's running attempt (``agora task
  kill``); it ends as a crash would (retried if it has retries left)
- ``GET /api/v1/jobs/{id}/logs?task=I&stream=stdout|stderr&offset=O&length=L`` -> read from the
  agent's sandbox (``/files/read``), ``{"data": str, "offset": int}``; once the sandbox is gone
  (or its agent), from the tail of the attempt's output kept in the store when it ended
  (``--log-tail``, ``logtail.py``), with ``"kept": {"from", "to", "note"}`` saying so
- ``GET /health``, ``GET /api/v1/framework`` (framework id, master, counts)
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
from aiohttp import web

from frameworks.batch import logtail, pages
from frameworks.batch.metrics import CONTENT_TYPE as metrics_content_type
from frameworks.batch.model import JobSpec, JobState, SpecError, spec_from_dict
from frameworks.batch.planner import gpu_sharing_error
from frameworks.batch.ports import BatchPort
from frameworks.batch.records import ACTIVE, BatchError, JobRecord
from frameworks.batch.store import AccountingQuery
from frameworks.batch.views import history_row, job_detail, job_summary
from frameworks.batch.warm import RESULTS_PAGE, inputs_of
from frameworks.client import api_auth, webui
from frameworks.client.api_auth import OwnerError, job_owner, principal_of
from frameworks.kit.http import BodyError, read_body
from frameworks.kit.http import error as _error
from frameworks.kit.http import html as _html
from frameworks.kit.http import reply as _reply
from frameworks.service.dispatch import TaskState as ServiceTaskState
from protocol.acls import Action, job_problem, priority_problem, submit_problem

log = logging.getLogger(__name__)


class BatchApi:
    """The routes of the batch service's API, each a handler on the port it is given
    (``ports.BatchPort``: the service, or an in-memory port in a test)."""

    def __init__(self, port: BatchPort) -> None:
        self.port = port

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/health", self._health),
            web.get("/", self._ui_jobs),
            web.get("/ui", self._ui_jobs),
            web.get("/ui/jobs/{id}", self._ui_job),
            web.get("/metrics", self._metrics),
            web.get("/api/v1/whoami", self._whoami),
            web.get("/api/v1/priority", self._priority),
            web.get("/api/v1/share", self._share),
            web.get("/api/v1/history", self._history),
            web.get("/api/v1/accounting", self._accounting),
            web.get("/api/v1/framework", self._framework),
            web.post("/api/v1/jobs", self._submit),
            web.get("/api/v1/jobs", self._list),
            web.get("/api/v1/jobs/{id}", self._show),
            web.post("/api/v1/jobs/{id}/cancel", self._cancel),
            web.post("/api/v1/jobs/{id}/hold", self._hold),
            web.post("/api/v1/jobs/{id}/release", self._release),
            web.post("/api/v1/jobs/{id}/requeue", self._requeue),
            web.post("/api/v1/jobs/{id}/update", self._update),
            web.get("/api/v1/events", self._events),
            web.post("/api/v1/jobs/{id}/tasks/{index}/kill", self._kill_task),
            web.get("/api/v1/jobs/{id}/logs", self._logs),
            web.get("/api/v1/jobs/{id}/results", self._results),
        ]

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.port.metrics_text(), headers={"Content-Type": metrics_content_type})

    async def _ui_jobs(self, request: web.Request) -> web.Response:
        user = request.query.get("user") or None
        state = (request.query.get("state") or "").upper() or None
        jobs = [
            job_summary(j) for j in self.port.jobs.values()
            if (user is None or (j.user or "") == user) and (state is None or j.state.value == state)
        ]
        return _html(pages.jobs_page(jobs, self._share_rows(), user=user, state=state, master=self.port.master_ui(),
                                     principal=principal_of(request)))

    async def _ui_job(self, request: web.Request) -> web.Response:
        job = self._job(request)
        if isinstance(job, web.Response):
            return _html(webui.error_page(pages.SERVICE, 404, f"no job {request.match_info['id']}"), 404)
        stream = request.query.get("stream", "stdout")
        task: int | None = None
        if "task" in request.query:
            try:
                task = int(request.query["task"])
            except ValueError:
                return _html(webui.error_page(pages.SERVICE, 400, "task must be an integer"), 400)
        if stream not in ("stdout", "stderr") or (task is not None and not 0 <= task < len(job.tasks)):
            return _html(webui.error_page(pages.SERVICE, 400, f"no such log: task {task}, {stream}"), 400)
        return _html(pages.job_page(job_detail(job), task=task, stream=stream, master=self.port.master_ui(),
                                    principal=principal_of(request)))

    async def _whoami(self, request: web.Request) -> web.Response:
        return _reply(request, api_auth.whoami(request, self.port.auth))

    def _denied(self, request: web.Request, job: JobRecord, action: Action, what: str) -> web.Response | None:
        """``403`` unless the request's principal owns ``job`` or an ACL lets it (``action``)."""
        problem = job_problem(self.port.auth.acls, action, principal_of(request), job.user, what)
        return None if problem is None else _error(request, 403, problem)

    async def _priority(self, request: web.Request) -> web.Response:
        """Every pending job's multifactor priority and its factors (``agora job priority``)."""
        factors = self.port.priorities(self.port.now())
        weights = attrs.asdict(self.port.config.fairshare)
        rows = []
        for job_id, f in sorted(factors.items(), key=lambda kv: (-kv[1].total, kv[0])):
            job = self.port.jobs[job_id]
            if job.state is not JobState.PENDING and not job.pending:
                continue
            rows.append({
                "id": job_id, "name": job.spec.name, "user": job.user, "queue": job.spec.queue,
                "priority": f.total, "fairshare": f.fairshare, "job_priority": f.priority, "age": f.age,
                "size": f.size, "nice": job.spec.priority,
            })
        return _reply(request, {"jobs": rows, "weights": weights})

    async def _history(self, request: web.Request) -> web.Response:
        """Jobs as ``sacct`` lists them, newest first: ``?user=&queue=&state=S1,S2&since=&until=
        &limit=`` (times in Unix seconds; a job counts when it overlaps the window)."""
        try:
            q = history_query(request)
        except ValueError as exc:
            return _error(request, 400, str(exc))
        states = set(q.states)
        if bad := states - {s.value for s in JobState}:
            return _error(request, 400, f"state: unknown {', '.join(sorted(bad))} (states: "
                          f"{', '.join(s.value for s in JobState)})")
        rows = []
        for job in self.port.jobs.values():
            if job.periodic or (q.user is not None and (job.user or "") != q.user):
                continue
            if (q.queue is not None and job.spec.queue != q.queue) or (states and job.state.value not in states):
                continue
            if q.until is not None and job.submitted_at >= q.until:
                continue
            if q.since is not None and job.ended_at is not None and job.ended_at < q.since:
                continue
            rows.append(history_row(job))
        rows.sort(key=lambda r: (r["ended_at"] or r["started_at"] or r["submitted_at"], r["id"]), reverse=True)
        return _reply(request, {"jobs": rows[: q.limit]})

    async def _accounting(self, request: web.Request) -> web.Response:
        """Every attempt that ran (``sacct``'s steps), newest first, from the accounting table:
        ``?user=&queue=&state=TASK_FAILED,...&since=&until=&job=&limit=``."""
        try:
            q = history_query(request)
            job_id = int(request.query["job"]) if "job" in request.query else None
        except ValueError as exc:
            return _error(request, 400, str(exc))
        rows = await self.port.accounting(attrs.evolve(q, job_id=job_id))
        return _reply(request, {"attempts": rows})

    def _share_rows(self) -> list[dict[str, Any]]:
        return [
            {
                "queue": s.queue, "user": s.user, "shares": s.shares, "norm_shares": s.norm_shares,
                "usage": s.usage.billing, "cpu_seconds": s.usage.cpu, "gpu_seconds": s.usage.gpu,
                "mem_mb_seconds": s.usage.mem, "norm_usage": s.norm_usage, "fairshare": s.factor,
            }
            for s in sorted(self.port.shares(self.port.now()).values(), key=lambda s: (s.queue, s.user))
        ]

    async def _share(self, request: web.Request) -> web.Response:
        """Every (queue, user) with live jobs: decayed usage, shares, fair-share factor (``agora share``)."""
        rows = self._share_rows()
        return _reply(request, {"users": rows, "half_life": self.port.config.fairshare.half_life,
                                "limits": self.port.config.limits.as_dict()})

    async def _framework(self, request: web.Request) -> web.Response:
        conn = self.port.connection()
        counts: dict[str, int] = {}
        for job in self.port.jobs.values():
            counts[job.state.value] = counts.get(job.state.value, 0) + 1
        return _reply(
            request,
            {
                "framework_id": conn.framework_id,
                "connected": conn.connected,
                "master": conn.master,
                "jobs": counts,
                "offers": conn.offers,
                "rounds": self.port.rounds,
                "flushes": self.port.flushes,
            },
        )

    def _queue_error(self, queue: str) -> str | None:
        if queue in self.port.roles:
            return None
        # no offer would ever come for it: refuse now, not wait forever
        served = ", ".join(repr(r) for r in self.port.roles)
        return (f"queue {queue!r} is not served by {self.port.framework_name}: "
                f"it subscribes with roles {served} (start it with --roles, or agora up --roles)")

    async def _submit(self, request: web.Request) -> web.Response:
        """One spec, or ``{"jobs": [spec, ...]}`` (a job file): all or none, where an ``after``
        entry ``{"name": N, "kind": K}`` names an earlier job of the same list."""
        try:
            body = await _read(request)
            claimed = body.pop("user", None) if isinstance(body, dict) else None
            inputs = body.pop("inputs", None) if isinstance(body, dict) else None
            if isinstance(body, dict) and "jobs" in body:
                specs = jobs_from_list(body["jobs"])
            else:
                specs = [spec_from_dict(body)]
            if inputs is not None and not (len(specs) == 1 and specs[0].service and "jobs" not in body):
                raise SpecError("inputs: only a single service job (service: true) takes inputs")
            if any(s.service for s in specs):
                if len(specs) != 1 or "jobs" in body:
                    raise SpecError("service: a service job is submitted alone, with its inputs")
                inputs = inputs_of({"inputs": inputs})
        except SpecError as exc:
            return _error(request, 400, str(exc))
        principal = principal_of(request)
        try:
            # the authenticated principal, never the body's word; without authentication the
            # claimed user (the body's, else the CLI's X-Agora-User)
            owner = job_owner(principal, claimed) or requester(request)
        except OwnerError as exc:
            return _error(request, exc.status, str(exc))
        if any(s.gpus != int(s.gpus) for s in specs) and not self.port.cluster:
            await self.port.read_cluster()  # whether any agent shares GPUs
        for n, spec in enumerate(specs):
            which = "" if len(specs) == 1 else f"job {n + 1} ({spec.name}): "
            err = self._queue_error(spec.queue) or gpu_sharing_error(spec, self.port.cluster)
            if err:
                return _error(request, 400, which + err)
            if (problem := submit_problem(self.port.auth.acls, principal, spec.queue)) is not None:
                return _error(request, 403, which + problem)
            if (problem := priority_problem(self.port.auth.acls, principal, owner, 0, spec.priority)) is not None:
                return _error(request, 403, which + problem)
            if (refused := self.port.admission(spec, owner)) is not None:
                return _error(request, 429, f"{which}refused by the limits: {refused}")
        try:
            ids = await self.port.submit(specs, owner, principal is not None, inputs)
        except BatchError as exc:
            return _error(request, 400, str(exc))
        if len(ids) == 1 and not (isinstance(body, dict) and "jobs" in body):
            return _reply(request, {"id": ids[0], "state": self.port.jobs[ids[0]].state.value}, status=201)
        return _reply(request, {"ids": ids, "jobs": [job_summary(self.port.jobs[i]) for i in ids]}, status=201)

    async def _hold(self, request: web.Request) -> web.Response:
        return await self._change(request, self.port.hold)

    async def _release(self, request: web.Request) -> web.Response:
        return await self._change(request, self.port.release)

    async def _requeue(self, request: web.Request) -> web.Response:
        return await self._change(request, self.port.requeue)

    async def _update(self, request: web.Request) -> web.Response:
        try:
            changes = await _read(request)
        except SpecError as exc:
            return _error(request, 400, str(exc))
        if not isinstance(changes, dict):
            return _error(request, 400, "update: expected an object of fields to change")
        queue = changes.get("queue")
        if isinstance(queue, str) and (err := self._queue_error(queue)):
            return _error(request, 400, f"queue: {err}")

        async def apply(job_id: int, who: str) -> None:
            job = self.port.job(job_id)
            new = changes.get("priority")
            if isinstance(new, int) and (
                problem := priority_problem(self.port.auth.acls, principal_of(request), job.user, job.spec.priority, new)
            ):
                raise _Forbidden(problem)
            await self.port.update(job_id, changes, who)

        return await self._change(request, apply)

    async def _change(self, request: web.Request, act: Callable[[int, str], Awaitable[None]]) -> web.Response:
        """Run one of hold/release/update/requeue for the request's job and principal; a refusal
        (409, or 400 for a bad field) changes nothing. Written before the answer."""
        job = self._job(request)
        if isinstance(job, web.Response):
            return job
        if (denied := self._denied(request, job, Action.MANAGE_JOBS, "change")) is not None:
            return denied
        try:
            await act(job.job_id, requester(request))
        except _Forbidden as exc:
            return _error(request, 403, str(exc))
        except SpecError as exc:
            return _error(request, 400, str(exc))
        except BatchError as exc:
            return _error(request, 409, str(exc))
        return _reply(request, job_summary(job))

    async def _events(self, request: web.Request) -> web.StreamResponse:
        """The job events as they happen, one JSON object per line (``?since=N``: first the
        held events numbered after N; ``?jobs=1,2``: only those jobs)."""
        since: int | None = None
        only: set[int] | None = None
        try:
            if "since" in request.query:
                since = int(request.query["since"])
            if request.query.get("jobs"):
                only = {int(x) for x in request.query["jobs"].split(",") if x}
        except ValueError:
            return _error(request, 400, "since and jobs must be integers")
        resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        try:
            async for d in self.port.follow_events(since):
                if only is None or d.get("job_id") in only or d["kind"] == "heartbeat":
                    await resp.write(json.dumps(d).encode() + b"\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return resp

    async def _list(self, request: web.Request) -> web.Response:
        want = request.query.get("state")
        periodic = request.query.get("periodic", "") in ("1", "true")
        if want is not None and want.upper() not in JobState.__members__:
            return _error(request, 400, f"state: unknown job state {want!r} (one of {', '.join(JobState.__members__)})")
        user = request.query.get("user")
        jobs = [
            job_summary(j)
            for j in self.port.jobs.values()
            if (want is None or j.state.value == want.upper()) and (not periodic or j.periodic)
            and (user is None or (j.user or "") == user)
        ]
        if request.query.get("start", "") in ("1", "true"):
            starts = self.port.expected_starts()
            for d in jobs:
                if d["id"] in starts:
                    d["expected_start"] = starts[d["id"]]
        return _reply(request, {"jobs": jobs})

    async def _show(self, request: web.Request) -> web.Response:
        """The job with every task; ``?summary=1``: without tasks (O(1), for pollers);
        ``?task=I``: with task ``I`` only."""
        job = self._job(request)
        if isinstance(job, web.Response):
            return job
        if request.query.get("summary", "") in ("1", "true"):
            return _reply(request, job_summary(job))
        if "task" in request.query:
            try:
                index = int(request.query["task"])
            except ValueError:
                return _error(request, 400, "task must be an integer")
            if not 0 <= index < len(job.tasks):
                return _error(request, 404, f"job {job.job_id} has no task {index}")
            return _reply(request, job_detail(job, [job.tasks[index]]))
        detail = job_detail(job)
        if (service := await self.port.service_summary(job)) is not None:
            detail["service"] = service
        return _reply(request, detail)

    async def _results(self, request: web.Request) -> web.Response:
        """A service job's service tasks with their results, ``?offset=I&limit=N&state=S``
        (``next``: the offset of the next page, when there may be one)."""
        job = self._job(request)
        if isinstance(job, web.Response):
            return job
        if not job.spec.service:
            return _error(request, 400, f"job {job.job_id} is not a service job")
        if (denied := self._denied(request, job, Action.VIEW_JOB_LOGS, "read the results of")) is not None:
            return denied
        try:
            offset = int(request.query.get("offset", "0"))
            limit = int(request.query.get("limit", str(RESULTS_PAGE)))
        except ValueError:
            return _error(request, 400, "offset and limit must be integers")
        if offset < 0 or not 0 < limit <= 100 * RESULTS_PAGE:
            return _error(request, 400, f"offset must be >= 0 and limit within 1..{100 * RESULTS_PAGE}")
        state = request.query.get("state")
        if state is not None:
            state = state.upper()
            if state not in {s.value for s in ServiceTaskState}:
                return _error(request, 400, f"state: one of {', '.join(s.value for s in ServiceTaskState)}")
        return _reply(request, await self.port.service_results(job, offset, limit, state))

    async def _cancel(self, request: web.Request) -> web.Response:
        job = self._job(request)
        if isinstance(job, web.Response):
            return job
        if (denied := self._denied(request, job, Action.MANAGE_JOBS, "cancel")) is not None:
            return denied
        try:
            self.port.cancel(job.job_id, requester(request))
        except BatchError as exc:
            return _error(request, 409, str(exc))
        return _reply(request, job_summary(job))

    async def _kill_task(self, request: web.Request) -> web.Response:
        job = self._job(request)
        if isinstance(job, web.Response):
            return job
        if (denied := self._denied(request, job, Action.MANAGE_JOBS, "kill a task of")) is not None:
            return denied
        index = request.match_info["index"]
        task = job.tasks[int(index)] if index.isdigit() and int(index) < len(job.tasks) else None
        if task is None:
            return _error(request, 404, f"job {job.job_id} has no task {index}")
        cur = task.current
        if task.phase not in ACTIVE or cur is None:
            return _error(request, 409, f"task {index} of job {job.job_id} is not running ({task.phase.value})")
        self.port.kill_attempt(cur.task_id, cur.agent_id, "killed by the operator")
        return _reply(request, {"job": job.job_id, "task": task.index, "task_id": cur.task_id})

    async def _logs(self, request: web.Request) -> web.Response:
        job = self._job(request)
        if isinstance(job, web.Response):
            return job
        if (denied := self._denied(request, job, Action.VIEW_JOB_LOGS, "read the logs of")) is not None:
            return denied
        try:
            index = int(request.query.get("task", "0"))
            offset = int(request.query.get("offset", "0"))
            length = int(request.query.get("length", str(64 * 1024)))
        except ValueError:
            return _error(request, 400, "task, offset and length must be integers")
        stream = request.query.get("stream", "stdout")
        if stream not in ("stdout", "stderr"):
            return _error(request, 400, "stream must be stdout or stderr")
        if not 0 <= index < len(job.tasks):
            return _error(request, 404, f"job {job.job_id} has no task {index}")
        attempt = job.tasks[index].current
        if attempt is None or attempt.agent_id is None:
            return _error(request, 404, f"task {index} of job {job.job_id} has not started")
        head = {"task": index, "attempt": attempt.attempt, "stream": stream}

        async def from_kept(status: int, why: str) -> web.Response:
            """The sandbox (or its agent) is gone: the tail kept when the attempt ended, if any."""
            tail = await self.port.kept_tail(attempt.task_id, stream)
            if tail is None:
                return _error(request, status, why)
            at, data = logtail.read(tail, offset, length)
            window = {"from": tail.start, "to": tail.size, "note": logtail.note(stream, tail)}
            return _reply(request, {**head, "data": data.decode("utf-8", "replace"), "offset": at, "kept": window})

        got = await self.port.read_sandbox(attempt.agent_id, attempt.task_id, stream, offset, length)
        if got.data is not None:
            return _reply(request, {**head, **got.data})
        if not got.reached or got.status == 404:
            return await from_kept(got.status, got.error or f"agent {attempt.agent_id} is not reachable from here")
        return _error(request, got.status, got.error)

    def _job(self, request: web.Request) -> JobRecord | web.Response:
        try:
            return self.port.job(int(request.match_info["id"]))
        except (ValueError, BatchError):
            return _error(request, 404, f"no job {request.match_info['id']}")


def history_query(request: web.Request) -> AccountingQuery:
    """The filters ``/api/v1/history`` and ``/api/v1/accounting`` share (``ValueError`` naming a bad one)."""
    q = request.query

    def number(key: str) -> float | None:
        if key not in q:
            return None
        try:
            value = float(q[key])
        except ValueError:
            raise ValueError(f"{key}: expected Unix seconds, got {q[key]!r}") from None
        if value != value:
            raise ValueError(f"{key}: expected Unix seconds, got {q[key]!r}")
        return value

    try:
        limit = int(q.get("limit", "1000"))
    except ValueError:
        raise ValueError(f"limit: expected a whole number, got {q['limit']!r}") from None
    if not 1 <= limit <= 100_000:
        raise ValueError("limit: expected 1..100000")
    states = tuple(s.strip().upper() for s in q.get("state", "").split(",") if s.strip())
    return AccountingQuery(user=q.get("user"), queue=q.get("queue"), states=states, since=number("since"),
                           until=number("until"), limit=limit)


class _Forbidden(Exception):
    """A change the request's principal may not make (``403``, nothing changed)."""


def requester(request: web.Request) -> str:
    """Who makes ``request``: the authenticated principal when the service authenticates (the
    one ``frameworks.client.api_auth``'s middleware sets), else the user name the client
    sends in ``X-Agora-User`` (the CLI sends the local user; not verified), else "anonymous"."""
    principal = principal_of(request)
    if principal:
        return principal
    claimed = request.headers.get("X-Agora-User", "").strip()
    if claimed and len(claimed) <= 64 and claimed.isprintable():
        return claimed
    return "anonymous"


def jobs_from_list(raw: Any) -> list[JobSpec]:
    """The specs of a multi-job submission; ``after: [{"name": N, ...}]`` names an earlier job
    of the list, becoming ``job_id = -k`` (the k-th, 1-based) for ``BatchCore.submit_many``."""
    if not isinstance(raw, list) or not raw:
        raise SpecError("jobs: expected a non-empty list of jobs")
    names: dict[str, int] = {}
    specs = []
    for n, d in enumerate(raw):
        if not isinstance(d, dict):
            raise SpecError(f"jobs[{n}]: expected an object")
        after = []
        for i, dep in enumerate(d.get("after") or ()):
            if isinstance(dep, dict) and "name" in dep:
                k = names.get(dep["name"])
                if k is None:
                    raise SpecError(f"jobs[{n}].after[{i}]: no earlier job named {dep['name']!r} in the file")
                dep = {"job_id": -k, "kind": dep.get("kind", "success")}
            after.append(dep)
        try:
            spec = spec_from_dict({**d, "after": after})
        except SpecError as exc:
            raise SpecError(f"jobs[{n}].{exc}") from exc
        if spec.name in names:
            raise SpecError(f"jobs[{n}].name: {spec.name!r} is used by two jobs of the file")
        names[spec.name] = n + 1
        specs.append(spec)
    return specs


async def _read(request: web.Request) -> Any:
    try:
        return await read_body(request)
    except BodyError as exc:
        raise SpecError(str(exc)) from exc
