"""protocol.evolve: the same result and errors as attrs.evolve."""

from __future__ import annotations

import attrs
import pytest

from protocol import mesos
from protocol.evolve import evolve
from protocol.resources import Resources
from protocol.task_states import TaskState


@attrs.frozen
class Private:
    _hidden: int
    shown: str = "x"
    derived: int = attrs.field(init=False, default=7)
    checked: int = attrs.field(default=0, validator=attrs.validators.ge(0))


def test_same_object_as_attrs_evolve() -> None:
    tk = mesos.TaskInfo(
        name="t", task_id=mesos.TaskID("t"), resources=Resources.parse("cpus:1").to_mesos(),
        command=mesos.CommandInfo(value="true"),
    )
    got = evolve(tk, agent_id=mesos.AgentID("a1"))
    assert got == attrs.evolve(tk, agent_id=mesos.AgentID("a1"))
    assert got.agent_id == mesos.AgentID("a1") and tk.agent_id is None
    st = mesos.TaskStatus(task_id=mesos.TaskID("t"), state=TaskState.TASK_RUNNING, uuid=b"u" * 16)
    assert evolve(st, state=TaskState.TASK_LOST, message="m") == attrs.evolve(st, state=TaskState.TASK_LOST, message="m")
    assert evolve(st) == st


def test_private_names_init_false_and_validators() -> None:
    p = Private(1, "a")
    assert evolve(p, hidden=2) == attrs.evolve(p, hidden=2) == Private(2, "a")
    assert evolve(p, shown="b").derived == 7
    with pytest.raises(ValueError):
        evolve(p, checked=-1)  # validators run, as in attrs.evolve


def test_unknown_name_is_attrs_error() -> None:
    p = Private(1)
    with pytest.raises(TypeError):
        evolve(p, nope=1)
    with pytest.raises(TypeError):
        evolve(p, derived=1)
