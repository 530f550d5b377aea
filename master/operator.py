"""Operator and observability endpoints of the master.

* ``GET /state``, ``/master/state`` (also ``/state.json``): Mesos keys, legacy flattened
  resources, the old names ``slaves``/``slave_id``.
* ``GET /state-summary``, ``GET /metrics/snapshot`` (Mesos metric names), ``GET /metrics``
  (Prometheus text, one ``CollectorRegistry`` per master, names prefixed ``agora_``).
* ``POST /api/v1`` and ``/api/v1/operator``: operator calls (JSON or msgpack).
* ``GET /api/v1/offers``: Agora extra, the outstanding offers with holder and age (for the CLI).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from master.auth import forbidden, principal_of, visible_response, visible_state
from master.http_api import BodyTooLarge, media_type, read_body, text
from master.mesos_endpoints import MesosEndpoints
from master.operator_v1 import OperatorV1, _Bad, _Conflict, _NotFound
from master.views import legacy_resources
from protocol import codec, httputil, mesos
from protocol.acls import operator_problem

if TYPE_CHECKING:
    from master.ports import OperatorPort


class _Collector(Collector):
    def __init__(self, api: OperatorApi) -> None:
        self.api = api

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        snap = self.api.snapshot() if self.api.svc.ready else {}
        for name, value in sorted(snap.items()):
            prom = "agora_" + name.replace("/", "_").replace("-", "_")
            yield GaugeMetricFamily(prom, f"Mesos metric {name}", value=float(value))
        failures = CounterMetricFamily(
            "agora_auth_failures", "Requests refused for failed authentication, by kind of peer", labels=["kind"]
        )
        for kind, n in sorted(self.api.svc.auth_failures.items()):
            failures.add_metric([kind], float(n))
        yield failures


class OperatorApi(OperatorV1, MesosEndpoints):
    """The operator HTTP handlers (views in ``master.views``, v1 calls in ``master.operator_v1``)."""

    def __init__(self, service: OperatorPort) -> None:
        self.svc = service
        self.prometheus = CollectorRegistry(auto_describe=False)
        self.prometheus.register(_Collector(self))

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/state", self.state),
            web.get("/master/state", self.state),
            web.get("/state.json", self.state),
            web.get("/master/state.json", self.state),
            web.get("/state-summary", self.state_summary),
            web.get("/master/state-summary", self.state_summary),
            web.get("/metrics/snapshot", self.metrics_snapshot),
            web.get("/metrics", self.metrics),
            web.get("/api/v1/offers", self.offers),
            web.route("*", "/api/v1", self.api),
            web.route("*", "/api/v1/operator", self.api),
            *self.mesos_routes(),
        ]

    # --- views ------------------------------------------------------------------------------------

    def _not_ready(self) -> web.Response | None:
        return None if self.svc.ready else text(503, "Master is recovering")

    async def state(self, request: web.Request) -> web.Response:
        if (r := self._not_ready()) is not None:
            return r
        body = json.dumps(visible_state(self.svc, request, self.state_dict()), ensure_ascii=True, separators=(",", ":"))
        cb = request.query.get("jsonp")
        if cb and cb.replace("_", "").replace(".", "").isalnum():
            return web.Response(text=f"{cb}({body});", content_type="text/javascript")
        return web.Response(text=body, content_type="application/json")

    async def state_summary(self, request: web.Request) -> web.Response:
        if (r := self._not_ready()) is not None:
            return r
        full = visible_state(self.svc, request, self.state_dict())
        summary = {
            "hostname": full["hostname"],
            "cluster": "",
            "slaves": [{k: v for k, v in a.items() if k != "attributes"} for a in full["slaves"]],
            "frameworks": [
                {k: v for k, v in f.items() if k not in ("tasks", "completed_tasks", "unreachable_tasks", "offers")}
                | {"TASK_RUNNING": sum(1 for t in f["tasks"] if t["state"] == "TASK_RUNNING")}
                for f in full["frameworks"]
            ],
        }
        return web.json_response(summary)

    async def metrics_snapshot(self, request: web.Request) -> web.Response:
        if (r := self._not_ready()) is not None:
            return r
        return web.json_response(self.snapshot())

    async def metrics(self, request: web.Request) -> web.Response:
        data = generate_latest(self.prometheus)
        return web.Response(body=data, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    async def offers(self, request: web.Request) -> web.Response:
        if (r := self._not_ready()) is not None:
            return r
        return web.json_response({"offers": self.offers_list(), "time": time.time()})

    def offers_list(self) -> list[dict[str, Any]]:
        """The outstanding offers as ``GET /api/v1/offers`` serves them (and the web UI shows):
        holder, agent, role, legacy flattened resources, ages in seconds."""
        assert self.svc.allocator is not None
        now = self.svc.clock.now()
        return [
            {
                "id": o.offer_id,
                "framework_id": o.framework_id,
                "agent_id": o.agent_id,
                "hostname": o.hostname,
                "role": o.role,
                "resources": legacy_resources(o.resources.non_revocable()),
                "revocable_resources": legacy_resources(o.revocable.flatten()) if o.revocable else {},
                "reusable": o.reusable,
                "age_secs": round(max(0.0, now - o.created), 3),
                "idle_secs": round(max(0.0, now - o.idle_since), 3) if o.idle_since is not None else None,
            }
            for o in self.svc.allocator.outstanding_offers()
        ]

    # --- operator API v1 --------------------------------------------------------------------------

    def _framework_principal(self, fid: str) -> str | None:
        fw = self.svc.state.frameworks.get(fid)
        return fw.principal if fw is not None else None

    async def api(self, request: web.Request) -> web.StreamResponse:
        svc = self.svc
        if (r := self._not_ready()) is not None:
            return r
        if request.method != "POST":
            return text(405, f"Expecting 'POST', received '{request.method}'", Allow="POST")
        ctype = media_type(request.headers.get("Content-Type"))
        if ctype is None:
            return text(400, "Expecting 'Content-Type' to be present")
        if ctype not in (codec.JSON, codec.MSGPACK):
            return text(415, f"Unsupported media type '{ctype}'")
        try:
            body = await read_body(request, svc.config.max_body_bytes, svc.config.read_timeout)
        except BodyTooLarge as e:
            return text(413, str(e), Connection="close")
        except TimeoutError:
            return text(408, "Timed out reading the request body")
        call, err = httputil.decode_body(mesos.OperatorCall, body, ctype, "master::Call")
        if call is None:
            svc.metrics_inc("invalid_messages_total")
            return text(400, err)
        problem = mesos.validate_operator_call(call)
        if problem:
            return text(400, f"Failed to validate master::Call: {problem}")
        denied = operator_problem(svc.auth.acls, principal_of(request), call, self._framework_principal)
        if denied is not None:
            return forbidden(denied)
        accept = media_type(request.headers.get("Accept")) or ctype
        out_type = codec.MSGPACK if accept == codec.MSGPACK else codec.JSON
        if call.type is mesos.OperatorCallType.SUBSCRIBE:
            return await svc.operator_streams.subscribe(request, out_type)
        try:
            resp = await self._operator_call(call)
        except _Conflict as e:
            return text(409, str(e))
        except _NotFound as e:
            return text(404, str(e))
        except _Bad as e:
            return text(400, str(e))
        if resp is None:
            return web.Response(status=200)
        resp = visible_response(svc, request, resp)  # view_frameworks / view_tasks
        return web.Response(body=codec.encode(resp, out_type), content_type=out_type)
