"""The JSON shapes of Mesos 1.11's master endpoints, written down from Mesos' own endpoint help and
the writers in ``src/master/readonly_handler.cpp``, ``src/master/http.cpp`` and
``src/common/http.cpp`` (what each writes always, what only when it is set), plus the keys Agora
adds (each documented in ``master/README.md``).

``check(obj, shape)`` asserts that an object has every key Mesos always writes, no key Mesos would
write only when set unless it is set (never ``null``), and nothing else but Agora's additions."""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class Shape:
    always: frozenset[str]
    when_set: frozenset[str] = frozenset()
    agora: frozenset[str] = frozenset()


def shape(always: str, when_set: str = "", agora: str = "") -> Shape:
    return Shape(frozenset(always.split()), frozenset(when_set.split()), frozenset(agora.split()))


def check(obj: dict[str, Any], s: Shape, what: str = "") -> None:
    keys = set(obj)
    missing = s.always - keys
    assert not missing, f"{what}: missing {sorted(missing)}"
    extra = keys - s.always - s.when_set - s.agora
    assert not extra, f"{what}: keys Mesos does not have {sorted(extra)}"
    nulls = sorted(k for k in keys if obj[k] is None and k not in s.agora)
    assert not nulls, f"{what}: null instead of left out: {nulls}"


# /state: the master (git_* only when built from git; cluster, log_dir, external_log_file only when
# set; domain only with a fault domain)
STATE = shape(
    "version build_date build_time build_user start_time elected_time id pid hostname capabilities "
    "activated_slaves deactivated_slaves unreachable_slaves leader leader_info flags slaves recovered_slaves "
    "frameworks completed_frameworks orphan_tasks unregistered_frameworks",
    "git_sha git_branch git_tag cluster log_dir external_log_file domain",
    "epoch unreachable_agents",
)
# json(MasterInfo)
LEADER_INFO = shape("id pid port hostname", "domain")
# SlaveWriter (registered agents in /state, /slaves)
AGENT = shape(
    "id hostname port attributes pid registered_time resources used_resources offered_resources "
    "reserved_resources unreserved_resources active deactivated version capabilities",
    "reregistered_time domain drain_info",
    "revocable_resources draining drain_reason phase unavailability",
)
# /slaves adds the full Resource lists
AGENT_FULL = attrs.evolve(AGENT, always=AGENT.always | frozenset(
    ["reserved_resources_full", "unreserved_resources_full", "used_resources_full", "offered_resources_full"]))
# json(SlaveInfo) for recovered agents
RECOVERED_AGENT = shape("id hostname port attributes", "domain")
# FullFrameworkWriter (Summary<Framework> + the rest); pid only for driver-based (PID) frameworks,
# role for frameworks without MULTI_ROLE, roles with it
FRAMEWORK = shape(
    "id name used_resources offered_resources capabilities hostname webui_url active connected recovered "
    "user failover_timeout checkpoint registered_time unregistered_time resources tasks unreachable_tasks "
    "completed_tasks offers executors",
    "pid principal reregistered_time role roles labels",
    "offers_reason",
)
# json(Task)
TASK = shape(
    "id name framework_id executor_id slave_id state resources role statuses",
    "limits user labels discovery container health_check",
    "usage",
)
# json(TaskStatus)
STATUS = shape("state timestamp", "labels container_status healthy", "message reason")
# json(Offer)
OFFER = shape("id framework_id allocation_info slave_id resources")
# json(ExecutorInfo) + slave_id
EXECUTOR = shape("executor_id name framework_id command resources slave_id", "role labels type")
# /frameworks
FRAMEWORKS = shape("frameworks completed_frameworks unregistered_frameworks")
# /slaves
SLAVES = shape("slaves recovered_slaves")
# /tasks
TASKS = shape("tasks")
# /roles: {"roles": [...]}; each role (quota only when the role has one)
ROLES = shape("roles")
ROLE = shape("name weight resources frameworks", "quota")
ROLE_QUOTA = shape("role guarantee limit")
# /flags
FLAGS = shape("flags")
# /weights: a JSON array of WeightInfo
WEIGHT = shape("weight role")
# /quota: QuotaStatus as protobuf JSON (repeated fields left out when empty)
QUOTA_STATUS = shape("", "infos configs")
# /files/read
FILE_READ = shape("data offset")
# /files/browse: FileInfo
FILE_INFO = shape("path nlink size mtime mode uid gid")
# /maintenance/schedule: Schedule; each window; each machine id
SCHEDULE = shape("", "windows")
WINDOW = shape("machine_ids unavailability")
MACHINE_ID = shape("", "hostname ip")
# /maintenance/status: ClusterStatus
CLUSTER_STATUS = shape("", "draining_machines down_machines")
DRAINING_MACHINE = shape("id", "statuses")
# each framework's answer in a draining machine's statuses (InverseOfferStatus)
INVERSE_OFFER_STATUS = shape("status framework_id timestamp")
# Unavailability (offers and inverse offers of a draining machine's agents; duration when set)
UNAVAILABILITY = shape("start", "duration")
# InverseOffer (v1 scheduler INVERSE_OFFERS event, GET_FRAMEWORKS); resources left out when empty
# (they mean the whole agent)
INVERSE_OFFER = shape("id framework_id unavailability", "url agent_id resources")


def check_schedule(schedule: dict[str, Any]) -> None:
    check(schedule, SCHEDULE, "Schedule")
    for w in schedule.get("windows", []):
        check(w, WINDOW, "Schedule.windows[]")
        check(w["unavailability"], UNAVAILABILITY, "Window.unavailability")
        for m in w["machine_ids"]:
            check(m, MACHINE_ID, "Window.machine_ids[]")


def check_cluster_status(status: dict[str, Any]) -> None:
    check(status, CLUSTER_STATUS, "ClusterStatus")
    for d in status.get("draining_machines", []):
        check(d, DRAINING_MACHINE, "draining_machines[]")
        check(d["id"], MACHINE_ID, "draining_machines[].id")
        for st in d.get("statuses", []):
            check(st, INVERSE_OFFER_STATUS, "draining_machines[].statuses[]")
    for m in status.get("down_machines", []):
        check(m, MACHINE_ID, "down_machines[]")


def check_state(state: dict[str, Any]) -> None:
    """``/state`` and everything in it."""
    check(state, STATE, "/state")
    check(state["leader_info"], LEADER_INFO, "leader_info")
    for a in state["slaves"]:
        check(a, AGENT, "slaves[]")
    for a in state["recovered_slaves"]:
        check(a, RECOVERED_AGENT, "recovered_slaves[]")
    for f in state["frameworks"] + state["completed_frameworks"]:
        check_framework(f)


def check_framework(f: dict[str, Any]) -> None:
    check(f, FRAMEWORK, "framework")
    assert ("role" in f) != ("roles" in f), "a framework has role or roles, not both"
    for key in ("tasks", "unreachable_tasks", "completed_tasks"):
        for t in f[key]:
            check_task(t)
    for o in f["offers"]:
        check(o, OFFER, "offer")
    for e in f["executors"]:
        check(e, EXECUTOR, "executor")


def check_task(t: dict[str, Any]) -> None:
    check(t, TASK, "task")
    for s in t["statuses"]:
        check(s, STATUS, "status")
