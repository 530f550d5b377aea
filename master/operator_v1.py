"""The v1 operator API (``POST /api/v1``, ``/api/v1/operator``): typed calls in, typed responses
out (GET_STATE, GET_AGENTS, GET_FRAMEWORKS, GET_TASKS, GET_EXECUTORS, GET_ROLES, quota, weights,
drain, teardown...)."""

from __future__ import annotations

import asyncio
import functools
import logging
import os

import attrs

from master.events import (
    AgentDrainRequested,
    MaintenanceScheduleUpdated,
    MaintenanceStarted,
    MaintenanceStopped,
    QuotaUpdated,
    ReservationRequested,
    TeardownRequested,
    WeightUpdated,
)
from master.http_api import VERSION
from master.lifecycles import AgentPhase
from master.maintenance import MaintenanceError, parse_machines, parse_schedule
from master.operator_events import agent_record, framework_record, task_message
from master.read_model import AgentView, FrameworkView, TaskView
from master.views import EMPTY, StateViews
from protocol import mesos
from protocol.resources import ResourceError, Resources
from protocol.task_states import TaskState

OT = mesos.OperatorCallType
RT = mesos.OperatorResponseType


class OperatorV1(StateViews):
    """Operator calls over the views (``self.svc``: ``master.ports.OperatorPort``)."""

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
            return mesos.OperatorResponse(type=RT.GET_ROLES, get_roles=self.get_roles())
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
            return mesos.OperatorResponse(type=RT.GET_QUOTA, get_quota=self.get_quota())
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
            drain = call.drain_agent
            grace = drain.max_grace_period if drain is not None else None
            if grace is not None and grace.nanoseconds < 0:
                raise _Bad("max_grace_period must not be negative")
            await svc.dispatch(AgentDrainRequested(
                agent_id=aid, draining=t is not OT.REACTIVATE_AGENT, reason=drain.reason if drain else None,
                kill=drain is not None, max_grace=grace.nanoseconds / 1e9 if grace is not None else None,
                mark_gone=bool(drain.mark_gone) if drain is not None else False,
            ))
            return None
        if t in (OT.RESERVE_RESOURCES, OT.UNRESERVE_RESOURCES):
            body_r = call.reserve_resources or call.unreserve_resources
            assert body_r is not None
            try:
                res = Resources.from_mesos(body_r.resources)
            except (ResourceError, TypeError, ValueError) as e:
                raise _Bad(f"Invalid resources: {e}") from e
            reserve = t is OT.RESERVE_RESOURCES
            problem = svc.state.reservation_problem(body_r.agent_id.value, res, reserve)
            if problem is not None:
                raise _Conflict(problem)
            await svc.dispatch(ReservationRequested(agent_id=body_r.agent_id.value, resources=res, reserve=reserve))
            return None
        if t is OT.TEARDOWN:
            assert call.teardown is not None
            fid = call.teardown.framework_id.value
            if fid not in svc.state.frameworks:
                raise _Bad(f"Unknown framework {fid}")
            await svc.dispatch(TeardownRequested(framework_id=fid))
            return None
        if t is OT.GET_OPERATIONS:
            # every offer operation this master carries out (RESERVE, UNRESERVE, LAUNCH) is applied
            # when accepted; none is pending or has a status to report (no operation feedback)
            return mesos.OperatorResponse(type=RT.GET_OPERATIONS, get_operations=mesos.GetOperations(()))
        if t is OT.GET_LOGGING_LEVEL:
            return mesos.OperatorResponse(type=RT.GET_LOGGING_LEVEL,
                                          get_logging_level=mesos.GetLoggingLevel(self._logging.level()))
        if t is OT.SET_LOGGING_LEVEL:
            assert call.set_logging_level is not None
            sl = call.set_logging_level
            seconds = sl.duration.nanoseconds / 1e9
            if sl.level < 0 or seconds <= 0:
                raise _Bad("'set_logging_level.level' must be >= 0 and 'duration' positive")
            self._logging.set(sl.level, seconds)
            return None
        if t in (OT.LIST_FILES, OT.READ_FILE):
            return await self._files_call(call)
        if t in MAINTENANCE_CALLS:
            return await self._maintenance_call(call)
        raise _Bad(f"Operator call {t.value if t else None} is not supported by this master")

    async def _maintenance_call(self, call: mesos.OperatorCall) -> mesos.OperatorResponse | None:
        """Maintenance schedules and machine modes (``master.maintenance``): the reads, and the
        writes checked (400 with Mesos' words) before the core applies them."""
        st = self.svc.state
        t = call.type
        if t is OT.GET_MAINTENANCE_STATUS:
            return mesos.OperatorResponse(
                type=RT.GET_MAINTENANCE_STATUS,
                get_maintenance_status=mesos.GetMaintenanceStatus(status=st.maintenance_status()),
            )
        if t is OT.GET_MAINTENANCE_SCHEDULE:
            return mesos.OperatorResponse(
                type=RT.GET_MAINTENANCE_SCHEDULE,
                get_maintenance_schedule=mesos.GetMaintenanceSchedule(schedule=st.maintenance_schedule()),
            )
        ev: MaintenanceScheduleUpdated | MaintenanceStarted | MaintenanceStopped
        try:
            if call.update_maintenance_schedule is not None:
                ev = MaintenanceScheduleUpdated(parse_schedule(call.update_maintenance_schedule.schedule))
            elif call.start_maintenance is not None:
                ev = MaintenanceStarted(parse_machines(call.start_maintenance.machines))
            elif call.stop_maintenance is not None:
                ev = MaintenanceStopped(parse_machines(call.stop_maintenance.machines))
            else:  # (validate_operator_call requires the body)
                raise _Bad(f"Expecting '{t.name.lower() if t else ''}' to be present")
        except MaintenanceError as e:
            raise _Bad(str(e)) from e
        problem = st.maintenance_problem(ev)
        if problem is not None:
            raise _Bad(problem)
        await self.svc.dispatch(ev)
        return None

    @functools.cached_property
    def _logging(self) -> LoggingLevel:
        return LoggingLevel()

    async def _files_call(self, call: mesos.OperatorCall) -> mesos.OperatorResponse:
        """LIST_FILES and READ_FILE of the master's files: its log, ``/master/log`` (with
        ``--log-dir``), as ``/files/*`` serves it."""
        from master.mesos_endpoints import LOG_FILE, LOG_PATH

        path = call.list_files.path if call.list_files is not None else (call.read_file.path if call.read_file else "")
        log_dir = self.svc.config.log_dir
        if path.rstrip("/") != LOG_PATH or not log_dir:
            raise _NotFound(f"No file or directory found at path '{path}'")
        real = os.path.join(log_dir, LOG_FILE)
        try:
            st = await asyncio.to_thread(os.stat, real)
        except OSError as e:
            raise _NotFound(f"No file or directory found at path '{path}'") from e
        if call.type is OT.LIST_FILES:
            info = mesos.FileInfo(path=LOG_PATH, nlink=st.st_nlink, size=st.st_size,
                                  mtime=mesos.TimeInfo(st.st_mtime_ns), mode=st.st_mode,
                                  uid=str(st.st_uid), gid=str(st.st_gid))
            return mesos.OperatorResponse(type=RT.LIST_FILES, list_files=mesos.ListFiles((info,)))
        assert call.read_file is not None
        rf = call.read_file
        if rf.offset < 0 or (rf.length is not None and rf.length < 0):
            raise _Bad("'read_file.offset' and 'read_file.length' must not be negative")
        try:
            data, _at = await asyncio.to_thread(_read_log, real, rf.offset, rf.length)
        except OSError as e:
            raise _NotFound(f"No file or directory found at path '{path}'") from e
        return mesos.OperatorResponse(type=RT.READ_FILE, read_file=mesos.ReadFile(size=st.st_size, data=data))

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

    def get_quota(self) -> mesos.GetQuota:
        """GET_QUOTA's answer (also read by the web UI's roles page)."""
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

    def get_roles(self) -> mesos.GetRoles:
        """GET_ROLES's answer (also read by the web UI's roles page)."""
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

    def _agent_record(self, ag: AgentView, offered: Resources) -> mesos.AgentRecord:
        used = Resources.sum(
            self.svc.state.frameworks[f].tasks[t].resources
            for (f, t) in ag.tasks
            if f in self.svc.state.frameworks and t in self.svc.state.frameworks[f].tasks
        )
        return agent_record(ag, used, offered)  # (the operator stream's AGENT_ADDED builds it alike)

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

    def _framework_record(self, fw: FrameworkView) -> mesos.FrameworkRecord:
        rec = framework_record(fw)
        inverse = self.svc.state.inverse_offers_of(fw.framework_id)
        return attrs.evolve(rec, inverse_offers=inverse) if inverse else rec

    def _get_frameworks(self) -> mesos.GetFrameworks:
        st = self.svc.state
        return mesos.GetFrameworks(
            frameworks=tuple(self._framework_record(f) for f in st.frameworks.values()),
            completed_frameworks=tuple(self._framework_record(f) for f in st.completed_frameworks),
        )

    @staticmethod
    def _task(t: TaskView) -> mesos.Task:
        return task_message(t)

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


MAINTENANCE_CALLS = frozenset({
    OT.GET_MAINTENANCE_STATUS, OT.GET_MAINTENANCE_SCHEDULE, OT.UPDATE_MAINTENANCE_SCHEDULE,
    OT.START_MAINTENANCE, OT.STOP_MAINTENANCE,
})


class _NotFound(_Bad):
    """A path or object that does not exist (404, as Mesos)."""


def _read_log(path: str, offset: int, length: int | None) -> tuple[bytes, int]:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(length if length is not None else 16 << 20), offset


class LoggingLevel:
    """Mesos' logging level (glog verbosity: 0 is the master's own level, above 0 debug) set for
    a while with SET_LOGGING_LEVEL, then back to what it was."""

    def __init__(self) -> None:
        self._revert: asyncio.TimerHandle | None = None
        self._base: int | None = None

    @staticmethod
    def _logger() -> logging.Logger:
        return logging.getLogger()

    def level(self) -> int:
        return 1 if self._logger().getEffectiveLevel() <= logging.DEBUG else 0

    def set(self, level: int, seconds: float) -> None:
        root = self._logger()
        if self._base is None:
            self._base = root.level
        root.setLevel(logging.DEBUG if level > 0 else self._base)
        if self._revert is not None:
            self._revert.cancel()
        self._revert = asyncio.get_running_loop().call_later(seconds, self._back)

    def _back(self) -> None:
        if self._base is not None:
            self._logger().setLevel(self._base)
        self._base, self._revert = None, None


class _Conflict(_Bad):
    """A well-formed request the current state cannot satisfy (409, as Mesos)."""
