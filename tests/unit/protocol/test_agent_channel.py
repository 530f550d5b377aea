"""The master <-> agent channel: every message round-trips through msgpack in a batched frame,
envelopes name their body, and malformed frames are a DecodeError."""

from __future__ import annotations

import msgpack
import pytest

from protocol import agent_channel as ac
from protocol.codec import DecodeError, decode_msgpack, encode_msgpack
from protocol.mesos import CommandInfo, FrameworkInfo, TaskInfo, TaskStatus
from protocol.mesos_common import AgentID, ExecutorID, FrameworkID, TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState

FID = FrameworkID("f-0000")
RES = Resources.parse("cpus:1;mem:128").to_mesos()


def _all_bodies() -> list[ac.Body]:
    status = TaskStatus(
        task_id=TaskID("t1"), state=TaskState.TASK_RUNNING, agent_id=AgentID("a-S0"), uuid=b"\x01" * 16
    )
    task = TaskInfo(name="t1", task_id=TaskID("t1"), resources=RES, command=CommandInfo(value="true"))
    return [
        ac.Register(
            hostname="h",
            port=5051,
            resources=RES,
            agent_id=AgentID("a-S0"),
            tasks=(ac.RunningTask(FID, TaskID("t1"), TaskState.TASK_RUNNING, RES, status=status),),
            frameworks=(FrameworkInfo(user="u", name="n", id=FID),),
        ),
        ac.StatusUpdateMsg(FID, status, latest_state=TaskState.TASK_FINISHED),
        ac.SlackEstimate(Resources.of(cpus=2, revocable=True).to_mesos()),
        ac.UsageReport((ac.TaskUsageEntry(FID, TaskID("t1"), 1.5, 1 << 20, 2 << 20, -1, 12.5),)),
        ac.ExecutorMessageMsg(FID, ExecutorID("e"), b"\x00\xff"),
        ac.ExecutorExited(FID, ExecutorID("e"), 137),
        ac.Pong(7),
        ac.Unregister("agent is retiring"),
        ac.Registered(AgentID("a-S0"), "m", 3, 1.0, 5.0),
        ac.Refused("agent id bound to another credential"),
        ac.RunTasks(FID, FrameworkInfo(user="u", name="n", id=FID), (task,)),
        ac.KillTask(FID, TaskID("t1"), grace_seconds=2.5),
        ac.AcknowledgeMsg(FID, TaskID("t1"), b"\x01" * 16),
        ac.Revoke(FID, (TaskID("t1"),), 5.0, "owner reclaimed"),
        ac.ShutdownFramework(FID),
        ac.ShutdownExecutor(FID, ExecutorID("e")),
        ac.FrameworkMessageMsg(FID, ExecutorID("e"), b"hi"),
        ac.Ping(7),
    ]


def test_every_message_type_has_a_body_class() -> None:
    bodies = _all_bodies()
    assert {ac.envelope(b).type for b in bodies} == set(ac.MessageType)


def test_batched_frame_round_trips_through_msgpack() -> None:
    frame = ac.frame(*_all_bodies(), epoch=4)
    data = encode_msgpack(frame)
    back = decode_msgpack(ac.Frame, data)
    assert back == frame
    assert [m.body() for m in back.messages] == _all_bodies()


def test_malformed_frames_are_decode_errors() -> None:
    with pytest.raises(DecodeError):
        decode_msgpack(ac.Frame, b"\xc1garbage")
    with pytest.raises(DecodeError):
        decode_msgpack(ac.Frame, msgpack.packb({"messages": [{"type": "NOPE"}]}))
    with pytest.raises(DecodeError):
        decode_msgpack(ac.Frame, msgpack.packb({"messages": [{"type": "PING", "ping": {"seq": "x"}}]}))


def test_register_with_no_resources_survives_encoding() -> None:
    frame = ac.frame(ac.Register(hostname="h", port=1))
    assert decode_msgpack(ac.Frame, encode_msgpack(frame)) == frame
