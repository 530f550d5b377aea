"""Literal Mesos JSON (as Mesos, pymesos and mesoshttp write it) decodes into protocol.mesos and encodes back equal."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest

from protocol import mesos as m
from protocol.codec import DecodeError, decode_json, decode_msgpack, encode_json, encode_msgpack
from protocol.task_states import TaskState

UUID16 = uuid.UUID("7e1f1c2a-9a4b-4c8e-8d3f-0123456789ab").bytes
UUID_B64 = base64.b64encode(UUID16).decode()

RESOURCE_EXAMPLE: dict[str, Any] = {
    "name": "cpus",
    "type": "SCALAR",
    "scalar": {"value": 4.0},
    "role": "*",
    "allocation_info": {"role": "*"},
    "reservations": [{"type": "DYNAMIC", "role": "eng", "principal": "p", "labels": {"labels": []}}],
    "revocable": {},
    "disk": {"persistence": {"id": "v1", "principal": "p"}, "volume": {"container_path": "data", "mode": "RW"}},
    "shared": {},
    "provider_id": {"value": "rp1"},
}

SUBSCRIBED_RECORD = (  # as sent by the fake master
    '{"type":"SUBSCRIBED","subscribed":{"framework_id":{"value":"f0f0-0000"},"heartbeat_interval_seconds":15.0,'
    '"master_info":{"id":"5a4c1b2e","ip":16777343,"port":5050,"pid":"master@127.0.0.1:5050","hostname":"localhost",'
    '"version":"1.11.0","address":{"hostname":"localhost","ip":"127.0.0.1","port":5050}}}}'
)

OFFER_EXAMPLE: dict[str, Any] = {  # with RESOURCE_EXAMPLE and one attribute of each kind
    "id": {"value": "o-1"},
    "framework_id": {"value": "f-1"},
    "agent_id": {"value": "a-S0"},
    "hostname": "agent-host",
    "url": {"scheme": "http", "address": {"hostname": "agent-host", "ip": "10.0.0.5", "port": 5051}, "path": "/slave(1)"},
    "resources": [
        RESOURCE_EXAMPLE,
        {"name": "mem", "type": "SCALAR", "scalar": {"value": 4096}, "role": "*"},
        {"name": "ports", "type": "RANGES", "ranges": {"range": [{"begin": 31000, "end": 32000}]}},
        {"name": "zones", "type": "SET", "set": {"item": ["a", "b"]}},
    ],
    "attributes": [
        {"name": "rack", "type": "TEXT", "text": {"value": "r1"}},
        {"name": "level", "type": "SCALAR", "scalar": {"value": 2}},
    ],
    "executor_ids": [{"value": "e-1"}],
    "allocation_info": {"role": "*"},
    "unavailability": {"start": {"nanoseconds": 0}, "duration": {"nanoseconds": 0}},
    "domain": {"fault_domain": {"region": {"name": "r"}, "zone": {"name": "z"}}},
}

TASKINFO_EXAMPLE: dict[str, Any] = {  # as pymesos launches one
    "task_id": {"value": "task-1"},
    "agent_id": {"value": "a-S0"},
    "name": "task-1",
    "command": {"value": "echo hello"},
    "data": base64.b64encode(b"payload").decode(),
    "resources": [
        {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
        {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}},
    ],
}

TASKSTATUS_EXAMPLE: dict[str, Any] = {
    "task_id": {"value": "t1"},
    "state": "TASK_RUNNING",
    "source": "SOURCE_EXECUTOR",
    "reason": "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED",
    "message": "running",
    "data": "cGF5bG9hZA==",
    "agent_id": {"value": "a-S0"},
    "executor_id": {"value": "e-1"},
    "timestamp": 1700000000.123,
    "uuid": UUID_B64,
    "healthy": True,
    "container_status": {
        "container_id": {"value": "c-1"},
        "network_infos": [{"ip_addresses": [{"protocol": "IPv4", "ip_address": "10.0.0.7"}], "name": "net"}],
    },
    "labels": {"labels": [{"key": "k", "value": "v"}]},
}

PYMESOS_SUBSCRIBE = (  # pymesos 0.3.15, exact bytes (json.dumps default separators)
    b'{"type": "SUBSCRIBE", "subscribe": {"framework_info": {"user": "nobody", "name": "compat-test", '
    b'"hostname": "localhost", "roles": ["*"], "capabilities": [{"type": "MULTI_ROLE"}, {"type": "GPU_RESOURCES"}], '
    b'"failover_timeout": 100}}}'
)

MESOSHTTP_SUBSCRIBE: dict[str, Any] = {  # mesoshttp, with the optional parts present
    "type": "SUBSCRIBE",
    "subscribe": {
        "framework_info": {
            "user": "root",
            "name": "mh",
            "hostname": "",
            "webui_url": "",
            "role": "eng",
            "capabilities": [{"type": "REVOCABLE_RESOURCES"}],
            "failover_timeout": 60,
            "principal": "p",
            "id": {"value": "f-2"},
        },
        "credentials": [{"principal": "p", "secret": "s"}],
    },
    "framework_id": {"value": "f-2"},
}


def drop_empty(value: Any) -> Any:
    """Mesos (stout) never writes empty repeated fields; the doc examples sometimes show them."""
    if isinstance(value, dict):
        return {k: drop_empty(v) for k, v in value.items() if v != []}
    if isinstance(value, list):
        return [drop_empty(v) for v in value]
    return value


def round_trip(cls: type, doc: Any, ignored: tuple[str, ...] = ()) -> Any:
    raw = json.dumps(doc).encode() if not isinstance(doc, (bytes, str)) else doc
    obj: Any = decode_json(cls, raw)
    out = encode_json(obj)
    assert out.isascii() and b"\n" not in out
    expected = json.loads(raw)
    for key in ignored:
        expected = _remove(expected, key.split("."))
    assert json.loads(out) == drop_empty(expected)
    assert decode_msgpack(cls, encode_msgpack(obj)) == obj
    assert decode_json(cls, out) == obj
    return obj


def _remove(doc: Any, path: list[str]) -> Any:
    if isinstance(doc, list):
        return [_remove(d, path) for d in doc]
    doc = dict(doc)
    if len(path) == 1:
        doc.pop(path[0], None)
    elif path[0] in doc:
        doc[path[0]] = _remove(doc[path[0]], path[1:])
    return doc


def test_subscribed_record() -> None:
    ev = round_trip(m.Event, SUBSCRIBED_RECORD)
    assert ev.type is m.EventType.SUBSCRIBED
    assert ev.subscribed.framework_id == m.FrameworkID("f0f0-0000")
    assert ev.subscribed.master_info.ip == 16777343
    assert ev.subscribed.master_info.address == m.Address(port=5050, hostname="localhost", ip="127.0.0.1")
    built = m.Event.make_subscribed(m.FrameworkID("f0f0-0000"), ev.subscribed.master_info)
    assert encode_json(built) == SUBSCRIBED_RECORD.encode()


def test_offer() -> None:
    offer = round_trip(m.Offer, OFFER_EXAMPLE)
    r = offer.resources[0]
    assert r.revocable == m.RevocableInfo() and r.shared == m.SharedInfo()
    assert r.reservations[0].type is m.ReservationType.DYNAMIC
    assert r.disk.volume.mode is m.VolumeMode.RW
    assert offer.resources[1].scalar == m.Scalar(4096.0)
    assert offer.url.address.port == 5051
    ev = round_trip(m.Event, {"type": "OFFERS", "offers": {"offers": [OFFER_EXAMPLE, OFFER_EXAMPLE]}})
    assert len(ev.offers.offers) == 2


def test_taskinfo_and_accept() -> None:
    task = round_trip(m.TaskInfo, TASKINFO_EXAMPLE)
    assert task.data == b"payload" and task.command.value == "echo hello"
    accept = {
        "type": "ACCEPT",
        "framework_id": {"value": "f-1"},
        "accept": {
            "offer_ids": [{"value": "o-1"}],
            "operations": [{"type": "LAUNCH", "launch": {"task_infos": [TASKINFO_EXAMPLE]}}],
            "filters": {"refuse_seconds": 5},
        },
    }
    call = round_trip(m.Call, accept)
    assert call.accept.operations[0] == m.Operation.make_launch(task)
    assert m.validate_call(call) is None


def test_mesoshttp_taskinfo_with_slave_id() -> None:
    doc = dict(TASKINFO_EXAMPLE)
    del doc["agent_id"]
    doc["slave_id"] = {"value": "a-S0"}
    task = round_trip(m.TaskInfo, doc, ignored=("slave_id",))
    assert task.agent_id is None


def test_taskstatus() -> None:
    status = round_trip(m.TaskStatus, TASKSTATUS_EXAMPLE)
    assert status.state is TaskState.TASK_RUNNING
    assert status.source is m.Source.SOURCE_EXECUTOR
    assert status.uuid == UUID16 and status.data == b"payload"
    assert status.container_status.network_infos[0].ip_addresses[0].protocol is m.IPProtocol.IPv4
    ev = round_trip(m.Event, {"type": "UPDATE", "update": {"status": TASKSTATUS_EXAMPLE}})
    assert ev == m.Event.make_update(status)
    ack = m.Call.make_acknowledge(m.FrameworkID("f-1"), status)
    assert json.loads(encode_json(ack))["acknowledge"] == {
        "agent_id": {"value": "a-S0"},
        "task_id": {"value": "t1"},
        "uuid": UUID_B64,
    }
    assert m.validate_call(ack) is None


def test_unknown_reason_is_dropped_unknown_state_is_an_error() -> None:
    doc = {**TASKSTATUS_EXAMPLE, "reason": "REASON_FROM_THE_FUTURE"}
    assert decode_json(m.TaskStatus, json.dumps(doc)).reason is None
    with pytest.raises(DecodeError) as e:
        decode_json(m.TaskStatus, json.dumps({**TASKSTATUS_EXAMPLE, "state": "TASK_PONDERING"}))
    assert e.value.path == "state"


def test_pymesos_subscribe() -> None:
    call = round_trip(m.Call, PYMESOS_SUBSCRIBE)
    info = call.subscribe.framework_info
    assert info.effective_roles() == ("*",)
    assert info.has_capability(m.CapabilityType.GPU_RESOURCES)
    assert info.failover_timeout == 100.0
    assert m.validate_call(call) is None


def test_mesoshttp_subscribe_with_credentials() -> None:
    call = round_trip(m.Call, MESOSHTTP_SUBSCRIBE, ignored=("subscribe.credentials",))
    assert call.subscribe.framework_info.hostname == ""
    assert call.subscribe.framework_info.effective_roles() == ("eng",)
    assert m.validate_call(call) is None


def test_mesoshttp_request_with_top_level_requests() -> None:
    doc = {
        "type": "REQUEST",
        "framework_id": {"value": "f-1"},
        "requests": [{"agent_id": {"value": "a"}, "resources": [TASKINFO_EXAMPLE["resources"][0]]}],
    }
    call = round_trip(m.Call, doc)
    assert m.validate_call(call) is None
    assert call.all_requests()[0].agent_id == m.AgentID("a")


def test_agora_request_extension() -> None:
    doc = {
        "type": "REQUEST",
        "framework_id": {"value": "f-1"},
        "request": {
            "requests": [
                {
                    "resources": [{"name": "gpus", "type": "SCALAR", "scalar": {"value": 1}}],
                    "count": 8,
                    "gang_id": "job-7",
                    "gang_min": 4,
                    "revocable_ok": False,
                    "priority": 10,
                    "role": "ml",
                    "ports": 3,
                }
            ]
        },
    }
    call = round_trip(m.Call, doc)
    (req,) = call.all_requests()
    assert (req.count, req.gang_id, req.gang_min, req.revocable_ok, req.priority, req.role, req.ports) == (
        8,
        "job-7",
        4,
        False,
        10,
        "ml",
        3,
    )


def test_other_calls() -> None:
    fid = {"value": "f-1"}
    docs = [
        {"type": "TEARDOWN", "framework_id": fid},
        {"type": "DECLINE", "framework_id": fid, "decline": {"offer_ids": [{"value": "o"}], "filters": {"refuse_seconds": 1.5}}},
        {"type": "REVIVE", "framework_id": fid, "revive": {"roles": ["a"]}},
        {"type": "SUPPRESS", "framework_id": fid},
        {"type": "KILL", "framework_id": fid, "kill": {"task_id": {"value": "t"}}},
        {"type": "SHUTDOWN", "framework_id": fid, "shutdown": {"executor_id": {"value": "e"}, "agent_id": {"value": "a"}}},
        {"type": "RECONCILE", "framework_id": fid, "reconcile": {"tasks": [{"task_id": {"value": "t"}}]}},
        {"type": "RECONCILE", "framework_id": fid, "reconcile": {}},
        {"type": "MESSAGE", "framework_id": fid, "message": {"agent_id": {"value": "a"}, "executor_id": {"value": "e"}, "data": "aGk="}},
        {
            "type": "ACKNOWLEDGE_OPERATION_STATUS",
            "framework_id": fid,
            "acknowledge_operation_status": {"uuid": UUID_B64, "operation_id": {"value": "op"}},
        },
        {"type": "RECONCILE_OPERATIONS", "framework_id": fid, "reconcile_operations": {"operations": [{"operation_id": {"value": "op"}}]}},
        {"type": "ACCEPT_INVERSE_OFFERS", "framework_id": fid, "accept_inverse_offers": {"inverse_offer_ids": [{"value": "i"}]}},
        {"type": "DECLINE_INVERSE_OFFERS", "framework_id": fid, "decline_inverse_offers": {"inverse_offer_ids": [{"value": "i"}]}},
        {
            "type": "UPDATE_FRAMEWORK",
            "framework_id": fid,
            "update_framework": {"framework_info": {"user": "u", "name": "n", "id": fid}},
        },
    ]
    for doc in docs:
        call = round_trip(m.Call, doc)
        assert m.validate_call(call) is None, doc


def test_operations() -> None:
    vol = {
        "name": "disk",
        "type": "SCALAR",
        "scalar": {"value": 100},
        "disk": {"persistence": {"id": "v"}, "volume": {"container_path": "d", "mode": "RW"}},
    }
    ops = [
        {
            "type": "LAUNCH_GROUP",
            "launch_group": {
                "executor": {"executor_id": {"value": "e"}, "type": "DEFAULT", "shutdown_grace_period": {"nanoseconds": 5}},
                "task_group": {"tasks": [TASKINFO_EXAMPLE]},
            },
        },
        {"type": "RESERVE", "reserve": {"resources": [RESOURCE_EXAMPLE], "source": [RESOURCE_EXAMPLE]}},
        {"type": "UNRESERVE", "unreserve": {"resources": [RESOURCE_EXAMPLE]}},
        {"type": "CREATE", "id": {"value": "op1"}, "create": {"volumes": [vol]}},
        {"type": "DESTROY", "destroy": {"volumes": [vol]}},
    ]
    for op in ops:
        round_trip(m.Operation, op)


def test_full_taskinfo() -> None:
    doc = {
        "name": "t",
        "task_id": {"value": "t"},
        "agent_id": {"value": "a"},
        "executor": {
            "executor_id": {"value": "e"},
            "framework_id": {"value": "f"},
            "type": "CUSTOM",
            "command": {
                "value": "./exec",
                "shell": False,
                "arguments": ["./exec", "--x"],
                "environment": {"variables": [{"name": "A", "value": "1", "type": "VALUE"}]},
                "uris": [{"value": "http://x/y.tgz", "extract": True, "executable": False, "cache": True, "output_file": "y"}],
                "user": "nobody",
            },
            "data": "AAE=",
        },
        "container": {
            "type": "DOCKER",
            "docker": {"image": "busybox", "network": "BRIDGE", "port_mappings": [{"host_port": 31000, "container_port": 80}]},
            "volumes": [{"container_path": "/d", "host_path": "/h", "mode": "RO"}],
        },
        "health_check": {"type": "HTTP", "http": {"port": 80, "path": "/h", "statuses": [200]}, "interval_seconds": 10},
        "check": {"type": "TCP", "tcp": {"port": 80}},
        "kill_policy": {"grace_period": {"nanoseconds": 3000000000}},
        "labels": {"labels": [{"key": "k"}]},
        "discovery": {"visibility": "FRAMEWORK", "ports": {"ports": [{"number": 80, "protocol": "tcp"}]}},
        "max_completion_time": {"nanoseconds": 10},
        "limits": {"cpus": {"value": 2}},
    }
    t = round_trip(m.TaskInfo, doc)
    assert t.executor.command.environment.as_dict() == {"A": "1"}
    assert t.container.docker.network is m.DockerNetwork.BRIDGE


def test_other_events() -> None:
    docs = [
        {"type": "HEARTBEAT"},
        {"type": "RESCIND", "rescind": {"offer_id": {"value": "o"}}},
        {"type": "RESCIND_INVERSE_OFFER", "rescind_inverse_offer": {"inverse_offer_id": {"value": "o"}}},
        {
            "type": "INVERSE_OFFERS",
            "inverse_offers": {
                "inverse_offers": [
                    {"id": {"value": "i"}, "framework_id": {"value": "f"}, "unavailability": {"start": {"nanoseconds": 1}}}
                ]
            },
        },
        {"type": "MESSAGE", "message": {"agent_id": {"value": "a"}, "executor_id": {"value": "e"}, "data": "aGk="}},
        {"type": "FAILURE", "failure": {"agent_id": {"value": "a"}}},
        {"type": "FAILURE", "failure": {"agent_id": {"value": "a"}, "executor_id": {"value": "e"}, "status": 137}},
        {"type": "ERROR", "error": {"message": "Framework has been removed"}},
        {
            "type": "UPDATE_OPERATION_STATUS",
            "update_operation_status": {
                "status": {"operation_id": {"value": "op"}, "state": "OPERATION_FINISHED", "uuid": {"value": UUID_B64}}
            },
        },
    ]
    for doc in docs:
        round_trip(m.Event, doc)
    assert encode_json(m.Event.make_heartbeat()) == b'{"type":"HEARTBEAT"}'


def test_executor_subscribe_and_update() -> None:
    sub = {  # pymesos executor
        "type": "SUBSCRIBE",
        "framework_id": {"value": "F"},
        "executor_id": {"value": "E"},
        "subscribe": {"unacknowledged_tasks": [TASKINFO_EXAMPLE], "unacknowledged_updates": []},
    }
    call = round_trip(m.ExecutorCall, sub)
    assert m.validate_executor_call(call) is None
    upd = {
        "type": "UPDATE",
        "executor_id": {"value": "E"},
        "framework_id": {"value": "F"},
        "update": {
            "status": {
                "task_id": {"value": "t"},
                "state": "TASK_RUNNING",
                "timestamp": 1795332284,
                "uuid": UUID_B64,
                "source": "SOURCE_EXECUTOR",
            }
        },
    }
    call = round_trip(m.ExecutorCall, upd)
    assert call.update.status.timestamp == 1795332284.0
    assert m.validate_executor_call(call) is None
    msg = {"type": "MESSAGE", "executor_id": {"value": "E"}, "framework_id": {"value": "F"}, "message": {"data": "aGk="}}
    assert m.validate_executor_call(round_trip(m.ExecutorCall, msg)) is None
    bad = m.ExecutorCall(m.ExecutorID("E"), m.FrameworkID("F"), m.ExecutorCallType.UPDATE)
    assert m.validate_executor_call(bad) == "Expecting 'update' to be present"


def test_executor_events() -> None:
    subscribed = {
        "type": "SUBSCRIBED",
        "subscribed": {
            "executor_info": {"executor_id": {"value": "E"}, "framework_id": {"value": "F"}},
            "framework_info": {"user": "u", "name": "n", "id": {"value": "F"}},
            "agent_info": {"hostname": "h", "port": 5051, "id": {"value": "a"}},
            "container_id": {"value": "c"},
        },
    }
    ev = round_trip(m.ExecutorEvent, subscribed)
    assert json.loads(encode_json(ev))["subscribed"]["executor_info"]["executor_id"] == {"value": "E"}
    docs = [
        {"type": "LAUNCH", "launch": {"task": TASKINFO_EXAMPLE}},
        {"type": "LAUNCH_GROUP", "launch_group": {"task_group": {"tasks": [TASKINFO_EXAMPLE]}}},
        {"type": "KILL", "kill": {"task_id": {"value": "t"}, "kill_policy": {"grace_period": {"nanoseconds": 1}}}},
        {"type": "ACKNOWLEDGED", "acknowledged": {"task_id": {"value": "t"}, "uuid": UUID_B64}},
        {"type": "MESSAGE", "message": {"data": "aGk="}},
        {"type": "SHUTDOWN"},
        {"type": "ERROR", "error": {"message": "x"}},
        {"type": "HEARTBEAT"},
    ]
    for doc in docs:
        round_trip(m.ExecutorEvent, doc)


def test_operator_calls_and_responses() -> None:
    for t in ("GET_STATE", "GET_AGENTS", "GET_FRAMEWORKS", "GET_TASKS", "GET_EXECUTORS", "GET_HEALTH", "GET_VERSION",
              "GET_MASTER", "GET_METRICS", "GET_ROLES", "GET_QUOTA", "GET_WEIGHTS"):  # fmt: skip
        call = round_trip(m.OperatorCall, {"type": t})
        assert m.validate_operator_call(call) is None
    call = round_trip(
        m.OperatorCall,
        {"type": "UPDATE_QUOTA", "update_quota": {"quota_configs": [{"role": "ml", "guarantees": {"cpus": {"value": 4}}, "limits": {"gpus": {"value": 2}}}]}},
    )
    assert call.update_quota.quota_configs[0].limits == {"gpus": m.Scalar(2.0)}
    round_trip(m.OperatorCall, {"type": "UPDATE_WEIGHTS", "update_weights": {"weight_infos": [{"weight": 2, "role": "ml"}]}})
    round_trip(m.OperatorCall, {"type": "DRAIN_AGENT", "drain_agent": {"agent_id": {"value": "a"}, "mark_gone": True}})
    assert m.validate_operator_call(m.OperatorCall(type=m.OperatorCallType.DRAIN_AGENT)) == "Expecting 'drain_agent' to be present"

    task = {
        "name": "t",
        "task_id": {"value": "t"},
        "framework_id": {"value": "f"},
        "agent_id": {"value": "a"},
        "state": "TASK_FINISHED",
        "statuses": [TASKSTATUS_EXAMPLE],
        "status_update_state": "TASK_FINISHED",
        "status_update_uuid": UUID_B64,
        "user": "u",
    }
    state = {
        "type": "GET_STATE",
        "get_state": {
            "get_tasks": {"tasks": [task], "completed_tasks": [task], "pending_tasks": [TASKINFO_EXAMPLE]},
            "get_executors": {"executors": [{"executor_info": {"executor_id": {"value": "e"}}, "agent_id": {"value": "a"}}]},
            "get_frameworks": {
                "frameworks": [
                    {
                        "framework_info": {"user": "u", "name": "n", "id": {"value": "f"}},
                        "active": True,
                        "connected": True,
                        "recovered": False,
                        "registered_time": {"nanoseconds": 1},
                        "offers": [OFFER_EXAMPLE],
                        "allocated_resources": [RESOURCE_EXAMPLE],
                    }
                ]
            },
            "get_agents": {
                "agents": [
                    {
                        "agent_info": {"hostname": "h", "id": {"value": "a"}, "resources": [RESOURCE_EXAMPLE]},
                        "active": True,
                        "deactivated": False,
                        "version": "1.11.0",
                        "pid": "slave(1)@127.0.0.1:5051",
                        "capabilities": [{"type": "MULTI_ROLE"}],
                        "drain_info": {"state": "DRAINING", "config": {"mark_gone": False}},
                    }
                ]
            },
        },
    }
    resp = round_trip(m.OperatorResponse, state)
    assert resp.get_state.get_tasks.tasks[0].status_update_uuid == UUID16
    others = [
        {"type": "GET_HEALTH", "get_health": {"healthy": True}},
        {"type": "GET_VERSION", "get_version": {"version_info": {"version": "1.11.0", "build_time": 1.5, "git_sha": "abc"}}},
        {"type": "GET_MASTER", "get_master": {"master_info": json.loads(SUBSCRIBED_RECORD)["subscribed"]["master_info"], "start_time": 1.0}},
        {"type": "GET_METRICS", "get_metrics": {"metrics": [{"name": "master/elected", "value": 1}]}},
        {"type": "GET_ROLES", "get_roles": {"roles": [{"name": "ml", "weight": 1, "frameworks": [{"value": "f"}], "quota": {"limit": {"cpus": {"value": 1}}}}]}},
        {"type": "GET_WEIGHTS", "get_weights": {"weight_infos": [{"weight": 1.5, "role": "ml"}]}},
        {"type": "GET_QUOTA", "get_quota": {"status": {"configs": [{"role": "ml"}]}}},
        {"type": "GET_FLAGS", "get_flags": {"flags": [{"name": "port", "value": "5050"}]}},
    ]
    for doc in others:
        round_trip(m.OperatorResponse, doc)


def test_non_ascii_hostname_encodes_to_ascii_single_line() -> None:
    doc = {**OFFER_EXAMPLE, "hostname": "agënt-höst\u2603"}
    offer = decode_json(m.Offer, json.dumps(doc, ensure_ascii=False).encode("utf-8"))
    raw = encode_json(m.Event.make_offers((offer,)))
    assert raw.isascii() and b"\n" not in raw and b"\\u00eb" in raw
    ev: Any = decode_json(m.Event, raw)
    assert ev.offers.offers[0].hostname == "agënt-höst\u2603"


# --- validation ----------------------------------------------------------------------------


def call_json(doc: dict[str, Any]) -> m.Call:
    return decode_json(m.Call, json.dumps(doc))


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({}, "Expecting 'type' to be present"),
        ({"type": "NOT_A_CALL"}, "Expecting 'type' to be present"),
        ({"type": "SUBSCRIBE"}, "Expecting 'subscribe' to be present"),
        (
            {"type": "SUBSCRIBE", "framework_id": {"value": "x"}, "subscribe": {"framework_info": {"user": "u", "name": "n"}}},
            "'framework_id' differs from 'subscribe.framework_info.id'",
        ),
        (
            {"type": "SUBSCRIBE", "subscribe": {"framework_info": {"user": "u", "name": "n", "id": {"value": "x"}}}},
            "'framework_id' differs from 'subscribe.framework_info.id'",
        ),
        ({"type": "ACCEPT", "accept": {}}, "Expecting 'framework_id' to be present"),
        ({"type": "ACCEPT", "framework_id": {"value": "f"}}, "Expecting 'accept' to be present"),
        ({"type": "REQUEST", "framework_id": {"value": "f"}}, "Expecting 'request' to be present"),
        (
            {"type": "ACKNOWLEDGE", "framework_id": {"value": "f"}, "acknowledge": {"agent_id": {"value": "a"}, "task_id": {"value": "t"}, "uuid": "AAAA"}},
            "Invalid UUID in 'acknowledge.uuid': expected 16 bytes",
        ),
    ],
)
def test_validate_call_rejects(doc: dict[str, Any], message: str) -> None:
    assert m.validate_call(call_json(doc)) == message


def test_validate_call_accepts_bodyless_calls() -> None:
    for t in ("TEARDOWN", "REVIVE", "SUPPRESS"):
        assert m.validate_call(call_json({"type": t, "framework_id": {"value": "f"}})) is None
    resub = {
        "type": "SUBSCRIBE",
        "framework_id": {"value": "x"},
        "subscribe": {"framework_info": {"user": "u", "name": "n", "id": {"value": "x"}}},
    }
    assert m.validate_call(call_json(resub)) is None


def test_required_field_missing_names_the_path() -> None:
    doc = {
        "type": "ACCEPT",
        "framework_id": {"value": "f"},
        "accept": {"operations": [{"type": "LAUNCH", "launch": {"task_infos": [TASKINFO_EXAMPLE, {"name": "x"}]}}]},
    }
    with pytest.raises(DecodeError) as e:
        call_json(doc)
    assert e.value.path == "accept.operations[0].launch.task_infos[1]"
    assert "task_id" in e.value.reason
    doc["accept"]["operations"][0]["launch"]["task_infos"][1] = {"name": "x", "task_id": {"value": 5}}  # type: ignore[index]
    with pytest.raises(DecodeError) as e:
        call_json(doc)
    assert e.value.path == "accept.operations[0].launch.task_infos[1].task_id.value"


def test_builders() -> None:
    info = m.FrameworkInfo(user="u", name="n", capabilities=(m.Capability(m.CapabilityType.REUSABLE_OFFERS),))
    sub = m.Call.make_subscribe(info)
    assert m.validate_call(sub) is None and sub.framework_id is None
    assert json.loads(encode_json(sub))["subscribe"]["framework_info"]["capabilities"] == [{"type": "REUSABLE_OFFERS"}]
    fid = m.FrameworkID("f")
    for call in (
        m.Call.make_teardown(fid),
        m.Call.make_accept(fid, (m.OfferID("o"),), (m.Operation.make_launch(),)),
        m.Call.make_decline(fid, (m.OfferID("o"),), m.Filters(1.0)),
        m.Call.make_revive(fid),
        m.Call.make_suppress(fid, ("a",)),
        m.Call.make_kill(fid, m.TaskID("t")),
        m.Call.make_shutdown(fid, m.ExecutorID("e"), m.AgentID("a")),
        m.Call.make_reconcile(fid),
        m.Call.make_message(fid, m.AgentID("a"), m.ExecutorID("e"), b"x"),
        m.Call.make_request(fid, (m.Request(count=2),)),
    ):
        assert m.validate_call(call) is None, call
        assert decode_json(m.Call, encode_json(call)) == call
    assert m.Filters().effective_refuse_seconds() == 5.0
    assert m.Filters(-1).effective_refuse_seconds() == 5.0
    assert m.Filters(1e12).effective_refuse_seconds() == 365 * 86400.0
    with pytest.raises(ValueError):
        m.Call.make_acknowledge(fid, m.TaskStatus(m.TaskID("t"), TaskState.TASK_RUNNING))
