"""The driver coalesces acknowledgements into ACKNOWLEDGE_MANY when the master advertises it,
and falls back to one ACKNOWLEDGE per update when it does not (or refuses the batched call)."""

from __future__ import annotations

from frameworks.client.driver import SchedulerDriver, master_supports_acknowledge_many
from frameworks.client.fake import FakeMaster
from protocol.backoff import Backoff
from protocol.mesos import (
    Call,
    CallType,
    CommandInfo,
    MasterCapability,
    MasterCapabilityType,
    MasterInfo,
    TaskInfo,
)
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState

from .conftest import framework_info

TIDS = [f"t{i}" for i in range(5)]


def task(tid: str) -> TaskInfo:
    return TaskInfo(
        name=tid, task_id=TaskID(tid), resources=Resources.parse("cpus:1;mem:64").to_mesos(), command=CommandInfo(value="true")
    )


def ack_calls(calls: list[Call]) -> list[tuple[CallType, list[str]]]:
    out: list[tuple[CallType, list[str]]] = []
    for c in calls:
        if c.type is CallType.ACKNOWLEDGE and c.acknowledge is not None:
            out.append((c.type, [c.acknowledge.task_id.value]))
        elif c.type is CallType.ACKNOWLEDGE_MANY and c.acknowledge_many is not None:
            out.append((c.type, [a.task_id.value for a in c.acknowledge_many.acknowledgements]))
    return out


async def run_five(master: FakeMaster) -> tuple[SchedulerDriver, list[Call]]:
    """Launch five tasks, let their RUNNING updates be acknowledged, then finish all five at once;
    returns the calls the master got for the five terminal updates."""
    master.add_agent("cpus:8;mem:1024")
    d = SchedulerDriver(framework_info("acks"), master.transport(), backoff=Backoff(initial=0.001, maximum=0.01))
    await d.start()
    try:
        await d.wait_subscribed(5)
        await master.wait_for(lambda: len(d.offers) == 1)
        (offer,) = list(d.offers)
        await d.launch(offer.offer_id, [task(t) for t in TIDS])
        await master.wait_for(lambda: all(master.tasks[t].state is TaskState.TASK_RUNNING for t in TIDS))
        await master.wait_for(lambda: not master.unacknowledged and d.pending_acks == 0)
        before = len(master.calls)
        for t in TIDS:
            master.finish_task(t)
        await master.wait_for(lambda: not master.unacknowledged and all(t not in d.tasks for t in TIDS))
        await d.wait_for(lambda: d.pending_acks == 0, 5)
        return d, master.calls[before:]
    finally:
        await d.stop()


async def test_updates_queued_together_go_in_one_acknowledge_many() -> None:
    master = FakeMaster()
    d, calls = await run_five(master)
    assert d.acknowledge_many_supported
    assert ack_calls(calls) == [(CallType.ACKNOWLEDGE_MANY, TIDS)]
    assert sorted(t for t, _ in master.acks[-5:]) == TIDS
    assert d.acks_sent - d.ack_calls >= 4  # at least the five terminal ones shared a call


async def test_a_master_without_the_capability_gets_single_acknowledges() -> None:
    master = FakeMaster(acknowledge_many=False)
    d, calls = await run_five(master)
    assert not d.acknowledge_many_supported
    assert ack_calls(calls) == [(CallType.ACKNOWLEDGE, [t]) for t in TIDS]
    assert not any(c.type is CallType.ACKNOWLEDGE_MANY for c in master.calls)


async def test_a_400_for_the_batched_call_falls_back_to_single_acknowledges() -> None:
    # advertised but refused (a master that lies, or a proxy in front of a Mesos master)
    master = FakeMaster(acknowledge_many=False, advertise_acknowledge_many=True)
    d, calls = await run_five(master)
    assert not d.acknowledge_many_supported  # off for the rest of the subscription
    got = ack_calls(master.calls)
    # the RUNNING updates: refused with 400 as a batch, then sent one by one; the terminal ones
    # one by one from the start
    assert got[0] == (CallType.ACKNOWLEDGE_MANY, TIDS)
    assert got[1:] == [(CallType.ACKNOWLEDGE, [t]) for t in TIDS + TIDS]
    assert ack_calls(calls) == [(CallType.ACKNOWLEDGE, [t]) for t in TIDS]
    assert sorted(t for t, _ in master.acks) == sorted(TIDS + TIDS)


async def test_a_lone_update_is_acknowledged_at_once_as_one_acknowledge() -> None:
    master = FakeMaster()
    master.add_agent("cpus:8;mem:1024")
    d = SchedulerDriver(framework_info("lone"), master.transport(), backoff=Backoff(initial=0.001, maximum=0.01))
    await d.start()
    try:
        await d.wait_subscribed(5)
        await master.wait_for(lambda: len(d.offers) == 1)
        (offer,) = list(d.offers)
        before = len(master.calls)
        await d.launch(offer.offer_id, [task("solo")])
        await master.wait_for(lambda: master.tasks["solo"].state is TaskState.TASK_RUNNING and not master.unacknowledged)
        assert ack_calls(master.calls[before:]) == [(CallType.ACKNOWLEDGE, ["solo"])]
    finally:
        await d.stop()


def test_capability_detection() -> None:
    info = MasterInfo(id="m", ip=0, port=1)
    assert not master_supports_acknowledge_many(None)
    assert not master_supports_acknowledge_many(info)
    assert master_supports_acknowledge_many(
        MasterInfo(id="m", ip=0, port=1, capabilities=(MasterCapability(type=MasterCapabilityType.ACKNOWLEDGE_MANY),))
    )
    # an older client decoding a newer master's unknown capability drops it (codec rule)
    assert not master_supports_acknowledge_many(
        MasterInfo(id="m", ip=0, port=1, capabilities=(MasterCapability(type=None),))
    )
