"""Agora's ACKNOWLEDGE_MANY: wire form (JSON and msgpack), structural validation, and the
master capability an older client ignores."""

from __future__ import annotations

import base64
import json

import pytest

from protocol import mesos as m
from protocol.codec import DecodeError, decode_json, decode_msgpack, encode_json, encode_msgpack
from protocol.mesos_common import AgentID, FrameworkID, TaskID
from protocol.task_states import TaskState

U = bytes(range(16))


def status(tid: str, uuid: bytes | None = U, agent: str | None = "a1") -> m.TaskStatus:
    return m.TaskStatus(
        task_id=TaskID(tid), state=TaskState.TASK_RUNNING, uuid=uuid, agent_id=AgentID(agent) if agent else None
    )


def test_wire_form_json_and_msgpack() -> None:
    call = m.Call.make_acknowledge_many(FrameworkID("f1"), [status("t1"), status("t2")])
    raw = json.loads(encode_json(call))
    entry = {"agent_id": {"value": "a1"}, "task_id": {"value": "t1"}, "uuid": base64.b64encode(U).decode()}
    assert raw == {
        "type": "ACKNOWLEDGE_MANY",
        "framework_id": {"value": "f1"},
        "acknowledge_many": {"acknowledgements": [entry, {**entry, "task_id": {"value": "t2"}}]},
    }
    assert decode_json(m.Call, encode_json(call)) == call
    assert decode_msgpack(m.Call, encode_msgpack(call)) == call
    assert m.validate_call(call) is None


def test_single_acknowledge_unchanged() -> None:
    call = m.Call.make_acknowledge(FrameworkID("f1"), status("t1"))
    raw = json.loads(encode_json(call))
    assert set(raw) == {"type", "framework_id", "acknowledge"} and raw["type"] == "ACKNOWLEDGE"


def test_builder_needs_uuid_and_agent() -> None:
    with pytest.raises(ValueError):
        m.Call.make_acknowledge_many(FrameworkID("f"), [status("t1"), status("t2", uuid=None)])
    with pytest.raises(ValueError):
        m.Call.make_acknowledge_many(FrameworkID("f"), [status("t1", agent=None)])


@pytest.mark.parametrize(
    ("acks", "problem"),
    [
        ((), "Expecting 'acknowledge_many.acknowledgements' to be non-empty"),
        (
            (m.Acknowledge(AgentID("a"), TaskID("t"), U), m.Acknowledge(AgentID("a"), TaskID("u"), b"short")),
            "Invalid UUID in 'acknowledge_many.acknowledgements[1].uuid': expected 16 bytes",
        ),
        (
            (m.Acknowledge(AgentID("a"), TaskID("t"), U),) * (m.MAX_ACKNOWLEDGEMENTS + 1),
            f"Too many entries in 'acknowledge_many.acknowledgements': {m.MAX_ACKNOWLEDGEMENTS + 1} > {m.MAX_ACKNOWLEDGEMENTS}",
        ),
    ],
)
def test_structural_validation(acks: tuple[m.Acknowledge, ...], problem: str) -> None:
    call = m.Call(type=m.CallType.ACKNOWLEDGE_MANY, framework_id=FrameworkID("f"), acknowledge_many=m.AcknowledgeMany(acks))
    assert m.validate_call(call) == problem


def test_body_required_and_entry_fields_required() -> None:
    call = m.Call(type=m.CallType.ACKNOWLEDGE_MANY, framework_id=FrameworkID("f"))
    assert m.validate_call(call) == "Expecting 'acknowledge_many' to be present"
    body = {
        "type": "ACKNOWLEDGE_MANY",
        "framework_id": {"value": "f"},
        "acknowledge_many": {"acknowledgements": [{"task_id": {"value": "t"}, "uuid": base64.b64encode(U).decode()}]},
    }
    with pytest.raises(DecodeError) as e:
        decode_json(m.Call, json.dumps(body).encode())
    assert str(e.value) == "acknowledge_many.acknowledgements[0]: missing required field 'agent_id'"


def test_capability_unknown_to_an_older_client_is_dropped() -> None:
    # a master_info as a newer master might send it: an unknown capability name is left out
    raw = {"id": "m", "ip": 1, "port": 5050, "capabilities": [{"type": "SOMETHING_NEWER"}, {"type": "ACKNOWLEDGE_MANY"}]}
    info = decode_json(m.MasterInfo, json.dumps(raw).encode())
    assert m.MasterCapability(type=m.MasterCapabilityType.ACKNOWLEDGE_MANY) in info.capabilities
