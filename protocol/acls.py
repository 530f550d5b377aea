"""Authorization, pure: Mesos' ACL JSON and its evaluation (Mesos ``local_authorizer``).

An ACL file::

    {"permissive": false,
     "register_frameworks": [{"principals": {"values": ["batch"]}, "roles": {"values": ["batch"]}}],
     "run_tasks":           [{"principals": {"type": "ANY"}, "users": {"values": ["nobody"]}}],
     "teardown_frameworks": [{"principals": {"values": ["ops"]}, "framework_principals": {"type": "ANY"}}],
     "register_agents":     [{"principals": {"values": ["agent"]}, "agents": {"type": "ANY"}}]}

Each action holds a list of rules ``{subject entity, object entity}``; an entity is
``{"values": [...]}``, ``{"type": "ANY"}`` or ``{"type": "NONE"}``. As in Mesos, the rules of an
action are tried in order and the first whose subject and object both *match* decides: it allows
unless one of its entities is NONE (NONE matches everything and allows nothing). When no rule
matches, ``permissive`` decides. A request without a principal (authentication off) is an ANY
subject: only rules whose principals are ANY or NONE match it.

Agora rules on top of Mesos:

* ``permissive`` defaults to **false when authentication is on** (default deny), true otherwise.
* ``run_tasks``: ``users: ANY`` does not cover ``root``: a rule must name ``root`` to allow it.
* the read actions ``view_frameworks``, ``view_tasks`` and ``access_sandboxes`` (object: the
  framework's / task's user) are enforced only when the file has rules for them
  (``Acls.enforces``): a default-deny file that lists only write actions hides nothing.

Actions (the Mesos names) and their object: ``register_frameworks`` roles, ``run_tasks`` users,
``teardown_frameworks`` framework_principals, ``register_agents`` agents, ``update_quotas`` roles,
``update_weights`` roles, ``reserve_resources`` roles, ``unreserve_resources``
reserver_principals, ``drain_agents`` / ``deactivate_agents`` / ``reactivate_agents`` agents,
``view_frameworks`` / ``view_tasks`` / ``access_sandboxes`` users.

Agora's framework services (batch, elastic) read the same file for their own actions, each with
the job's owner (the principal that submitted it) as its object: ``manage_jobs`` users (cancel,
kill, hold, update another user's job) and ``view_job_logs`` users (read its tasks' output); the
owner may always do both, and without a rule (default deny) nobody else may. ``submit_jobs`` roles
(the job's queue) is enforced only once the file has rules for it, as the read actions.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from protocol import mesos, mesos_common

__pure__ = True

ROOT_USER = "root"


class AclError(ValueError):
    """An ACL file that cannot be used."""


class Action(enum.Enum):
    REGISTER_FRAMEWORKS = "register_frameworks"
    RUN_TASKS = "run_tasks"
    TEARDOWN_FRAMEWORKS = "teardown_frameworks"
    REGISTER_AGENTS = "register_agents"
    UPDATE_QUOTAS = "update_quotas"
    UPDATE_WEIGHTS = "update_weights"
    RESERVE_RESOURCES = "reserve_resources"
    UNRESERVE_RESOURCES = "unreserve_resources"
    DRAIN_AGENTS = "drain_agents"
    DEACTIVATE_AGENTS = "deactivate_agents"
    REACTIVATE_AGENTS = "reactivate_agents"
    # maintenance (Mesos' names): the object is each machine named (its hostname, else its IP)
    UPDATE_MAINTENANCE_SCHEDULES = "update_maintenance_schedules"
    START_MAINTENANCES = "start_maintenances"
    STOP_MAINTENANCES = "stop_maintenances"
    VIEW_FRAMEWORKS = "view_frameworks"
    VIEW_TASKS = "view_tasks"
    ACCESS_SANDBOXES = "access_sandboxes"
    # the framework services' own (batch, elastic): object the job's owner / the job's queue
    MANAGE_JOBS = "manage_jobs"
    VIEW_JOB_LOGS = "view_job_logs"
    SUBMIT_JOBS = "submit_jobs"


# the object entity's key for each action (the subject is always "principals")
OBJECT_KEY: dict[Action, str] = {
    Action.REGISTER_FRAMEWORKS: "roles",
    Action.RUN_TASKS: "users",
    Action.TEARDOWN_FRAMEWORKS: "framework_principals",
    Action.REGISTER_AGENTS: "agents",
    Action.UPDATE_QUOTAS: "roles",
    Action.UPDATE_WEIGHTS: "roles",
    Action.RESERVE_RESOURCES: "roles",
    Action.UNRESERVE_RESOURCES: "reserver_principals",
    Action.DRAIN_AGENTS: "agents",
    Action.DEACTIVATE_AGENTS: "agents",
    Action.REACTIVATE_AGENTS: "agents",
    Action.UPDATE_MAINTENANCE_SCHEDULES: "machines",
    Action.START_MAINTENANCES: "machines",
    Action.STOP_MAINTENANCES: "machines",
    Action.VIEW_FRAMEWORKS: "users",  # the framework's user (FrameworkInfo.user)
    Action.VIEW_TASKS: "users",  # the task's user (command, else executor, else framework)
    Action.ACCESS_SANDBOXES: "users",  # the user of the task whose sandbox is read
    Action.MANAGE_JOBS: "users",  # the job's owner (a principal)
    Action.VIEW_JOB_LOGS: "users",  # the job's owner (a principal)
    Action.SUBMIT_JOBS: "roles",  # the job's queue
}
# read actions: enforced only once the ACL file has rules for them (see enforces)
READ_ACTIONS = frozenset({Action.VIEW_FRAMEWORKS, Action.VIEW_TASKS, Action.ACCESS_SANDBOXES})
# enforced only once the file has rules for them, like the read actions
OPT_IN_ACTIONS = READ_ACTIONS | {Action.SUBMIT_JOBS}


class EntityType(enum.Enum):
    SOME = "SOME"
    ANY = "ANY"
    NONE = "NONE"


@attrs.frozen
class Entity:
    type: EntityType = EntityType.ANY
    values: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, raw: Any, where: str) -> Entity:
        if not isinstance(raw, Mapping):
            raise AclError(f"{where}: an entity is an object with 'values' or 'type'")
        if "values" in raw:
            vals = raw["values"]
            if not isinstance(vals, list) or not all(isinstance(v, str) for v in vals):
                raise AclError(f"{where}: 'values' must be a list of strings")
            if "type" in raw and raw["type"] != "SOME":
                raise AclError(f"{where}: 'values' goes with no type (or SOME)")
            return cls(EntityType.SOME, frozenset(vals))
        t = raw.get("type")
        if t not in ("ANY", "NONE"):
            raise AclError(f"{where}: 'type' must be ANY or NONE")
        return cls(EntityType(t))

    def matches(self, value: str | None) -> bool:
        """Mesos ``matches``: a request without a value (ANY) matches only ANY/NONE; NONE matches
        everything."""
        if self.type is not EntityType.SOME:
            return True
        return value is not None and value in self.values

    @property
    def allows(self) -> bool:
        return self.type is not EntityType.NONE


@attrs.frozen
class Rule:
    principals: Entity
    object: Entity


@attrs.frozen
class Decision:
    allowed: bool
    reason: str  # why (for logs and answers)


@attrs.frozen
class Acls:
    permissive: bool = True
    rules: Mapping[Action, tuple[Rule, ...]] = attrs.field(factory=dict)

    @classmethod
    def allow_all(cls) -> Acls:
        return cls(permissive=True, rules={})

    @property
    def allows_everything(self) -> bool:
        return self.permissive and not self.rules

    @classmethod
    def parse(cls, text: str, *, default_permissive: bool) -> Acls:
        try:
            data = json.loads(text)
        except ValueError as e:
            raise AclError(f"ACLs are not valid JSON: {e}") from e
        if not isinstance(data, dict):
            raise AclError("ACLs must be a JSON object")
        permissive = data.get("permissive", default_permissive)
        if not isinstance(permissive, bool):
            raise AclError("'permissive' must be true or false")
        known = {a.value: a for a in Action}
        rules: dict[Action, tuple[Rule, ...]] = {}
        for key, items in data.items():
            if key == "permissive":
                continue
            action = known.get(key)
            if action is None:
                raise AclError(f"unknown ACL action {key!r} (known: {', '.join(sorted(known))})")
            if not isinstance(items, list):
                raise AclError(f"{key}: must be a list of rules")
            obj_key = OBJECT_KEY[action]
            parsed = []
            for i, item in enumerate(items):
                where = f"{key}[{i}]"
                if not isinstance(item, Mapping):
                    raise AclError(f"{where}: a rule is an object")
                extra = set(item) - {"principals", obj_key}
                if extra:
                    raise AclError(f"{where}: unknown keys {', '.join(sorted(extra))} (expected principals, {obj_key})")
                subject = Entity.parse(item.get("principals", {"type": "ANY"}), f"{where}.principals")
                obj = Entity.parse(item.get(obj_key, {"type": "ANY"}), f"{where}.{obj_key}")
                parsed.append(Rule(subject, obj))
            rules[action] = tuple(parsed)
        return cls(permissive=permissive, rules=rules)

    def decide(self, action: Action, principal: str | None, obj: str | None) -> Decision:
        """May ``principal`` (None: unauthenticated) do ``action`` on ``obj`` (None: any)?"""
        who = principal if principal is not None else "an unauthenticated peer"
        for rule in self.rules.get(action, ()):
            if rule.principals.matches(principal) and rule.object.matches(obj):
                ok = rule.principals.allows and rule.object.allows
                if ok and action is Action.RUN_TASKS and obj == ROOT_USER and rule.object.type is not EntityType.SOME:
                    return Decision(False, f"{who} may not run tasks as root (an ACL must name 'root')")
                verdict = "allowed" if ok else "denied"
                return Decision(ok, f"{action.value} {verdict} for {who} on {obj!r} by an ACL")
        verdict = "allowed" if self.permissive else "denied"
        return Decision(self.permissive, f"{action.value} {verdict} for {who} on {obj!r} (no ACL matched)")

    def allows(self, action: Action, principal: str | None, obj: str | None) -> bool:
        return self.decide(action, principal, obj).allowed

    def enforces(self, action: Action) -> bool:
        """Whether ``action`` is checked at all. A read action (``view_*``, ``access_sandboxes``)
        with no rules in the file is not: what an authenticated principal could read before stays
        readable (read-only authentication is the gate), so a default-deny file written for the
        write actions hides nothing. Once it has rules, they (then ``permissive``) decide."""
        return action not in OPT_IN_ACTIONS or action in self.rules


# --- the questions the master's core asks (pure; called from state / agents / accept) -------------


def subscribe_problem(
    acls: Acls,
    authenticate: bool,
    authenticated: str | None,
    claimed: str | None,
    roles: tuple[str, ...],
    previous: str | None,
    known: bool,
) -> str | None:
    """Why a SUBSCRIBE is refused, or None. ``authenticated``: the principal the request proved
    (None when frameworks need not authenticate); ``claimed``: ``FrameworkInfo.principal``;
    ``previous``: the principal the framework id subscribed with before (``known``: it did)."""
    if authenticate:
        if authenticated is None:
            return "Framework is not authenticated"
        if claimed != authenticated:
            return f"Authenticated principal '{authenticated}' does not match principal '{claimed or ''}' set in FrameworkInfo"
        if known and previous != authenticated:
            return "Framework principal changed on re-subscription"
    subject = authenticated if authenticate else claimed
    for role in roles:
        d = acls.decide(Action.REGISTER_FRAMEWORKS, subject, role)
        if not d.allowed:
            return f"Framework is not authorized for role '{role}' ({d.reason})"
    return None


def agent_problem(acls: Acls, authenticate: bool, principal: str | None, agent_id: str | None, bound: str | None) -> str | None:
    """Why an agent's REGISTER is refused, or None. ``bound``: the principal that first
    registered ``agent_id`` (an agent id belongs to that credential for good)."""
    if authenticate and principal is None:
        return "Agent is not authenticated"
    if agent_id is not None and bound is not None and principal != bound:
        return f"Agent {agent_id} is registered under another principal"
    d = acls.decide(Action.REGISTER_AGENTS, principal, None)
    if not d.allowed:
        return f"Agent is not authorized to register ({d.reason})"
    return None


def task_user(command_user: str | None, executor_user: str | None, framework_user: str | None) -> str | None:
    """The user a task runs as, as Mesos reads it: its command's, else its executor's, else the
    framework's."""
    return command_user or executor_user or framework_user or None


def task_info_user(
    info: mesos.TaskInfo, framework_user: str | None, group_executor: mesos.ExecutorInfo | None = None
) -> str | None:
    """``task_user`` of a ``TaskInfo`` (its executor, else the task group's ``group_executor``)."""
    executor = info.executor or group_executor
    return task_user(
        info.command.user if info.command is not None else None,
        executor.command.user if executor is not None and executor.command is not None else None,
        framework_user,
    )


def task_problem(acls: Acls, principal: str | None, user: str | None) -> str | None:
    """Why a task may not run as ``user`` for ``principal`` (``run_tasks``), or None."""
    if acls.allows_everything:
        return None
    d = acls.decide(Action.RUN_TASKS, principal, user)
    if d.allowed:
        return None
    return f"Not authorized to run tasks as user '{user or ''}' ({d.reason})"


def _reservation_of(r: mesos_common.Resource) -> mesos_common.ReservationInfo | None:
    if r.reservations:
        return r.reservations[-1]
    return r.reservation


def operator_requests(
    call: mesos.OperatorCall, framework_principal: Callable[[str], str | None]
) -> list[tuple[Action, str | None]]:
    """What an operator call asks to do, as (action, object) pairs (empty: no ACL covers it,
    e.g. the GET_* calls, which ``authenticate_http_readwrite`` protects)."""
    OT = mesos.OperatorCallType
    t = call.type
    if t is OT.UPDATE_WEIGHTS and call.update_weights is not None:
        return [(Action.UPDATE_WEIGHTS, wi.role or "*") for wi in call.update_weights.weight_infos]
    if t in (OT.UPDATE_QUOTA, OT.SET_QUOTA) and call.update_quota is not None:
        return [(Action.UPDATE_QUOTAS, qc.role) for qc in call.update_quota.quota_configs]
    if t is OT.REMOVE_QUOTA and call.remove_quota is not None:
        return [(Action.UPDATE_QUOTAS, call.remove_quota.role)]
    agent_calls = {
        OT.DRAIN_AGENT: (Action.DRAIN_AGENTS, call.drain_agent),
        OT.DEACTIVATE_AGENT: (Action.DEACTIVATE_AGENTS, call.deactivate_agent),
        OT.REACTIVATE_AGENT: (Action.REACTIVATE_AGENTS, call.reactivate_agent),
    }
    if t in agent_calls:
        action, body = agent_calls[t]
        return [(action, body.agent_id.value if body is not None else None)]
    if t is OT.RESERVE_RESOURCES and call.reserve_resources is not None:
        roles = {(_reservation_of(r) or mesos_common.ReservationInfo()).role or r.role for r in call.reserve_resources.resources}
        return [(Action.RESERVE_RESOURCES, role) for role in sorted(x or "*" for x in roles)]
    if t is OT.UNRESERVE_RESOURCES and call.unreserve_resources is not None:
        who = {(_reservation_of(r) or mesos_common.ReservationInfo()).principal for r in call.unreserve_resources.resources}
        return [(Action.UNRESERVE_RESOURCES, p) for p in sorted(who, key=lambda p: p or "")]
    if t is OT.UPDATE_MAINTENANCE_SCHEDULE and call.update_maintenance_schedule is not None:
        machines = [m for w in call.update_maintenance_schedule.schedule.windows for m in w.machine_ids]
        # an empty schedule (cancelling) still needs the action: checked without a machine
        names = sorted({_machine_name(m) for m in machines}) if machines else [None]
        return [(Action.UPDATE_MAINTENANCE_SCHEDULES, n) for n in names]
    if t is OT.START_MAINTENANCE and call.start_maintenance is not None:
        return [(Action.START_MAINTENANCES, n) for n in sorted({_machine_name(m) for m in call.start_maintenance.machines})]
    if t is OT.STOP_MAINTENANCE and call.stop_maintenance is not None:
        return [(Action.STOP_MAINTENANCES, n) for n in sorted({_machine_name(m) for m in call.stop_maintenance.machines})]
    if t is OT.TEARDOWN and call.teardown is not None:
        return [(Action.TEARDOWN_FRAMEWORKS, framework_principal(call.teardown.framework_id.value))]
    return []


def _machine_name(m: mesos.MachineID) -> str:
    """How a maintenance ACL names a machine: its hostname (lower-cased), else its IP."""
    return (m.hostname or "").lower() or (m.ip or "")


def operator_problem(
    acls: Acls, principal: str | None, call: mesos.OperatorCall, framework_principal: Callable[[str], str | None]
) -> str | None:
    """Why ``principal`` may not make this operator call (answered ``403``), or None."""
    if acls.allows_everything:
        return None
    for action, obj in operator_requests(call, framework_principal):
        d = acls.decide(action, principal, obj)
        if not d.allowed:
            return f"Forbidden: {d.reason}"
    return None


# --- a framework service's jobs (manage_jobs, view_job_logs, submit_jobs) -------------------------


def job_problem(acls: Acls, action: Action, principal: str | None, owner: str | None, what: str) -> str | None:
    """Why ``principal`` may not do ``action`` (``manage_jobs``, ``view_job_logs``) on a job owned
    by ``owner`` (answered ``403``), or None; ``what`` reads "cancel", "read the logs of"... ``principal`` None: the service does not
    authenticate, nothing is checked. The owner may always act on their own job; anybody else
    needs an ACL (an operator's rule ``{"principals": ..., "users": {"type": "ANY"}}``)."""
    if principal is None or (owner is not None and principal == owner):
        return None
    d = acls.decide(action, principal, owner)
    if d.allowed:
        return None
    whose = f"{owner}'s job" if owner else "a job without an owner"
    return f"Forbidden: {principal} may not {what} {whose} ({d.reason})"


def priority_problem(acls: Acls, principal: str | None, owner: str | None, old: int, new: int) -> str | None:
    """Slurm's rule for a job's priority: anybody may lower it (submit below the default 0, or
    update it down); raising it (above 0 at submit, above its current value by an update) takes an
    operator, a principal an ACL grants ``manage_jobs`` on the owner - the owner alone is not
    enough, since priorities order (and preempt) other users' jobs too. Why not (answered
    ``403``), or None; ``principal`` None: the service does not authenticate, nothing is checked."""
    if principal is None or new <= old:
        return None
    d = acls.decide(Action.MANAGE_JOBS, principal, owner)
    if d.allowed:
        return None
    return f"Forbidden: priority: only an operator may raise a job's priority above {old} ({d.reason})"


def submit_problem(acls: Acls, principal: str | None, queue: str) -> str | None:
    """Why ``principal`` may not submit to ``queue`` (``submit_jobs``, once the file has such rules)."""
    if principal is None or not acls.enforces(Action.SUBMIT_JOBS):
        return None
    d = acls.decide(Action.SUBMIT_JOBS, principal, queue)
    return None if d.allowed else f"Forbidden: {principal} may not submit to queue {queue!r} ({d.reason})"


# --- what a principal may read (view_frameworks, view_tasks, access_sandboxes) ---------------------


def may_read(acls: Acls, action: Action, principal: str | None, user: str | None) -> bool:
    """May ``principal`` see (``view_*``) or read the sandbox of (``access_sandboxes``) something
    owned by ``user`` (a framework's or task's user; None: unknown, matched only by ANY rules)?"""
    return not acls.enforces(action) or acls.allows(action, principal, user)


def sandbox_problem(acls: Acls, principal: str | None, user: str | None) -> str | None:
    """Why ``principal`` may not read a sandbox of a task run as ``user`` (answered ``403``), or None."""
    if not acls.enforces(Action.ACCESS_SANDBOXES):
        return None
    d = acls.decide(Action.ACCESS_SANDBOXES, principal, user)
    return None if d.allowed else f"Forbidden: {d.reason}"


TASK_LISTS = ("tasks", "unreachable_tasks", "completed_tasks")


def filter_frameworks_json(
    acls: Acls, principal: str | None, frameworks: Sequence[Mapping[str, Any]], owners: Owners
) -> list[dict[str, Any]]:
    """``/state``'s ``frameworks`` (or ``completed_frameworks``) as ``principal`` may see them:
    frameworks whose ``user`` ``view_frameworks`` allows, and in each only the tasks whose user
    (``owners``, else the framework's) ``view_tasks`` allows."""
    out: list[dict[str, Any]] = []
    see_tasks = acls.enforces(Action.VIEW_TASKS)
    for fw in frameworks:
        fw_user = fw.get("user") or None
        if not may_read(acls, Action.VIEW_FRAMEWORKS, principal, fw_user):
            continue
        kept = dict(fw)
        if see_tasks:
            fid = str(fw.get("id", ""))
            for key in TASK_LISTS:
                kept[key] = [
                    t for t in fw.get(key, ())
                    if acls.allows(Action.VIEW_TASKS, principal, owners.task(fid, str(t.get("id", ""))) or fw_user)
                ]
        out.append(kept)
    return out


def filter_get_frameworks(acls: Acls, principal: str | None, got: mesos.GetFrameworks) -> mesos.GetFrameworks:
    """GET_FRAMEWORKS as ``principal`` may see it (``view_frameworks`` on ``FrameworkInfo.user``)."""
    def ok(info: mesos.FrameworkInfo) -> bool:
        return may_read(acls, Action.VIEW_FRAMEWORKS, principal, info.user or None)

    return attrs.evolve(
        got,
        frameworks=tuple(f for f in got.frameworks if ok(f.framework_info)),
        completed_frameworks=tuple(f for f in got.completed_frameworks if ok(f.framework_info)),
        recovered_frameworks=tuple(f for f in got.recovered_frameworks if ok(f)),
    )


@attrs.frozen
class Owners:
    """Whose things are whose, for the view filters: each framework's user and each task's
    (``task_user``: command, else executor, else framework), built by the shell from the state."""

    frameworks: Mapping[str, str | None] = attrs.field(factory=dict)
    tasks: Mapping[tuple[str, str], str | None] = attrs.field(factory=dict)

    def task(self, fid: str, tid: str, given: str | None = None) -> str | None:
        return given or self.tasks.get((fid, tid)) or self.frameworks.get(fid)


def filter_get_tasks(acls: Acls, principal: str | None, got: mesos.GetTasks, owners: Owners) -> mesos.GetTasks:
    """GET_TASKS as ``principal`` may see it (``view_tasks`` on each task's user)."""
    def ok(t: mesos.Task) -> bool:
        return may_read(acls, Action.VIEW_TASKS, principal, owners.task(t.framework_id.value, t.task_id.value, t.user))

    return attrs.evolve(
        got,
        pending_tasks=tuple(t for t in got.pending_tasks if may_read(acls, Action.VIEW_TASKS, principal, None)),
        tasks=tuple(t for t in got.tasks if ok(t)),
        unreachable_tasks=tuple(t for t in got.unreachable_tasks if ok(t)),
        completed_tasks=tuple(t for t in got.completed_tasks if ok(t)),
        orphan_tasks=tuple(t for t in got.orphan_tasks if ok(t)),
    )


def filter_operator_response(
    acls: Acls, principal: str | None, resp: mesos.OperatorResponse, owners: Owners
) -> mesos.OperatorResponse:
    """GET_FRAMEWORKS, GET_TASKS, GET_EXECUTORS and GET_STATE as ``principal`` may see them; any
    other response unchanged. Executors go with their framework (``view_frameworks``)."""
    if not (acls.enforces(Action.VIEW_FRAMEWORKS) or acls.enforces(Action.VIEW_TASKS)):
        return resp

    def executors(got: mesos.GetExecutors) -> mesos.GetExecutors:
        def ok(r: mesos.ExecutorRecord) -> bool:
            fid = r.executor_info.framework_id.value if r.executor_info.framework_id is not None else ""
            return may_read(acls, Action.VIEW_FRAMEWORKS, principal, owners.frameworks.get(fid))

        return attrs.evolve(got, executors=tuple(r for r in got.executors if ok(r)),
                            orphan_executors=tuple(r for r in got.orphan_executors if ok(r)))

    changes: dict[str, Any] = {}
    if resp.get_frameworks is not None:
        changes["get_frameworks"] = filter_get_frameworks(acls, principal, resp.get_frameworks)
    if resp.get_tasks is not None:
        changes["get_tasks"] = filter_get_tasks(acls, principal, resp.get_tasks, owners)
    if resp.get_executors is not None:
        changes["get_executors"] = executors(resp.get_executors)
    if resp.get_state is not None:
        st = resp.get_state
        changes["get_state"] = attrs.evolve(
            st,
            get_frameworks=filter_get_frameworks(acls, principal, st.get_frameworks) if st.get_frameworks else None,
            get_tasks=filter_get_tasks(acls, principal, st.get_tasks, owners) if st.get_tasks else None,
            get_executors=executors(st.get_executors) if st.get_executors else None,
        )
    return attrs.evolve(resp, **changes) if changes else resp
