"""The TaskInfo the service sends for each task of an array: its command, its own index in the
environment, the job's variables, and its carved resources (parts shared per job are cached)."""

from __future__ import annotations

from pathlib import Path

from frameworks.batch.core import TaskLaunch
from frameworks.batch.model import JobSpec
from frameworks.batch.service import BatchService
from protocol.resources import Resources


def test_each_task_gets_its_index_and_the_jobs_environment(tmp_path: Path) -> None:
    svc = BatchService("127.0.0.1:9", tmp_path)
    spec = JobSpec(name="arr", argv=("echo", "hi"), count=3, queue="dev", env=(("A", "1"), ("AGORA_TASK_INDEX", "x")))
    res = Resources.of(cpus=1, mem=64)
    infos = [
        svc._task_info(TaskLaunch(f"j7-{i}-0", 7, i, f"arr[{i}]", spec, res), "agent-1") for i in range(3)
    ]
    for i, info in enumerate(infos):
        assert info.task_id.value == f"j7-{i}-0" and info.name == f"arr[{i}]"
        assert info.command is not None and info.command.environment is not None
        assert info.command.value == "echo" and info.command.arguments == ("echo", "hi")
        assert info.command.environment.as_dict() == {
            "A": "1",
            "AGORA_JOB_ID": "7",
            "AGORA_TASK_INDEX": str(i),
            "AGORA_ARRAY_SIZE": "3",
        }
        assert Resources.from_mesos(info.resources) == res
        assert {r.allocation_info.role for r in info.resources if r.allocation_info} == {"dev"}
    shell = JobSpec(name="sh", shell="echo $AGORA_TASK_INDEX", count=2)
    info = svc._task_info(TaskLaunch("j8-1-0", 8, 1, "sh[1]", shell, res), "agent-1")
    assert info.command is not None and info.command.shell and info.command.value == "echo $AGORA_TASK_INDEX"
