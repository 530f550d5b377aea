"""Mesos' master endpoints besides ``/state`` and ``/api/v1``, in Mesos' JSON shapes (from Mesos'
``master/http.cpp`` and ``master/readonly_handler.cpp``), all built from the same views as
``/state`` (``master.views.StateViews``) and, for the writes, run as the v1 operator call each
one is (the same ACLs, validation and core events as ``POST /api/v1``).

Reads (GET; ``?jsonp=`` as Mesos): ``/slaves`` (``?slave_id=``), ``/frameworks``
(``?framework_id=``), ``/tasks`` (``?limit=&offset=&order=asc|desc&framework_id=&task_id=``),
``/roles``, ``/flags``, ``/weights``, ``/quota``, each also under Mesos' ``/master/`` prefix.
Writes: ``POST /teardown`` (``frameworkId=``), ``POST /reserve`` and ``/unreserve``
(``slaveId=&resources=<JSON array>``), ``PUT /weights`` (a JSON array of ``WeightInfo``),
``POST /quota`` (a ``QuotaRequest``: ``role``, ``guarantee``), ``DELETE /quota/<role>``.
Maintenance (Mesos' maintenance primitives, ``master.maintenance``): ``GET``/``POST
/maintenance/schedule`` (a ``maintenance.Schedule``), ``GET /maintenance/status`` (a
``maintenance.ClusterStatus``), ``POST /machine/down`` and ``/machine/up`` (a JSON array of
``MachineID``), run as UPDATE_MAINTENANCE_SCHEDULE, GET_MAINTENANCE_STATUS, START_MAINTENANCE and
STOP_MAINTENANCE.
Files: ``/files/browse``, ``/files/read``, ``/files/download``, ``/files/debug`` serve the
master's own log as ``/master/log`` when it runs with ``--log-dir`` (404 otherwise, as Mesos).
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from aiohttp import web

from master.auth import principal_of
from master.http_api import BodyTooLarge, read_body, text
from master.views import StateViews
from protocol import codec, mesos
from protocol.acls import operator_problem
from protocol.codec import DecodeError

if TYPE_CHECKING:
    from master.ports import OperatorPort

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
LOG_PATH = "/master/log"
MAX_READ = 16 * 4096  # Mesos caps a /files/read at 16 pages


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def json_ok(body: Any, request: web.Request) -> web.Response:
    """200 with ``body`` as compact ASCII JSON, wrapped as ``cb(...)`` for ``?jsonp=cb``."""
    data = json.dumps(body, ensure_ascii=True, separators=(",", ":"))
    cb = request.query.get("jsonp")
    if cb and cb.replace("_", "").replace(".", "").isalnum():
        return web.Response(text=f"{cb}({data});", content_type="text/javascript")
    return web.Response(text=data, content_type="application/json")


def _form(body: bytes) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body (Mesos' ``query::decode``)."""
    try:
        parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except (UnicodeDecodeError, ValueError) as e:
        raise BadRequest(400, f"Unable to decode query string: {e}") from e
    return {k: v[-1] for k, v in parsed.items()}


def _int_query(request: web.Request, name: str, default: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as e:
        raise BadRequest(400, f"Failed to parse '{name}': '{raw}' is not a number") from e


def _file_info(path: str, st: os.stat_result) -> dict[str, Any]:
    import grp
    import pwd

    try:
        uid: str = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        uid = str(st.st_uid)
    try:
        gid: str = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        gid = str(st.st_gid)
    return {"path": path, "nlink": st.st_nlink, "size": st.st_size, "mtime": st.st_mtime,
            "mode": stat.filemode(st.st_mode), "uid": uid, "gid": gid}


class MesosEndpoints(StateViews):
    """The handlers (mixed into ``master.operator.OperatorApi``, which runs operator calls)."""

    svc: OperatorPort

    if TYPE_CHECKING:  # provided by OperatorApi / OperatorV1

        async def _operator_call(self, call: mesos.OperatorCall) -> mesos.OperatorResponse | None: ...
        def get_roles(self) -> mesos.GetRoles: ...
        def get_quota(self) -> mesos.GetQuota: ...
        def _framework_principal(self, fid: str) -> str | None: ...

    def mesos_routes(self) -> list[web.RouteDef]:
        out: list[web.RouteDef] = []
        for prefix in ("", "/master"):
            # libprocess serves an endpoint with a trailing slash too (tools ask for
            # '/master/frameworks/')
            for slash in ("", "/"):
                out += [
                    web.get(prefix + "/slaves" + slash, self._guard(self.slaves)),
                    web.get(prefix + "/frameworks" + slash, self._guard(self.frameworks)),
                    web.get(prefix + "/tasks" + slash, self._guard(self.tasks)),
                    web.get(prefix + "/roles" + slash, self._guard(self.roles)),
                    web.get(prefix + "/flags" + slash, self._guard(self.flags)),
                ]
            out += [
                web.route("*", prefix + "/maintenance/schedule", self._guard(self.maintenance_schedule)),
                web.route("*", prefix + "/maintenance/status", self._guard(self.maintenance_status)),
                web.route("*", prefix + "/machine/up", self._guard(self.machine_up)),
                web.route("*", prefix + "/machine/down", self._guard(self.machine_down)),
                web.route("*", prefix + "/weights", self._guard(self.weights)),
                web.route("*", prefix + "/quota", self._guard(self.quota)),
                web.route("*", prefix + "/quota/{role:.+}", self._guard(self.quota)),
                web.route("*", prefix + "/teardown", self._guard(self.teardown)),
                web.route("*", prefix + "/reserve", self._guard(self.reserve)),
                web.route("*", prefix + "/unreserve", self._guard(self.unreserve)),
            ]
        out += [
            web.get("/files/browse", self._guard(self.files_browse)),
            web.get("/files/read", self._guard(self.files_read)),
            web.get("/files/download", self._guard(self.files_download)),
            web.get("/files/debug", self._guard(self.files_debug)),
        ]
        return out

    def _guard(self, handler: Handler) -> Handler:
        async def guarded(request: web.Request) -> web.StreamResponse:
            if not self.svc.ready:
                return text(503, "Master is recovering")
            try:
                return await handler(request)
            except BadRequest as e:
                return text(e.status, e.message)

        guarded.__name__ = handler.__name__
        return guarded

    @staticmethod
    def _method(request: web.Request, *allowed: str) -> None:
        if request.method not in allowed:
            raise BadRequest(405, f"Expecting one of {{ {', '.join(allowed)} }}, but received '{request.method}'")

    async def _body(self, request: web.Request) -> bytes:
        try:
            return await read_body(request, self.svc.config.max_body_bytes, self.svc.config.read_timeout)
        except BodyTooLarge as e:
            raise BadRequest(413, str(e)) from e
        except TimeoutError as e:
            raise BadRequest(408, "Timed out reading the request body") from e

    async def _call(self, request: web.Request, call: mesos.OperatorCall) -> mesos.OperatorResponse | None:
        """Run ``call`` as ``POST /api/v1`` would: its ACLs (403), then the call (400/409)."""
        from master.operator_v1 import _Bad, _Conflict

        denied = operator_problem(self.svc.auth.acls, principal_of(request), call, self._framework_principal)
        if denied is not None:
            raise BadRequest(403, denied)
        try:
            return await self._operator_call(call)
        except _Conflict as e:
            raise BadRequest(409, str(e)) from e
        except _Bad as e:
            raise BadRequest(400, str(e)) from e

    # --- reads ----------------------------------------------------------------------------------

    async def slaves(self, request: web.Request) -> web.StreamResponse:
        return json_ok(self.slaves_json(request.query.get("slave_id"), full=True), request)

    async def frameworks(self, request: web.Request) -> web.StreamResponse:
        from master.auth import visible_state

        live, done = self.frameworks_json(request.query.get("framework_id"))
        shown = visible_state(self.svc, request, {"frameworks": live, "completed_frameworks": done})
        return json_ok({"frameworks": shown["frameworks"], "completed_frameworks": shown["completed_frameworks"],
                        "unregistered_frameworks": []}, request)

    async def tasks(self, request: web.Request) -> web.StreamResponse:
        from master.auth import task_filter
        from master.views import TASK_LIMIT

        limit = _int_query(request, "limit", TASK_LIMIT)
        offset = _int_query(request, "offset", 0)
        if limit < 0:  # Mesos reads it as an unsigned number: -1 (tools send it) is "all"
            limit = sys.maxsize
        if offset < 0:
            raise BadRequest(400, "'offset' must not be negative")
        ascending = request.query.get("order") == "asc"
        body = self.tasks_json(request.query.get("framework_id"), request.query.get("task_id"), limit, offset,
                               ascending, visible=task_filter(self.svc, request))
        return json_ok(body, request)

    # --- maintenance -------------------------------------------------------------------------------

    async def maintenance_schedule(self, request: web.Request) -> web.StreamResponse:
        """GET: the schedule (``{}`` when none); POST: replace it (an empty one cancels it)."""
        self._method(request, "GET", "POST")
        if request.method == "GET":
            return json_ok(codec.to_builtins(self.svc.state.maintenance_schedule()), request)
        body = await self._body(request)
        try:
            raw = codec.loads_json(body)
            if not isinstance(raw, dict):
                raise BadRequest(400, "Failed to convert JSON into Schedule protobuf: expected an object")
            schedule = codec.from_builtins(mesos.MaintenanceSchedule, raw)
        except (ValueError, DecodeError) as e:
            raise BadRequest(400, f"Failed to convert JSON into Schedule protobuf: {e}") from e
        await self._call(request, mesos.OperatorCall(
            type=mesos.OperatorCallType.UPDATE_MAINTENANCE_SCHEDULE,
            update_maintenance_schedule=mesos.UpdateMaintenanceSchedule(schedule=schedule),
        ))
        return web.Response(status=200)

    async def maintenance_status(self, request: web.Request) -> web.StreamResponse:
        self._method(request, "GET")
        return json_ok(codec.to_builtins(self.svc.state.maintenance_status()), request)

    async def _machines(self, request: web.Request) -> tuple[mesos.MachineID, ...]:
        self._method(request, "POST")
        body = await self._body(request)
        try:
            raw = codec.loads_json(body)
            if not isinstance(raw, list):
                raise BadRequest(400, "Failed to convert JSON into MachineID protobufs: expected an array")
            return tuple(codec.from_builtins(mesos.MachineID, m) for m in raw)
        except (ValueError, DecodeError) as e:
            raise BadRequest(400, f"Failed to convert JSON into MachineID protobufs: {e}") from e

    async def machine_down(self, request: web.Request) -> web.StreamResponse:
        """START_MAINTENANCE: these DRAINING machines go DOWN (their agents shut down)."""
        machines = await self._machines(request)
        await self._call(request, mesos.OperatorCall(
            type=mesos.OperatorCallType.START_MAINTENANCE, start_maintenance=mesos.StartMaintenance(machines)))
        return web.Response(status=200)

    async def machine_up(self, request: web.Request) -> web.StreamResponse:
        """STOP_MAINTENANCE: these DOWN machines come back UP (and out of the schedule)."""
        machines = await self._machines(request)
        await self._call(request, mesos.OperatorCall(
            type=mesos.OperatorCallType.STOP_MAINTENANCE, stop_maintenance=mesos.StopMaintenance(machines)))
        return web.Response(status=200)

    async def roles(self, request: web.Request) -> web.StreamResponse:
        return json_ok(self.roles_json(self.get_roles(), dict(self.svc.state.quotas)), request)

    async def flags(self, request: web.Request) -> web.StreamResponse:
        return json_ok({"flags": self.flags_json()}, request)

    # --- weights and quota ------------------------------------------------------------------------

    async def weights(self, request: web.Request) -> web.StreamResponse:
        self._method(request, "GET", "PUT")
        if request.method == "GET":
            infos = [{"weight": w, "role": r} for r, w in sorted(self.svc.state.weights.items())]
            return json_ok(infos, request)
        body = await self._body(request)
        try:
            raw = json.loads(body)
            if not isinstance(raw, list):
                raise BadRequest(400, "Failed to convert JSON into WeightInfo protobuf: expected an array")
            infos_t = tuple(codec.from_builtins(mesos.WeightInfo, wi) for wi in raw)
        except (ValueError, DecodeError) as e:
            raise BadRequest(400, f"Failed to convert JSON into WeightInfo protobuf: {e}") from e
        call = mesos.OperatorCall(type=mesos.OperatorCallType.UPDATE_WEIGHTS,
                                  update_weights=mesos.UpdateWeights(weight_infos=infos_t))
        await self._call(request, call)
        return web.Response(status=200)

    async def quota(self, request: web.Request) -> web.StreamResponse:
        self._method(request, "GET", "POST", "DELETE")
        role = request.match_info.get("role")
        if request.method == "GET":
            if role is not None:
                raise BadRequest(404, "Not found")
            return json_ok(codec.to_builtins(self.get_quota().status), request)
        if request.method == "DELETE":
            if not role:
                raise BadRequest(400, "Failed to parse request path: expecting 'quota/<role>'")
            q = self.svc.state.quotas.get(role)
            if q is None or (q[0].is_empty() and q[1] is None):
                raise BadRequest(400, f"Failed to remove quota: Role '{role}' has no quota set")
            await self._call(request, mesos.OperatorCall(
                type=mesos.OperatorCallType.REMOVE_QUOTA, remove_quota=mesos.RemoveQuota(role=role)))
            return web.Response(status=200)
        body = await self._body(request)
        try:
            req = json.loads(body)
            if not isinstance(req, dict) or not isinstance(req.get("role"), str):
                raise BadRequest(400, "Failed to validate set quota request: 'role' is required")
            guarantee = tuple(codec.from_builtins(mesos.Resource, r) for r in req.get("guarantee") or ())
        except (ValueError, DecodeError) as e:
            raise BadRequest(400, f"Failed to parse set quota request JSON: {e}") from e
        scalars: dict[str, mesos.Scalar] = {}
        for r in guarantee:
            if r.scalar is None:
                raise BadRequest(400, f"Invalid quota: '{r.name}' is not a scalar resource")
            scalars[r.name] = mesos.Scalar(scalars.get(r.name, mesos.Scalar(0.0)).value + r.scalar.value)
        config = mesos.QuotaConfig(role=req["role"], guarantees=scalars, limits=dict(scalars))
        await self._call(request, mesos.OperatorCall(
            type=mesos.OperatorCallType.UPDATE_QUOTA, update_quota=mesos.UpdateQuota(quota_configs=(config,))))
        return web.Response(status=200)

    # --- teardown and reservations --------------------------------------------------------------

    async def teardown(self, request: web.Request) -> web.StreamResponse:
        self._method(request, "POST")
        values = _form(await self._body(request))
        fid = values.get("frameworkId")
        if fid is None:
            raise BadRequest(400, "Missing 'frameworkId' query parameter in the request body")
        if fid not in self.svc.state.frameworks:
            raise BadRequest(400, "No framework found with specified ID")
        await self._call(request, mesos.OperatorCall(
            type=mesos.OperatorCallType.TEARDOWN, teardown=mesos.Teardown(framework_id=mesos.FrameworkID(fid))))
        return web.Response(status=200)

    async def reserve(self, request: web.Request) -> web.StreamResponse:
        return await self._reservation(request, reserve=True)

    async def unreserve(self, request: web.Request) -> web.StreamResponse:
        return await self._reservation(request, reserve=False)

    async def _reservation(self, request: web.Request, reserve: bool) -> web.StreamResponse:
        self._method(request, "POST")
        values = _form(await self._body(request))
        aid = values.get("slaveId")
        if aid is None:
            raise BadRequest(400, "Missing 'slaveId' query parameter in the request body")
        raw = values.get("resources")
        if raw is None:
            raise BadRequest(400, "Missing 'resources' query parameter in the request body")
        try:
            parsed = json.loads(raw)
            if not isinstance(parsed, list):
                raise ValueError("expected a JSON array")
            resources = tuple(codec.from_builtins(mesos.Resource, r) for r in parsed)
        except (ValueError, DecodeError) as e:
            raise BadRequest(400, f"Error in parsing 'resources' query parameter in the request body: {e}") from e
        ag = self.svc.state.agents.get(aid)
        from master.views import registered

        if ag is None or not registered(ag):
            raise BadRequest(400, "No agent found with specified ID")
        agent_id = mesos.AgentID(aid)
        if reserve:
            call = mesos.OperatorCall(type=mesos.OperatorCallType.RESERVE_RESOURCES,
                                      reserve_resources=mesos.ReserveResources(agent_id=agent_id, resources=resources))
        else:
            call = mesos.OperatorCall(type=mesos.OperatorCallType.UNRESERVE_RESOURCES,
                                      unreserve_resources=mesos.UnreserveResources(agent_id=agent_id, resources=resources))
        await self._call(request, call)
        return web.Response(status=202)

    # --- the master's files: its log ------------------------------------------------------------

    def _log_file(self, path: str | None) -> str:
        if not path:
            raise BadRequest(400, "Expecting 'path' in query parameters")
        if path.rstrip("/") != LOG_PATH:
            raise BadRequest(404, f"No file or directory found at path '{path}'")
        log_dir = self.svc.config.log_dir
        if not log_dir:
            raise BadRequest(404, f"No file or directory found at path '{path}' (the master runs without --log-dir)")
        return os.path.join(log_dir, LOG_FILE)

    async def files_browse(self, request: web.Request) -> web.StreamResponse:
        real = self._log_file(request.query.get("path"))
        try:
            st = await asyncio.to_thread(os.stat, real)
        except OSError as e:
            raise BadRequest(404, f"No file or directory found at path '{LOG_PATH}'") from e
        return json_ok([_file_info(LOG_PATH, st)], request)

    async def files_read(self, request: web.Request) -> web.StreamResponse:
        real = self._log_file(request.query.get("path"))
        offset = _int_query(request, "offset", 0)
        length = _int_query(request, "length", MAX_READ)
        if offset < -1 or length < 0:
            raise BadRequest(400, "Negative 'offset' or 'length'")
        try:
            data, at = await asyncio.to_thread(_read_part, real, offset, min(length, MAX_READ))
        except OSError as e:
            raise BadRequest(404, f"No file or directory found at path '{LOG_PATH}'") from e
        return json_ok({"data": data.decode("utf-8", "replace"), "offset": at}, request)

    async def files_download(self, request: web.Request) -> web.StreamResponse:
        real = self._log_file(request.query.get("path"))
        if not await asyncio.to_thread(os.path.isfile, real):
            raise BadRequest(404, f"No file or directory found at path '{LOG_PATH}'")
        return web.FileResponse(real, headers={"Content-Type": "application/octet-stream",
                                               "Content-Disposition": f'attachment; filename="{LOG_FILE}"'})

    async def files_debug(self, request: web.Request) -> web.StreamResponse:
        log_dir = self.svc.config.log_dir
        return json_ok({LOG_PATH: os.path.join(log_dir, LOG_FILE)} if log_dir else {}, request)


LOG_FILE = "agora-master.log"


def _read_part(path: str, offset: int, length: int) -> tuple[bytes, int]:
    """Up to ``length`` bytes of ``path`` from ``offset``; ``offset`` -1 or past the end: none,
    at the file's size (how log tailers find the end)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if offset == -1 or offset >= size:
            return b"", size
        f.seek(offset)
        return f.read(length), offset
