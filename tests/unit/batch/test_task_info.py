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


def test_a_gangs_task_gets_its_rendezvous_variables_and_writes_the_hostfile_first(tmp_path: Path) -> None:
    svc = BatchService("127.0.0.1:9", tmp_path)
    spec = JobSpec(name="ddp", argv=("python", "train.py"), count=2, gang=2)
    env = (("WORLD_SIZE", "2"), ("RANK", "1"), ("MASTER_ADDR", "10.0.0.1"), ("MASTER_PORT", "31000"))
    info = svc._task_info(TaskLaunch("j3-1-0", 3, 1, "ddp[1]", spec, Resources.of(cpus=1), env), "agent-1")
    assert info.command is not None and info.command.environment is not None
    assert info.command.environment.as_dict() == {
        "AGORA_JOB_ID": "3", "AGORA_TASK_INDEX": "1", "AGORA_ARRAY_SIZE": "2", **dict(env)
    }
    # argv through /bin/sh -c: the hostfile, then exec of the command with its arguments as given
    assert info.command.value == "/bin/sh" and not info.command.shell
    assert info.command.arguments[:2] == ("/bin/sh", "-c")
    assert info.command.arguments[2].endswith('\nexec "$@"') and "AGORA_GANG_HOSTFILE" in info.command.arguments[2]
    assert info.command.arguments[3:] == ("ddp", "python", "train.py")
    shell = JobSpec(name="sh", shell="echo $RANK", count=2, gang=2)
    info = svc._task_info(TaskLaunch("j4-0-0", 4, 0, "sh[0]", shell, Resources.of(cpus=1), env), "agent-1")
    assert info.command is not None and info.command.shell and info.command.value.endswith("\necho $RANK")


def test_the_hostfile_prelude_writes_one_line_per_node(tmp_path: Path) -> None:
    import subprocess

    from frameworks.batch.task_infos import HOSTFILE_PRELUDE

    env = {"PATH": "/usr/bin:/bin", "MESOS_SANDBOX": str(tmp_path), "AGORA_GANG_HOSTS": "10.0.0.2:1,10.0.0.1:2"}
    out = subprocess.run(
        ["/bin/sh", "-c", f'{HOSTFILE_PRELUDE}\necho "$AGORA_GANG_HOSTFILE"'], env=env, capture_output=True,
        text=True, check=True, timeout=10,
    )
    assert out.stdout.strip() == str(tmp_path / "hostfile")
    assert (tmp_path / "hostfile").read_text() == "10.0.0.2 slots=1\n10.0.0.1 slots=2\n"
