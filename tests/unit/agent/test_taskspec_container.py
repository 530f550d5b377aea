"""agent/taskspec.py: what of a ContainerInfo the agent cannot give is a TASK_ERROR with its
reason, never ignored."""

from __future__ import annotations

import pytest

from agent.taskspec import SpecError, task_spec
from protocol.mesos import CommandInfo, ContainerInfo, ContainerType, NetworkInfo, TaskInfo
from protocol.mesos_common import TaskID, Volume, VolumeMode


@pytest.mark.parametrize(
    ("container", "why"),
    [
        (ContainerInfo(ContainerType.MESOS, volumes=(Volume("data", VolumeMode.RW, "/srv/data"),)),
         "the task asks for container volumes ('data'): volumes are not supported by this agent (tasks run on the "
         "host, in their sandbox)"),
        (ContainerInfo(ContainerType.MESOS, network_infos=(NetworkInfo(name="overlay"),)),
         "the task asks for a container network ('overlay'): container networks are not supported by this agent "
         "(tasks use the host's network)"),
        (ContainerInfo(ContainerType.MESOS, hostname="web-1"),
         "the task asks for hostname 'web-1': a task has no network namespace of its own on this agent"),
    ],
)
def test_container_settings_the_agent_cannot_give_are_task_errors(container: ContainerInfo, why: str) -> None:
    """(the agent's explicit answers to what it does not do: nothing accepted and ignored)"""
    task = TaskInfo(name="t", task_id=TaskID("t"), command=CommandInfo(value="true"), container=container)
    with pytest.raises(SpecError) as e:
        task_spec("fw", task)
    assert str(e.value) == why
    plain = TaskInfo(name="t", task_id=TaskID("t"), command=CommandInfo(value="true"),
                     container=ContainerInfo(ContainerType.MESOS))
    assert task_spec("fw", plain).command is not None  # a MESOS container with nothing in it is the host
