"""JSON views of the master for the operator endpoints: ``/state`` (Mesos keys, legacy flattened
resources, the old names ``slaves``/``slave_id``) and the ``/metrics/snapshot`` numbers (Mesos
names)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from master.http_api import VERSION
from master.lifecycles import AgentPhase, FrameworkPhase
from master.read_model import AgentView, FrameworkView, TaskView
from protocol import codec, mesos
from protocol.resources import Resources
from protocol.task_states import TaskState

if TYPE_CHECKING:
    from master.ports import OperatorPort

EMPTY = Resources()
TASK_LIMIT = 100  # Mesos' default page of /tasks

# Agora settings whose Mesos flag has another name
MESOS_FLAG_NAMES = {
    "ping_timeout": "agent_ping_timeout",
    "agent_unreachable_gc": "registry_max_agent_age",
    "max_framework_queue": "max_framework_queue_events",
}


def legacy_resources(r: Resources) -> dict[str, float | str]:
    """Resources as ``/state`` shows them: the legacy flattened dict (``{"cpus": 2.0, ...}``)."""
    return r.to_legacy_dict()


def status_json(s: mesos.TaskStatus) -> dict[str, Any]:
    """A task status as Mesos' ``/state`` models it: state and timestamp, then labels,
    container_status and healthy when set; and Agora's ``message`` and ``reason`` when set (the
    web UI's task page and ``agora task show`` print them)."""
    out: dict[str, Any] = {"state": s.state.value, "timestamp": s.timestamp or 0.0}
    if s.message:
        out["message"] = s.message
    if s.reason is not None:
        out["reason"] = s.reason.value
    if s.labels is not None and s.labels.labels:
        out["labels"] = [codec.to_builtins(lb) for lb in s.labels.labels]
    if s.container_status is not None:
        out["container_status"] = codec.to_builtins(s.container_status)
    if s.healthy is not None:
        out["healthy"] = s.healthy
    return out


def command_json(c: mesos.CommandInfo | None) -> dict[str, Any]:
    """``CommandInfo`` as Mesos' endpoints model it: ``argv`` and ``uris`` always."""
    out: dict[str, Any] = {}
    if c is None:
        return {"argv": [], "uris": []}
    if c.shell is not None:
        out["shell"] = c.shell
    if c.value is not None:
        out["value"] = c.value
    out["argv"] = list(c.arguments)
    if c.environment is not None:
        out["environment"] = codec.to_builtins(c.environment)
    out["uris"] = [{"value": u.value, "executable": bool(u.executable)} for u in c.uris]
    return out


def executor_json(agent_id: str, ex: mesos.ExecutorInfo) -> dict[str, Any]:
    """An executor as Mesos' ``/state`` models it (``json(ExecutorInfo)`` plus ``slave_id``)."""
    res = Resources.from_mesos(ex.resources) if ex.resources else EMPTY
    out: dict[str, Any] = {
        "executor_id": ex.executor_id.value,
        "name": ex.name or "",
        "framework_id": ex.framework_id.value if ex.framework_id else "",
        "command": command_json(ex.command),
        "resources": legacy_resources(res),
    }
    if ex.resources:
        roles = res.roles()
        out["role"] = next(iter(sorted(roles))) if roles else "*"
    if ex.labels is not None and ex.labels.labels:
        out["labels"] = [codec.to_builtins(lb) for lb in ex.labels.labels]
    if ex.type is not None:
        out["type"] = ex.type.value
    out["slave_id"] = agent_id
    return out


def agent_active(ag: AgentView) -> bool:
    """Mesos' ``active``: registered, connected and not deactivated by an operator."""
    return ag.reachable and ag.conn_id is not None and not ag.draining


def recovered_json(ag: AgentView) -> dict[str, Any]:
    """A recovered agent (from the registry, not back yet) as Mesos' ``json(SlaveInfo)``."""
    return {"id": ag.agent_id, "hostname": ag.hostname, "port": ag.port,
            "attributes": {a.name: (a.scalar.value if a.scalar else a.text.value if a.text else "") for a in ag.attributes}}


def registered(ag: AgentView) -> bool:
    """Listed in Mesos' ``slaves`` (registered): not unreachable and not only recovered."""
    return ag.phase in (AgentPhase.REGISTERED, AgentPhase.DRAINING)


class StateViews:
    """Builds the views from ``self.svc`` (the operator port, ``master.ports.OperatorPort``)."""

    svc: OperatorPort

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

    def _task_json(self, t: TaskView) -> dict[str, Any]:
        """A task as Mesos' ``/state`` models it (``json(Task)``): optional fields only when set."""
        out: dict[str, Any] = {
            "id": t.task_id,
            "name": t.name,
            "framework_id": t.framework_id,
            "executor_id": t.executor_id or "",
            "slave_id": t.agent_id,
            "state": t.state.value,
            "resources": legacy_resources(t.resources),
            "role": t.role,
            "statuses": [status_json(s) for s in t.statuses[-10:]],
        }
        info = t.info
        if info is not None:
            user = info.command.user if info.command is not None else None
            if user:
                out["user"] = user
            if info.labels is not None and info.labels.labels:
                out["labels"] = [codec.to_builtins(lb) for lb in info.labels.labels]
            for key in ("discovery", "container", "health_check"):
                value = getattr(info, key)
                if value is not None:
                    out[key] = codec.to_builtins(value)
        usage = t.current_usage()
        if usage is not None:
            out["usage"] = usage.to_json()  # Agora addition
        return out

    def _framework_json(self, fw: FrameworkView, offers: list[Any]) -> dict[str, Any]:
        """A framework as Mesos' ``/state`` and ``/frameworks`` model it (``FullFrameworkWriter``):
        ``pid`` never (HTTP frameworks have none), ``principal``, ``labels`` and
        ``reregistered_time`` only when set, ``roles`` for MULTI_ROLE frameworks, else ``role``."""
        used = Resources.sum(t.resources for t in fw.tasks.values() if t.state is not TaskState.TASK_UNREACHABLE)
        offered = Resources.sum(o.resources for o in offers)
        info = fw.info
        out: dict[str, Any] = {
            "id": fw.framework_id,
            "name": info.name,
            "used_resources": legacy_resources(used),
            "offered_resources": legacy_resources(offered),
            "capabilities": sorted(fw.capabilities),
            "hostname": info.hostname or "",
            "webui_url": info.webui_url or "",
            "active": fw.phase is FrameworkPhase.SUBSCRIBED,
            "connected": fw.connected,
            "recovered": fw.phase is FrameworkPhase.RECOVERED,
            "user": info.user,
            "failover_timeout": fw.failover_timeout,
            "checkpoint": bool(info.checkpoint),
            "registered_time": fw.registered_time,
            "unregistered_time": fw.unregistered_time or 0.0,
            "resources": legacy_resources(used + offered),
        }
        if fw.principal:
            out["principal"] = fw.principal
        if fw.reregistered_time is not None and fw.reregistered_time != fw.registered_time:
            out["reregistered_time"] = fw.reregistered_time
        if "MULTI_ROLE" in fw.capabilities:
            out["roles"] = list(fw.roles)
        else:
            out["role"] = fw.roles[0] if fw.roles else "*"
        out["tasks"] = [self._task_json(t) for t in fw.tasks.values() if t.state is not TaskState.TASK_UNREACHABLE]
        out["unreachable_tasks"] = [self._task_json(t) for t in fw.tasks.values() if t.state is TaskState.TASK_UNREACHABLE]
        out["completed_tasks"] = [self._task_json(t) for t in fw.completed.values()]
        out["offers"] = [
            {
                "id": o.offer_id,
                "framework_id": o.framework_id,
                "allocation_info": {"role": o.role},
                "slave_id": o.agent_id,
                "resources": legacy_resources(o.resources),
            }
            for o in offers
        ]
        out["executors"] = [executor_json(aid, ex) for (aid, _eid), ex in fw.executors.items()]
        if info.labels is not None and info.labels.labels:
            out["labels"] = [codec.to_builtins(lb) for lb in info.labels.labels]
        out |= self._offers_reason(fw, offers)  # Agora addition
        return out

    def _offers_reason(self, fw: FrameworkView, offers: list[Any]) -> dict[str, str]:
        """``offers_reason``: why a connected framework holding no offers gets none (the
        allocator's explanation; e.g. GPU agents and no ``GPU_RESOURCES``)."""
        alloc = self.svc.allocator
        if offers or alloc is None or fw.phase is not FrameworkPhase.SUBSCRIBED:
            return {}
        return {"offers_reason": alloc.why_not_offered(fw.framework_id)}

    def _agent_used(self, ag: AgentView) -> Resources:
        frameworks = self.svc.state.frameworks
        return Resources.sum(
            frameworks[f].tasks[t].resources
            for (f, t) in ag.tasks
            if f in frameworks and t in frameworks[f].tasks
        )

    def _agent_json(self, ag: AgentView, offered: Resources, full: bool = False) -> dict[str, Any]:
        """An agent as Mesos' ``/state`` models it (``SlaveWriter``); ``full`` adds the
        ``*_resources_full`` lists of ``/slaves``. Agora additions: ``revocable_resources``,
        ``draining``, ``drain_reason``, ``phase``, ``unavailability`` (its machine is DRAINING for
        maintenance: the window its offers carry)."""
        used = self._agent_used(ag)
        total = ag.effective_total
        reserved: dict[str, Any] = {}
        for role in sorted(total.roles() - {"*"}):
            reserved[role] = legacy_resources(total.reserved(role))
        out: dict[str, Any] = {
            "id": ag.agent_id,
            "hostname": ag.hostname,
            "port": ag.port,
            "attributes": {a.name: (a.scalar.value if a.scalar else a.text.value if a.text else "") for a in ag.attributes},
            "pid": f"slave(1)@{ag.hostname}:{ag.port}",
            "registered_time": ag.registered_time,
        }
        if ag.reregistered_time is not None:
            out["reregistered_time"] = ag.reregistered_time
        out |= {
            "resources": legacy_resources(total),
            "used_resources": legacy_resources(used),
            "offered_resources": legacy_resources(offered),
            "reserved_resources": reserved,
            "unreserved_resources": legacy_resources(total.unreserved()),
            "active": agent_active(ag),
            "deactivated": ag.draining,
            "version": ag.version,
            "capabilities": list(ag.capabilities),
        }
        # Mesos' DrainInfo ({"state": "DRAINING"|"DRAINED", "config": {...}}) while DRAIN_AGENT
        # holds; absent when the agent is in service or only deactivated (DEACTIVATE_AGENT)
        if (di := ag.drain_info()) is not None:
            out["drain_info"] = codec.to_builtins(di)
        if full:
            out["reserved_resources_full"] = {
                role: [codec.to_builtins(r) for r in total.reserved(role).to_mesos()] for role in sorted(total.roles() - {"*"})
            }
            out["unreserved_resources_full"] = [codec.to_builtins(r) for r in total.unreserved().to_mesos()]
            out["used_resources_full"] = [codec.to_builtins(r) for r in used.to_mesos()]
            out["offered_resources_full"] = [codec.to_builtins(r) for r in offered.to_mesos()]
        out |= {  # Agora additions
            "revocable_resources": legacy_resources(ag.slack),
            "draining": ag.draining,
            "drain_reason": ag.drain_reason,
            "phase": ag.phase.value,
        }
        if (unav := self.svc.state.unavailability_of(ag.agent_id)) is not None:
            out["unavailability"] = codec.to_builtins(unav)
        return out

    # --- parts of /state, for callers that show one page of it (the web UI) ----------------------

    def master_json(self) -> dict[str, Any]:
        """The master's own ``/state`` fields (id, version, leader, hostname, start time, epoch)."""
        svc, mi = self.svc, self.svc.state.master_info
        return {"id": svc.master_id, "version": VERSION, "leader": mi.pid, "hostname": mi.hostname,
                "start_time": svc.start_time, "epoch": svc.epoch}

    def agents_json(self, agent_id: str | None = None) -> list[dict[str, Any]]:
        """The agents the web UI lists (registered and unreachable; all, or only ``agent_id``)
        without building the rest of ``/state``."""
        st = self.svc.state
        offered = self._offered_by_agent()
        return [
            self._agent_json(a, offered.get(a.agent_id, EMPTY))
            for a in st.agents.values()
            if a.phase is not AgentPhase.RECOVERED and agent_id in (None, a.agent_id)
        ]

    def slaves_json(self, agent_id: str | None = None, full: bool = False) -> dict[str, Any]:
        """Mesos' ``/slaves``: ``slaves`` (registered agents; ``full``: with the
        ``*_resources_full`` lists) and ``recovered_slaves``; ``agent_id`` selects one."""
        st = self.svc.state
        offered = self._offered_by_agent()
        return {
            "slaves": [
                self._agent_json(a, offered.get(a.agent_id, EMPTY), full=full)
                for a in st.agents.values()
                if registered(a) and agent_id in (None, a.agent_id)
            ],
            "recovered_slaves": [
                recovered_json(a) for a in st.agents.values()
                if a.phase is AgentPhase.RECOVERED and agent_id in (None, a.agent_id)
            ],
        }

    def unreachable_agents_json(self) -> list[dict[str, Any]]:
        """Agora addition to ``/state``: the unreachable agents, kept apart from ``slaves`` (Mesos
        only counts them) so tools that list agents can show them."""
        return [self._agent_json(a, EMPTY) for a in self.svc.state.agents.values() if a.phase is AgentPhase.UNREACHABLE]

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

    def tasks_json(self, framework_id: str | None = None, task_id: str | None = None, limit: int = TASK_LIMIT,
                   offset: int = 0, ascending: bool = False,
                   visible: Callable[[str, str, str | None], bool] | None = None) -> dict[str, Any]:
        """Mesos' ``/tasks``: live, unreachable and completed tasks of every framework (or one, or
        one task id), sorted by their first status' time (newest first unless ``ascending``;
        tasks without a status sort as Mesos sorts them), ``limit`` of them from ``offset``."""
        st = self.svc.state
        tasks: list[TaskView] = []
        for fw in (*st.frameworks.values(), *st.completed_frameworks):
            if framework_id not in (None, fw.framework_id):
                continue
            for t in (*fw.tasks.values(), *fw.completed.values()):
                if task_id in (None, t.task_id) and (visible is None or visible(fw.framework_id, t.task_id, fw.info.user or None)):
                    tasks.append(t)

        def first(t: TaskView) -> float | None:
            return (t.statuses[0].timestamp or 0.0) if t.statuses else None

        with_status = [t for t in tasks if first(t) is not None]
        without = [t for t in tasks if first(t) is None]
        with_status.sort(key=lambda t: (first(t) or 0.0, t.framework_id, t.task_id), reverse=not ascending)
        # Mesos: ascending puts tasks without a status first, descending last
        ordered = without + with_status if ascending else with_status + without
        return {"tasks": [self._task_json(t) for t in ordered[offset:offset + limit]]}

    def roles_json(self, roles: mesos.GetRoles, quotas: dict[str, tuple[Resources, Resources | None]]) -> dict[str, Any]:
        """Mesos' ``/roles``: each known role's name, weight, quota (``guarantee``/``limit``, when
        set), the resources allocated to and offered in it, and its frameworks."""
        offered: dict[str, Resources] = {}
        for fw_offers in self._offered_by_framework().values():
            for o in fw_offers:
                offered[o.role] = offered.get(o.role, EMPTY) + o.resources
        out = []
        for r in roles.roles:
            row: dict[str, Any] = {"name": r.name, "weight": r.weight}
            q = quotas.get(r.name)
            if q is not None and not (q[0].is_empty() and q[1] is None):
                row["quota"] = {
                    "role": r.name,
                    "guarantee": dict(q[0].scalars()),
                    "limit": dict(q[1].scalars()) if q[1] is not None else {},
                }
            allocated = Resources.from_mesos(r.allocated) if r.allocated else EMPTY
            row["resources"] = legacy_resources(allocated + offered.get(r.name, EMPTY))
            row["frameworks"] = [f.value for f in r.frameworks]
            out.append(row)
        return {"roles": out}

    def flags_json(self) -> dict[str, str]:
        """The master's flags as Mesos' ``/flags`` shows them: every setting by its flag name
        (``--ping-timeout`` is ``agent_ping_timeout`` there, as in Mesos), values as strings;
        unset optional ones left out."""
        svc = self.svc
        out: dict[str, str] = {}
        for f in attrs.fields(type(svc.config)):
            value = getattr(svc.config, f.name)
            if value is None:
                continue
            name = MESOS_FLAG_NAMES.get(f.name, f.name)
            out[name] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        out["port"] = str(svc.port)
        return dict(sorted(out.items()))

    def state_dict(self) -> dict[str, Any]:
        """``/state`` in Mesos' shape: registered agents in ``slaves`` (counted as activated or,
        deactivated by an operator or disconnected, deactivated), unreachable agents only counted
        (and listed apart in the Agora addition ``unreachable_agents``), fields Mesos leaves out
        when unset left out, not null."""
        svc = self.svc
        st = svc.state
        offered_agent = self._offered_by_agent()
        offered_fw = self._offered_by_framework()
        mi = st.master_info
        listed = [a for a in st.agents.values() if registered(a)]
        out: dict[str, Any] = {
            "version": VERSION,
            "build_date": "",
            "build_time": 0.0,
            "build_user": "",
            "start_time": svc.start_time,
            "elected_time": svc.start_time,
            "id": svc.master_id,
            "pid": mi.pid,
            "hostname": mi.hostname,
            "capabilities": [c.type.value for c in mi.capabilities if c.type is not None],
            "activated_slaves": sum(1 for a in listed if agent_active(a)),
            "deactivated_slaves": sum(1 for a in listed if not agent_active(a)),
            "unreachable_slaves": sum(1 for a in st.agents.values() if a.phase is AgentPhase.UNREACHABLE),
            "leader": mi.pid,
            "leader_info": {"id": mi.id, "pid": mi.pid, "port": mi.port, "hostname": mi.hostname},
        }
        if svc.config.log_dir:
            out["log_dir"] = svc.config.log_dir
        out["flags"] = self.flags_json()
        out["slaves"] = [self._agent_json(a, offered_agent.get(a.agent_id, EMPTY)) for a in listed]
        out["recovered_slaves"] = [recovered_json(a) for a in st.agents.values() if a.phase is AgentPhase.RECOVERED]
        out["frameworks"] = [self._framework_json(f, offered_fw.get(f.framework_id, [])) for f in st.frameworks.values()]
        out["completed_frameworks"] = [self._framework_json(f, []) for f in st.completed_frameworks]
        out["orphan_tasks"] = []
        out["unregistered_frameworks"] = []
        # Agora additions
        out["unreachable_agents"] = self.unreachable_agents_json()
        out["epoch"] = svc.epoch
        return out

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
        listed = [a for a in agents if registered(a)]  # as /state: unreachable agents apart
        out["master/slaves_active"] = float(sum(1 for a in listed if agent_active(a)))
        out["master/slaves_connected"] = float(sum(1 for a in listed if a.conn_id is not None))
        out["master/slaves_disconnected"] = float(sum(1 for a in listed if a.conn_id is None))
        out["master/slaves_inactive"] = float(sum(1 for a in listed if not agent_active(a)))
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
