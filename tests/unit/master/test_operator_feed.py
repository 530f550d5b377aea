"""The operator event feed alone (``master.operator_events.OperatorFeed``, one component of the
core): nothing is built while no stream is open; events are numbered from 1 in the order made."""

from __future__ import annotations

from master.events import Effect, PublishOperatorEvent
from master.lifecycles import AgentPhase, FrameworkPhase
from master.operator_events import OperatorFeed
from master.records import AgentRec, FrameworkRec, TaskRec
from master.testing import framework_info
from protocol import mesos
from protocol.resources import Resources
from protocol.task_states import TaskState as TS

ET = mesos.OperatorEventType


def records() -> tuple[dict[str, FrameworkRec], AgentRec, TaskRec]:
    fw = FrameworkRec(framework_id="f1", info=framework_info(fid="f1"), phase=FrameworkPhase.SUBSCRIBED, roles=("*",),
                      capabilities=frozenset(), registered_time=1.0)
    t = TaskRec(framework_id="f1", task_id="t1", agent_id="a1", name="t1", state=TS.TASK_RUNNING,
                resources=Resources.of(cpus=1, mem=10))
    fw.tasks["t1"] = t
    ag = AgentRec(agent_id="a1", hostname="h", port=5051, total=Resources.of(cpus=4, mem=100),
                  phase=AgentPhase.REGISTERED, registered_time=1.0, tasks={("f1", "t1")})
    return {"f1": fw}, ag, t


def published(fx: list[Effect]) -> list[tuple[int, ET | None]]:
    return [(e.seq, e.event.type) for e in fx if isinstance(e, PublishOperatorEvent)]


def test_silent_without_a_stream() -> None:
    fws, ag, t = records()
    feed = OperatorFeed(fws)
    fx: list[Effect] = []
    feed.task_added(t, fx)
    feed.agent_added(ag, fx)
    feed.framework_removed(fws["f1"], fx)
    assert fx == [] and feed.seq == 0


def test_numbered_events_while_a_stream_is_open() -> None:
    fws, ag, t = records()
    feed = OperatorFeed(fws)
    feed.stream("op1", True)
    fx: list[Effect] = []
    feed.task_added(t, fx)
    feed.task_updated(t, TS.TASK_FINISHED, None, 5.0, fx)
    feed.agent_added(ag, fx)
    feed.framework_updated(fws["f1"], fx)
    assert published(fx) == [(1, ET.TASK_ADDED), (2, ET.TASK_UPDATED), (3, ET.AGENT_ADDED), (4, ET.FRAMEWORK_UPDATED)]
    made_up = fx[1]
    assert isinstance(made_up, PublishOperatorEvent) and made_up.event.task_updated is not None
    status = made_up.event.task_updated.status
    assert (status.state, status.source, status.timestamp) == (TS.TASK_FINISHED, mesos.Source.SOURCE_MASTER, 5.0)
    added = fx[2]
    assert isinstance(added, PublishOperatorEvent) and added.event.agent_added is not None
    assert Resources.from_mesos(added.event.agent_added.agent.allocated_resources) == Resources.of(cpus=1, mem=10)
    feed.stream("op1", False)
    more: list[Effect] = []
    feed.agent_removed("a1", more)
    assert more == [] and feed.seq == 4
