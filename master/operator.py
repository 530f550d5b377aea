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
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from master.events import AgentDrainRequested, QuotaUpdated, TeardownRequested, WeightUpdated
from master.http_api import VERSION, BodyTooLarge, media_type, read_body, text
from master.lifecycles import AgentPhase, FrameworkPhase
from master.records import AgentRec, FrameworkRec, TaskRec
from protocol import codec, mesos
from protocol.resources import ResourceError, Resources
from protocol.task_states import TaskState

if TYPE_CHECKING:
    from master.service import MasterService

EMPTY = Resources()
OT = mesos.OperatorCallType
RT = mesos.OperatorResponseType


def _legacy(r: Resources) -> dict[str, float | str]:
    return r.to_legacy_dict()


def _ti(t: float | None) -> mesos.TimeInfo | None:
    return None if t is None else mesos.TimeInfo(nanoseconds=int(t * 1e9))


class _Collector(Collector):
    def __init__(self, api: OperatorApi) -> None:
        self.api = api

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snap = self.api.snapshot() if self.api.svc.ready else {}
        for name, value in sorted(snap.items()):
            prom = "agora_" + name.replace("/", "_").replace("-", "_")
            yield GaugeMetricFamily(prom, f"Mesos metric {name}", value=float(value))


class OperatorApi:
    def __init__(self, service: MasterService) -> None:
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
        ]

    # --- views ------------------------------------------------------------------------------------

    def _offered_by_agent(self) -> dict[str, Resources]:
        out: dict[str, Resources] = {}
        assert self.svc.allocator is not None
        for o in self.svc.allocator.outstanding_offers():
            out[o.agent_id] = out.get(o.agent_id, EMPTY) + o.resources
        return out

    def _offered_by_framework(self) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        assert self.svc.allocator is not None
        for o in self.svc.allocator.outstanding_offers():
            out.setdefault(o.framework_id, []).append(o)
        return out

    def _task_json(self, t: TaskRec) -> dict[str, Any]:
        return {
            "id": t.task_id,
            "name": t.name,
            "framework_id": t.framework_id,
            "executor_id": t.executor_id or "",
            "slave_id": t.agent_id,
            "state": t.state.value,
            "resources": _legacy(t.resources),
            "role": t.role,
            "statuses": [
                {"state": s.state.value, "timestamp": s.timestamp or 0.0} for s in t.statuses[-10:]
            ],
            "labels": [],
        }

    def _framework_json(self, fw: FrameworkRec, offers: list[Any]) -> dict[str, Any]:
        used = Resources.sum(t.resources for t in fw.tasks.values() if t.state is not TaskState.TASK_UNREACHABLE)
        offered = Resources.sum(o.resources for o in offers)
        info = fw.info
        return {
            "id": fw.framework_id,
            "name": info.name,
            "pid": None,
            "user": info.user,
            "hostname": info.hostname or "",
            "webui_url": info.webui_url or "",
            "principal": fw.principal,
            "role": fw.roles[0] if fw.roles else "*",
            "roles": list(fw.roles),
            "capabilities": sorted(fw.capabilities),
            "active": fw.phase is FrameworkPhase.SUBSCRIBED,
            "connected": fw.connected,
            "recovered": fw.phase is FrameworkPhase.RECOVERED,
            "failover_timeout": fw.failover_timeout,
            "checkpoint": bool(info.checkpoint),
            "registered_time": fw.registered_time,
            "reregistered_time": fw.reregistered_time,
            "unregistered_time": fw.unregistered_time or 0.0,
            "resources": _legacy(used),
            "used_resources": _legacy(used),
            "offered_resources": _legacy(offered),
            "tasks": [self._task_json(t) for t in fw.tasks.values() if t.state is not TaskState.TASK_UNREACHABLE],
            "unreachable_tasks": [self._task_json(t) for t in fw.tasks.values() if t.state is TaskState.TASK_UNREACHABLE],
            "completed_tasks": [self._task_json(t) for t in fw.completed.values()],
            "offers": [
                {
                    "id": o.offer_id,
                    "framework_id": o.framework_id,
                    "slave_id": o.agent_id,
                    "resources": _legacy(o.resources),
                    "allocation_info": {"role": o.role},
                }
                for o in offers
            ],
            "executors": [{"executor_id": eid, "slave_id": aid} for (aid, eid) in fw.executors],
            "labels": [],
        }

    def _agent_json(self, ag: AgentRec, offered: Resources) -> dict[str, Any]:
        used = Resources.sum(
            self.svc.state.frameworks[f].tasks[t].resources
            for (f, t) in ag.tasks
            if f in self.svc.state.frameworks and t in self.svc.state.frameworks[f].tasks
        )
        total = ag.total
        reserved: dict[str, Any] = {}
        for role in sorted(total.roles() - {"*"}):
            reserved[role] = _legacy(total.reserved(role))
        return {
            "id": ag.agent_id,
            "hostname": ag.hostname,
            "port": ag.port,
            "pid": f"slave(1)@{ag.hostname}:{ag.port}",
            "attributes": {a.name: (a.scalar.value if a.scalar else a.text.value if a.text else "") for a in ag.attributes},
            "registered_time": ag.registered_time,
            "reregistered_time": ag.reregistered_time,
            "resources": _legacy(total),
            "used_resources": _legacy(used),
            "offered_resources": _legacy(offered),
            "reserved_resources": reserved,
            "unreserved_resources": _legacy(total.unreserved()),
            "revocable_resources": _legacy(ag.slack),
            "active": ag.reachable and ag.conn_id is not None,
            "deactivated": not ag.reachable,
            "version": ag.version,
            "capabilities": list(ag.capabilities),
            "phase": ag.phase.value,
        }

    def state_dict(self) -> dict[str, Any]:
        svc = self.svc
        st = svc.state
        offered_agent = self._offered_by_agent()
        offered_fw = self._offered_by_framework()
        mi = st.master_info
        flags = {
            k: str(v) for k, v in (
                ("heartbeat_interval", svc.config.heartbeat_interval),
                ("agent_ping_timeout", svc.config.ping_timeout),
                ("agent_reregister_timeout", svc.config.agent_reregister_timeout),
                ("work_dir", svc.config.work_dir),
                ("port", svc.port),
            )
        }
        return {
            "version": VERSION,
            "git_sha": "",
            "git_branch": "",
            "git_tag": "",
            "build_date": "",
            "build_time": 0.0,
            "build_user": "",
            "start_time": svc.start_time,
            "elected_time": svc.start_time,
            "id": svc.master_id,
            "pid": mi.pid,
            "hostname": mi.hostname,
            "capabilities": [],
            "activated_slaves": sum(1 for a in st.agents.values() if a.reachable),
            "deactivated_slaves": sum(1 for a in st.agents.values() if not a.reachable),
            "unreachable_slaves": sum(1 for a in st.agents.values() if a.phase is AgentPhase.UNREACHABLE),
            "leader": mi.pid,
            "leader_info": codec.to_builtins(mi),
            "cluster": "",
            "log_dir": "",
            "external_log_file": "",
            "flags": flags,
            "slaves": [
                self._agent_json(a, offered_agent.get(a.agent_id, EMPTY))
                for a in st.agents.values()
                if a.phase is not AgentPhase.RECOVERED
            ],
            "recovered_slaves": [
                {"id": a.agent_id, "hostname": a.hostname, "port": a.port}
                for a in st.agents.values()
                if a.phase is AgentPhase.RECOVERED
            ],
            "frameworks": [self._framework_json(f, offered_fw.get(f.framework_id, [])) for f in st.frameworks.values()],
            "completed_frameworks": [self._framework_json(f, []) for f in st.completed_frameworks],
            "orphan_tasks": [],
            "unregistered_frameworks": [],
            "epoch": svc.epoch,
        }

    def snapshot(self) -> dict[str, float]:
        svc = self.svc
        st = svc.state
        assert svc.allocator is not None
        reachable = [a for a in st.agents.values() if a.reachable]
        total = Resources.sum(a.total for a in reachable)
        slack = Resources.sum(a.slack for a in reachable)
        used_all = st.used_resources()
        used = used_all.non_revocable()
        used_rev = used_all.revocable().flatten()
        out: dict[str, float] = {
            "master/elected": 1.0,
            "master/uptime_secs": max(0.0, svc.clock.now() - svc.start_time),
        }
        for name in ("cpus", "mem", "disk", "gpus"):
            tot, u = total.flatten().scalar(name), used.flatten().scalar(name)
            out[f"master/{name}_total"] = tot
            out[f"master/{name}_used"] = u
            out[f"master/{name}_percent"] = (u / tot) if tot else 0.0
            rt, ru = slack.scalar(name), used_rev.scalar(name)
            out[f"master/{name}_revocable_total"] = rt
            out[f"master/{name}_revocable_used"] = ru
            out[f"master/{name}_revocable_percent"] = (ru / rt) if rt else 0.0
        agents = st.agents.values()
        out["master/slaves_active"] = float(sum(1 for a in agents if a.reachable))
        out["master/slaves_connected"] = float(sum(1 for a in agents if a.conn_id is not None))
        out["master/slaves_disconnected"] = float(sum(1 for a in agents if a.reachable and a.conn_id is None))
        out["master/slaves_inactive"] = float(sum(1 for a in agents if not a.reachable))
        out["master/slaves_unreachable"] = float(sum(1 for a in agents if a.phase is AgentPhase.UNREACHABLE))
        fws = st.frameworks.values()
        out["master/frameworks_active"] = float(sum(1 for f in fws if f.phase is FrameworkPhase.SUBSCRIBED))
        out["master/frameworks_connected"] = float(sum(1 for f in fws if f.connected))
        out["master/frameworks_disconnected"] = float(sum(1 for f in fws if not f.connected))
        out["master/frameworks_inactive"] = float(sum(1 for f in fws if f.phase is not FrameworkPhase.SUBSCRIBED))
        out["master/outstanding_offers"] = float(len(svc.allocator.outstanding_offers()))
        for state, n in st.task_counts().items():
            out["master/tasks_" + state.value.removeprefix("TASK_").lower()] = float(n)
        c = st.counters
        out["master/slave_registrations"] = float(c["slave_registrations"])
        out["master/slave_reregistrations"] = float(c["slave_reregistrations"])
        out["master/slave_removals"] = float(c["slave_removals"])
        out["master/dropped_messages"] = float(c["dropped_messages"])
        out["master/valid_status_updates"] = float(c["valid_status_updates"])
        out["master/invalid_status_updates"] = float(c["invalid_status_updates"])
        out["master/invalid_messages_total"] = float(svc.counters.get("invalid_messages_total", 0))
        out["master/rate_limited_total"] = float(svc.counters.get("rate_limited_total", 0))
        out["master/errors_total"] = float(svc.counters.get("errors_total", 0))
        for name, n in st.calls.items():
            out[f"master/messages_{name.lower()}"] = float(n)
        out["master/event_queue_messages"] = 0.0
        out["master/event_queue_dispatches"] = 0.0
        out["allocator/event_queue_dispatches"] = 0.0
        if svc.registry is not None:
            out["registrar/state_store_ops"] = float(svc.registry.writes)
            out["registrar/transactions"] = float(svc.registry.transactions)
        out["system/cpus_total"] = float(os.cpu_count() or 1)
        try:
            load = os.getloadavg()
            out["system/load_1min"], out["system/load_5min"], out["system/load_15min"] = load
        except OSError:
            pass
        return out

    # --- handlers ---------------------------------------------------------------------------------

    def _not_ready(self) -> web.Response | None:
        return None if self.svc.ready else text(503, "Master is recovering")

    async def state(self, request: web.Request) -> web.Response:
        if (r := self._not_ready()) is not None:
            return r
        body = json.dumps(self.state_dict(), ensure_ascii=True, separators=(",", ":"))
        cb = request.query.get("jsonp")
        if cb and cb.replace("_", "").replace(".", "").isalnum():
            return web.Response(text=f"{cb}({body});", content_type="text/javascript")
        return web.Response(text=body, content_type="application/json")

    async def state_summary(self, request: web.Request) -> web.Response:
        if (r := self._not_ready()) is not None:
            return r
        full = self.state_dict()
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
        assert self.svc.allocator is not None
        now = self.svc.clock.now()
        out = [
            {
                "id": o.offer_id,
                "framework_id": o.framework_id,
                "agent_id": o.agent_id,
                "hostname": o.hostname,
                "role": o.role,
                "resources": _legacy(o.resources.non_revocable()),
                "revocable_resources": _legacy(o.revocable.flatten()) if o.revocable else {},
                "reusable": o.reusable,
                "age_secs": round(max(0.0, now - o.created), 3),
                "idle_secs": round(max(0.0, now - o.idle_since), 3) if o.idle_since is not None else None,
            }
            for o in self.svc.allocator.outstanding_offers()
        ]
        return web.json_response({"offers": out, "time": time.time()})

    # --- operator API v1 --------------------------------------------------------------------------

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
        try:
            call = codec.decode(mesos.OperatorCall, body, ctype)
        except codec.DecodeError as e:
            svc.metrics_inc("invalid_messages_total")
            return text(400, f"Failed to convert into Call: {e}")
        except ValueError as e:
            svc.metrics_inc("invalid_messages_total")
            return text(400, f"Failed to parse body: {e}")
        problem = mesos.validate_operator_call(call)
        if problem:
            return text(400, f"Failed to validate master::Call: {problem}")
        accept = media_type(request.headers.get("Accept")) or ctype
        out_type = codec.MSGPACK if accept == codec.MSGPACK else codec.JSON
        try:
            resp = await self._operator_call(call)
        except _Bad as e:
            return text(400, str(e))
        if resp is None:
            return web.Response(status=200)
        return web.Response(body=codec.encode(resp, out_type), content_type=out_type)

    async def _operator_call(self, call: mesos.OperatorCall) -> mesos.OperatorResponse | None:
        svc = self.svc
        t = call.type
        if t is OT.GET_HEALTH:
            return mesos.OperatorResponse(type=RT.GET_HEALTH, get_health=mesos.GetHealth(healthy=True))
        if t is OT.GET_VERSION:
            return mesos.OperatorResponse(
                type=RT.GET_VERSION, get_version=mesos.GetVersion(mesos.VersionInfo(version=VERSION))
            )
        if t is OT.GET_FLAGS:
            flags = tuple(mesos.Flag(name=k, value=v) for k, v in self.state_dict()["flags"].items())
            return mesos.OperatorResponse(type=RT.GET_FLAGS, get_flags=mesos.GetFlags(flags))
        if t is OT.GET_MASTER:
            return mesos.OperatorResponse(
                type=RT.GET_MASTER,
                get_master=mesos.GetMaster(svc.state.master_info, svc.start_time, svc.start_time),
            )
        if t is OT.GET_METRICS:
            metrics = tuple(mesos.Metric(name=k, value=v) for k, v in sorted(self.snapshot().items()))
            return mesos.OperatorResponse(type=RT.GET_METRICS, get_metrics=mesos.GetMetrics(metrics))
        if t is OT.GET_AGENTS:
            return mesos.OperatorResponse(type=RT.GET_AGENTS, get_agents=self._get_agents())
        if t is OT.GET_FRAMEWORKS:
            return mesos.OperatorResponse(type=RT.GET_FRAMEWORKS, get_frameworks=self._get_frameworks())
        if t is OT.GET_TASKS:
            return mesos.OperatorResponse(type=RT.GET_TASKS, get_tasks=self._get_tasks())
        if t is OT.GET_EXECUTORS:
            return mesos.OperatorResponse(type=RT.GET_EXECUTORS, get_executors=self._get_executors())
        if t is OT.GET_STATE:
            return mesos.OperatorResponse(
                type=RT.GET_STATE,
                get_state=mesos.GetState(
                    get_tasks=self._get_tasks(),
                    get_executors=self._get_executors(),
                    get_frameworks=self._get_frameworks(),
                    get_agents=self._get_agents(),
                ),
            )
        if t is OT.GET_ROLES:
            return mesos.OperatorResponse(type=RT.GET_ROLES, get_roles=self._get_roles())
        if t is OT.GET_WEIGHTS:
            infos = tuple(mesos.WeightInfo(weight=w, role=r) for r, w in sorted(svc.state.weights.items()))
            return mesos.OperatorResponse(type=RT.GET_WEIGHTS, get_weights=mesos.GetWeights(infos))
        if t is OT.UPDATE_WEIGHTS:
            assert call.update_weights is not None
            for wi in call.update_weights.weight_infos:
                if not wi.role or not (wi.weight > 0) or wi.weight > 1e6:
                    raise _Bad(f"invalid weight {wi.weight!r} for role {wi.role!r}")
            for wi in call.update_weights.weight_infos:
                await svc.dispatch(WeightUpdated(role=wi.role or "*", weight=float(wi.weight)))
            return None
        if t is OT.GET_QUOTA:
            return mesos.OperatorResponse(type=RT.GET_QUOTA, get_quota=self._get_quota())
        if t in (OT.UPDATE_QUOTA, OT.SET_QUOTA):
            if call.update_quota is None:
                raise _Bad("Expecting 'update_quota' to be present")
            for qc in call.update_quota.quota_configs:
                guarantee, limit = self._quota_resources(qc)
                await svc.dispatch(QuotaUpdated(role=qc.role, guarantee=guarantee, limit=limit))
            return None
        if t is OT.REMOVE_QUOTA:
            assert call.remove_quota is not None
            await svc.dispatch(QuotaUpdated(role=call.remove_quota.role, guarantee=EMPTY, limit=None))
            return None
        if t in (OT.DRAIN_AGENT, OT.DEACTIVATE_AGENT, OT.REACTIVATE_AGENT):
            body = call.drain_agent or call.deactivate_agent or call.reactivate_agent
            assert body is not None
            aid = body.agent_id.value
            if aid not in svc.state.agents:
                raise _Bad(f"Unknown agent {aid}")
            await svc.dispatch(AgentDrainRequested(agent_id=aid, draining=t is not OT.REACTIVATE_AGENT))
            return None
        if t is OT.TEARDOWN:
            assert call.teardown is not None
            fid = call.teardown.framework_id.value
            if fid not in svc.state.frameworks:
                raise _Bad(f"Unknown framework {fid}")
            await svc.dispatch(TeardownRequested(framework_id=fid))
            return None
        raise _Bad(f"Operator call {t.value if t else None} is not supported by this master")

    @staticmethod
    def _quota_resources(qc: mesos.QuotaConfig) -> tuple[Resources, Resources | None]:
        from protocol.ids import role_error

        if qc.role == "*" or role_error(qc.role):
            raise _Bad(f"invalid quota role {qc.role!r}")
        try:
            g = Resources.sum(Resources.scalar_entry(k, v.value) for k, v in qc.guarantees.items() if v.value > 0)
            lim = (
                Resources.sum(Resources.scalar_entry(k, v.value) for k, v in qc.limits.items())
                if qc.limits
                else None
            )
        except (ResourceError, ValueError, TypeError) as e:
            raise _Bad(f"invalid quota for role {qc.role!r}: {e}") from e
        if lim is not None and not lim.contains(g):
            raise _Bad(f"quota guarantee exceeds its limit for role {qc.role!r}")
        return g, lim

    def _get_quota(self) -> mesos.GetQuota:
        configs = []
        infos = []
        for role, (g, lim) in sorted(self.svc.state.quotas.items()):
            if g.is_empty() and lim is None:
                continue
            configs.append(
                mesos.QuotaConfig(
                    role=role,
                    guarantees={k: mesos.Scalar(v) for k, v in g.scalars().items()},
                    limits={k: mesos.Scalar(v) for k, v in (lim.scalars() if lim else {}).items()},
                )
            )
            infos.append(mesos.QuotaInfo(role=role, guarantee=g.to_mesos()))
        return mesos.GetQuota(status=mesos.QuotaStatus(infos=tuple(infos), configs=tuple(configs)))

    def _get_roles(self) -> mesos.GetRoles:
        st = self.svc.state
        roles: dict[str, list[str]] = {}
        for fw in st.frameworks.values():
            for r in fw.roles:
                roles.setdefault(r, []).append(fw.framework_id)
        for r in st.weights:
            roles.setdefault(r, [])
        for r in st.quotas:
            roles.setdefault(r, [])
        out = []
        for name in sorted(roles):
            allocated = Resources.sum(
                t.resources for fw in st.frameworks.values() for t in fw.tasks.values() if t.role == name
            )
            out.append(
                mesos.Role(
                    name=name,
                    weight=st.weights.get(name, 1.0),
                    frameworks=tuple(mesos.FrameworkID(f) for f in roles[name]),
                    allocated=allocated.to_mesos(),
                    resources=allocated.to_mesos(),
                )
            )
        return mesos.GetRoles(tuple(out))

    def _agent_record(self, ag: AgentRec, offered: Resources) -> mesos.AgentRecord:
        used = Resources.sum(
            self.svc.state.frameworks[f].tasks[t].resources
            for (f, t) in ag.tasks
            if f in self.svc.state.frameworks and t in self.svc.state.frameworks[f].tasks
        )
        return mesos.AgentRecord(
            agent_info=mesos.AgentInfo(
                hostname=ag.hostname,
                port=ag.port,
                resources=ag.total.to_mesos(),
                attributes=ag.attributes,
                id=mesos.AgentID(ag.agent_id),
            ),
            active=ag.reachable and ag.conn_id is not None,
            version=ag.version or "0.1.0",
            deactivated=not ag.reachable,
            pid=f"slave(1)@{ag.hostname}:{ag.port}",
            registered_time=_ti(ag.registered_time),
            reregistered_time=_ti(ag.reregistered_time),
            total_resources=ag.total.to_mesos(),
            allocated_resources=used.to_mesos(),
            offered_resources=offered.to_mesos(),
        )

    def _get_agents(self) -> mesos.GetAgents:
        st = self.svc.state
        offered = self._offered_by_agent()
        return mesos.GetAgents(
            agents=tuple(
                self._agent_record(a, offered.get(a.agent_id, EMPTY))
                for a in st.agents.values()
                if a.phase is not AgentPhase.RECOVERED
            ),
            recovered_agents=tuple(
                mesos.AgentInfo(hostname=a.hostname, port=a.port, id=mesos.AgentID(a.agent_id))
                for a in st.agents.values()
                if a.phase is AgentPhase.RECOVERED
            ),
        )

    def _framework_record(self, fw: FrameworkRec) -> mesos.FrameworkRecord:
        used = Resources.sum(t.resources for t in fw.tasks.values())
        return mesos.FrameworkRecord(
            framework_info=fw.info,
            active=fw.phase is FrameworkPhase.SUBSCRIBED,
            connected=fw.connected,
            recovered=fw.phase is FrameworkPhase.RECOVERED,
            registered_time=_ti(fw.registered_time),
            reregistered_time=_ti(fw.reregistered_time),
            unregistered_time=_ti(fw.unregistered_time),
            allocated_resources=used.to_mesos(),
        )

    def _get_frameworks(self) -> mesos.GetFrameworks:
        st = self.svc.state
        return mesos.GetFrameworks(
            frameworks=tuple(self._framework_record(f) for f in st.frameworks.values()),
            completed_frameworks=tuple(self._framework_record(f) for f in st.completed_frameworks),
        )

    @staticmethod
    def _task(t: TaskRec) -> mesos.Task:
        return mesos.Task(
            name=t.name,
            task_id=mesos.TaskID(t.task_id),
            framework_id=mesos.FrameworkID(t.framework_id),
            agent_id=mesos.AgentID(t.agent_id),
            state=t.state,
            executor_id=mesos.ExecutorID(t.executor_id) if t.executor_id else None,
            resources=t.resources.to_mesos(),
            statuses=tuple(t.statuses[-10:]),
            status_update_state=t.status_update_state,
            status_update_uuid=t.status_update_uuid,
        )

    def _get_tasks(self) -> mesos.GetTasks:
        st = self.svc.state
        live = [t for f in st.frameworks.values() for t in f.tasks.values()]
        done = [t for f in (*st.frameworks.values(), *st.completed_frameworks) for t in f.completed.values()]
        return mesos.GetTasks(
            tasks=tuple(self._task(t) for t in live if t.state is not TaskState.TASK_UNREACHABLE),
            unreachable_tasks=tuple(self._task(t) for t in live if t.state is TaskState.TASK_UNREACHABLE),
            completed_tasks=tuple(self._task(t) for t in done),
        )

    def _get_executors(self) -> mesos.GetExecutors:
        st = self.svc.state
        return mesos.GetExecutors(
            executors=tuple(
                mesos.ExecutorRecord(executor_info=info, agent_id=mesos.AgentID(aid))
                for f in st.frameworks.values()
                for (aid, _), info in f.executors.items()
            )
        )


class _Bad(Exception):
    pass
