"""JSON views of the master for the operator endpoints: ``/state`` (Mesos keys, legacy flattened
resources, the old names ``slaves``/``slave_id``) and the ``/metrics/snapshot`` numbers (Mesos
names)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from master.http_api import VERSION
from master.lifecycles import AgentPhase, FrameworkPhase
from master.records import AgentRec, FrameworkRec, TaskRec
from protocol import codec
from protocol.mesos import TaskStatus
from protocol.resources import Resources
from protocol.task_states import TaskState

if TYPE_CHECKING:
    from master.service import MasterService

EMPTY = Resources()


def legacy_resources(r: Resources) -> dict[str, float | str]:
    """Resources as ``/state`` shows them: the legacy flattened dict (``{"cpus": 2.0, ...}``)."""
    return r.to_legacy_dict()


def _status_json(s: TaskStatus) -> dict[str, Any]:
    """A task status as ``/state`` lists it: Mesos' ``state``, ``timestamp`` and ``labels`` (the
    agent's ``exit_code``), plus the ``message`` and ``reason`` when the status has them."""
    out: dict[str, Any] = {"state": s.state.value, "timestamp": s.timestamp or 0.0}
    if s.message:
        out["message"] = s.message
    if s.reason is not None:
        out["reason"] = s.reason.value
    if s.labels is not None and s.labels.labels:
        out["labels"] = [{"key": lb.key, "value": lb.value} for lb in s.labels.labels]
    return out


class StateViews:
    """Builds the views from ``self.svc`` (the running ``MasterService``)."""

    svc: MasterService

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
        out = {
            "id": t.task_id,
            "name": t.name,
            "framework_id": t.framework_id,
            "executor_id": t.executor_id or "",
            "slave_id": t.agent_id,
            "state": t.state.value,
            "resources": legacy_resources(t.resources),
            "role": t.role,
            "statuses": [_status_json(s) for s in t.statuses[-10:]],
            "labels": [],
        }
        usage = t.current_usage()
        if usage is not None:
            out["usage"] = usage.to_json()
        return out

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
            "resources": legacy_resources(used),
            "used_resources": legacy_resources(used),
            "offered_resources": legacy_resources(offered),
            "tasks": [self._task_json(t) for t in fw.tasks.values() if t.state is not TaskState.TASK_UNREACHABLE],
            "unreachable_tasks": [self._task_json(t) for t in fw.tasks.values() if t.state is TaskState.TASK_UNREACHABLE],
            "completed_tasks": [self._task_json(t) for t in fw.completed.values()],
            "offers": [
                {
                    "id": o.offer_id,
                    "framework_id": o.framework_id,
                    "slave_id": o.agent_id,
                    "resources": legacy_resources(o.resources),
                    "allocation_info": {"role": o.role},
                }
                for o in offers
            ],
            "executors": [{"executor_id": eid, "slave_id": aid} for (aid, eid) in fw.executors],
            "labels": [],
            **self._offers_reason(fw, offers),
        }

    def _offers_reason(self, fw: FrameworkRec, offers: list[Any]) -> dict[str, str]:
        """``offers_reason``: why a connected framework holding no offers gets none (the
        allocator's explanation; e.g. GPU agents and no ``GPU_RESOURCES``)."""
        alloc = self.svc.allocator
        if offers or alloc is None or fw.phase is not FrameworkPhase.SUBSCRIBED:
            return {}
        return {"offers_reason": alloc.why_not_offered(fw.framework_id)}

    def _agent_json(self, ag: AgentRec, offered: Resources) -> dict[str, Any]:
        used = Resources.sum(
            self.svc.state.frameworks[f].tasks[t].resources
            for (f, t) in ag.tasks
            if f in self.svc.state.frameworks and t in self.svc.state.frameworks[f].tasks
        )
        total = ag.effective_total
        reserved: dict[str, Any] = {}
        for role in sorted(total.roles() - {"*"}):
            reserved[role] = legacy_resources(total.reserved(role))
        return {
            "id": ag.agent_id,
            "hostname": ag.hostname,
            "port": ag.port,
            "pid": f"slave(1)@{ag.hostname}:{ag.port}",
            "attributes": {a.name: (a.scalar.value if a.scalar else a.text.value if a.text else "") for a in ag.attributes},
            "registered_time": ag.registered_time,
            "reregistered_time": ag.reregistered_time,
            "resources": legacy_resources(total),
            "used_resources": legacy_resources(used),
            "offered_resources": legacy_resources(offered),
            "reserved_resources": reserved,
            "unreserved_resources": legacy_resources(total.unreserved()),
            "revocable_resources": legacy_resources(ag.slack),
            "active": ag.reachable and ag.conn_id is not None,
            "deactivated": not ag.reachable,
            "draining": ag.draining,
            "drain_reason": ag.drain_reason,
            # Mesos' DrainInfo ({"state": "DRAINING"|"DRAINED", "config": {...}}) while DRAIN_AGENT
            # holds; absent when the agent is in service or only deactivated (DEACTIVATE_AGENT)
            **({"drain_info": codec.to_builtins(di)} if (di := ag.drain_info()) is not None else {}),
            "version": ag.version,
            "capabilities": list(ag.capabilities),
            "phase": ag.phase.value,
        }

    # --- parts of /state, for callers that show one page of it (the web UI) ----------------------

    def master_json(self) -> dict[str, Any]:
        """The master's own ``/state`` fields (id, version, leader, hostname, start time, epoch)."""
        svc, mi = self.svc, self.svc.state.master_info
        return {"id": svc.master_id, "version": VERSION, "leader": mi.pid, "hostname": mi.hostname,
                "start_time": svc.start_time, "epoch": svc.epoch}

    def agents_json(self, agent_id: str | None = None) -> list[dict[str, Any]]:
        """``/state``'s ``slaves`` (all, or only ``agent_id``'s) without building the rest."""
        st = self.svc.state
        offered = self._offered_by_agent()
        return [
            self._agent_json(a, offered.get(a.agent_id, EMPTY))
            for a in st.agents.values()
            if a.phase is not AgentPhase.RECOVERED and agent_id in (None, a.agent_id)
        ]

    def frameworks_json(
        self, framework_id: str | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """``/state``'s ``frameworks`` and ``completed_frameworks`` (all, or only ``framework_id``'s)."""
        st = self.svc.state
        offered = self._offered_by_framework()
        live = [self._framework_json(f, offered.get(f.framework_id, []))
                for f in st.frameworks.values() if framework_id in (None, f.framework_id)]
        done = [self._framework_json(f, []) for f in st.completed_frameworks
                if framework_id in (None, f.framework_id)]
        return live, done

    def task_json(self, framework_id: str, task_id: str) -> dict[str, Any] | None:
        """One task's ``/state`` entry (live, unreachable or completed), or None: what a log poll
        needs, without building its framework's other tasks."""
        st = self.svc.state
        fw = st.frameworks.get(framework_id) or next(
            (f for f in st.completed_frameworks if f.framework_id == framework_id), None)
        if fw is None:
            return None
        t = fw.tasks.get(task_id) or fw.completed.get(task_id)
        return None if t is None else self._task_json(t)

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
        out["master/operator_event_stream_subscriptions"] = float(len(svc.operator_streams.subscribers))
        out["master/operator_event_streams_dropped"] = float(svc.operator_streams.dropped)
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
        out["master/auth_failures_total"] = float(sum(svc.auth_failures.values()))
        for kind, n in svc.auth_failures.items():
            out[f"master/auth_failures_total/{kind}"] = float(n)
        out["master/authorization_failures_total"] = float(st.unauthorized)
        for name, n in st.calls.items():
            out[f"master/messages_{name.lower()}"] = float(n)
        out["master/event_queue_messages"] = float(svc.pipeline_depth)
        out["master/event_queue_dispatches"] = float(svc.counters.get("dispatches", 0))
        out["allocator/event_queue_dispatches"] = 0.0  # the allocator runs inside the core: no queue
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
