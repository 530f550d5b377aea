"""The master's records change state only through their tables: ``TaskRec.move`` (the task
table), ``FrameworkRec.move`` / ``AgentRec.move`` (``master.lifecycles``); ``TaskRec.resync``
is the one named exception (a re-registering agent's own state wins)."""

from __future__ import annotations

import pytest

from master.lifecycles import AgentPhase, FrameworkPhase
from master.records import AgentRec, FrameworkRec, TaskRec
from master.testing import framework_info
from protocol.resources import Resources
from protocol.task_states import IllegalTransition
from protocol.task_states import TaskState as TS
from protocol.transitions import IllegalMove


def task(state: TS) -> TaskRec:
    return TaskRec(framework_id="f", task_id="t", agent_id="a", name="t", state=state, resources=Resources())


def test_task_moves_through_the_table() -> None:
    t = task(TS.TASK_STAGING)
    t.move(TS.TASK_RUNNING)
    t.move(TS.TASK_UNREACHABLE)
    t.move(TS.TASK_GONE)
    assert t.state is TS.TASK_GONE
    with pytest.raises(IllegalTransition, match="TASK_GONE -> TASK_RUNNING"):
        t.move(TS.TASK_RUNNING)
    assert t.state is TS.TASK_GONE


def test_resync_takes_the_agents_word() -> None:
    t = task(TS.TASK_UNREACHABLE)
    t.resync(TS.TASK_STAGING)  # not a move the table has: the agent's report at re-registration
    assert t.state is TS.TASK_STAGING


def test_framework_and_agent_moves() -> None:
    fw = FrameworkRec(framework_id="f", info=framework_info(), phase=FrameworkPhase.RECOVERED, roles=("*",),
                      capabilities=frozenset(), registered_time=0.0)
    fw.move(FrameworkPhase.SUBSCRIBED)
    fw.move(FrameworkPhase.REMOVED)
    with pytest.raises(IllegalMove, match="illegal framework transition REMOVED -> SUBSCRIBED"):
        fw.move(FrameworkPhase.SUBSCRIBED)
    ag = AgentRec(agent_id="a", hostname="h", port=1, total=Resources(), phase=AgentPhase.RECOVERED, registered_time=0.0)
    ag.move(AgentPhase.UNREACHABLE)
    with pytest.raises(IllegalMove, match="illegal agent transition UNREACHABLE -> RECOVERED"):
        ag.move(AgentPhase.RECOVERED)
    assert ag.phase is AgentPhase.UNREACHABLE
