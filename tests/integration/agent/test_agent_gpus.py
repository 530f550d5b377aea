"""GPU devices on a real agent (in-process, or a subprocess for kill -9) with a fake NVML
(``AGORA_FAKE_NVML``) and the fake master: what a task sees, whole devices only, release on a
terminal state, recovery after kill -9, container images refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pytest

from agent import nvml
from agent.service import AgentService, StartupError
from protocol.mesos import (
    CommandInfo,
    ContainerInfo,
    ContainerType,
    DockerImage,
    DockerInfo,
    ExecutorInfo,
    ExecutorType,
    Image,
    ImageType,
    MesosInfo,
    TaskInfo,
)
from protocol.mesos_common import ExecutorID, TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState as S

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(autouse=True)
def fake_nvml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Four H100s as NVML would describe them (agents started here and their children see it)."""
    path = nvml.FakeNvml.write(
        tmp_path / "nvml.json", [{"uuid": f"GPU-{i}{i}{i}{i}", "name": H100, "memory_mb": 81559} for i in range(4)]
    )
    monkeypatch.setenv(nvml.FAKE_ENV, str(path))
    return path


def gpu_task(tid: str, gpus: float, cmd: str = 'echo "$CUDA_VISIBLE_DEVICES|$NVIDIA_VISIBLE_DEVICES" > seen; exec sleep 60',
             container: ContainerInfo | None = None) -> TaskInfo:
    res = Resources.of(cpus=0.1, mem=32, gpus=gpus)
    return TaskInfo(name=tid, task_id=TaskID(tid), resources=res.to_mesos(), command=CommandInfo(value=cmd),
                    container=container)


async def seen(master: Any, sandbox: Path) -> str:
    f = sandbox / "seen"
    text: str = await master.wait_for(lambda: f.exists() and f.read_text().endswith("\n") and f.read_text(), 20)
    return text.strip()


async def test_tasks_get_distinct_devices_and_release_them(master: Any, make_agent: Any) -> None:
    agent: AgentService = await make_agent(nvidia_gpu_devices="1,3")
    reg = await master.wait_connected()
    assert Resources.from_mesos(reg.resources).scalar("gpus") == 2
    attrs_ = {a.name: (a.text.value if a.text else a.scalar.value if a.scalar else None) for a in reg.attributes}
    assert attrs_["gpu_model"] == "NVIDIA_H100_80GB_HBM3" and attrs_["gpu_mem_mb"] == 81559.0

    await master.run_many([gpu_task("a", 1), gpu_task("b", 1), gpu_task("cpu", 0)])
    a = await seen(master, agent.checkpoint.sandbox("fw1", "a"))
    b = await seen(master, agent.checkpoint.sandbox("fw1", "b"))
    assert {a, b} == {"1|1", "3|3"}
    assert await seen(master, agent.checkpoint.sandbox("fw1", "cpu")) == "|none"

    await master.run_many([gpu_task("half", 0.5), gpu_task("third", 1)])
    st = await master.wait_terminal("half")
    assert st.state is S.TASK_ERROR and st.reason is not None and st.reason.name == "REASON_TASK_INVALID"
    assert "hands out whole GPUs only" in (st.message or "")
    st = await master.wait_terminal("third")
    assert st.state is S.TASK_FAILED and "not enough free GPUs on this agent (0 of 2 free" in (st.message or "")

    async with aiohttp.ClientSession() as http, http.get(agent.url + "/state") as r:
        state = await r.json()
    assert [(g["index"], g["uuid"], g["tasks"]) for g in state["gpus"]] == [
        (1, "GPU-1111", ["fw1/a" if a == "1|1" else "fw1/b"]),
        (3, "GPU-3333", ["fw1/b" if a == "1|1" else "fw1/a"]),
    ]
    assert {t["id"]: t.get("gpus") for t in state["tasks"] if t["id"] in ("a", "b")} == {
        "a": [int(a[0])], "b": [int(b[0])],
    }

    await master.kill("a")  # a terminal state frees its device for the next task
    assert (await master.wait_terminal("a")).state is S.TASK_KILLED
    await master.run_many([gpu_task("next", 1)])
    assert await seen(master, agent.checkpoint.sandbox("fw1", "next")) == a


async def test_sharing_hands_out_parts_of_a_device(master: Any, make_agent: Any) -> None:
    agent: AgentService = await make_agent(nvidia_gpu_devices="0", gpu_sharing=True)
    await master.wait_connected()
    await master.run_many([gpu_task("h1", 0.5), gpu_task("h2", 0.5)])
    assert await seen(master, agent.checkpoint.sandbox("fw1", "h1")) == "0|0"
    assert await seen(master, agent.checkpoint.sandbox("fw1", "h2")) == "0|0"


async def test_a_device_nvml_does_not_know_stops_the_start(master: Any, tmp_path: Path) -> None:
    from tests.integration.agent.conftest import agent_config

    svc = AgentService(agent_config(master, tmp_path / "agent", nvidia_gpu_devices="0,7"))
    with pytest.raises(StartupError, match=r"--nvidia-gpu-devices: NVML knows no device 7 on this machine \(it knows 0,1,2,3\)"):
        await svc.start()
    await svc.stop()


async def test_container_images_are_refused_not_ignored(master: Any, make_agent: Any) -> None:
    agent: AgentService = await make_agent()
    await master.wait_connected()
    docker = ContainerInfo(ContainerType.DOCKER, docker=DockerInfo(image="pytorch/pytorch:2.3.0"))
    mesos = ContainerInfo(ContainerType.MESOS, mesos=MesosInfo(Image(ImageType.DOCKER, DockerImage("ubuntu:24.04"))))
    plain = ContainerInfo(ContainerType.MESOS)  # no image: runs on the host as before
    await master.run_many([
        gpu_task("docker", 0, "touch ran", docker), gpu_task("mesos", 0, "touch ran", mesos),
        gpu_task("plain", 0, "true", plain),
    ])
    for tid, image in (("docker", "pytorch/pytorch:2.3.0"), ("mesos", "ubuntu:24.04")):
        st = await master.wait_terminal(tid)
        assert st.state is S.TASK_FAILED and st.reason is not None
        assert st.reason.name == "REASON_CONTAINER_LAUNCH_FAILED"
        assert st.message == (
            f"the task asks for container image {image}: container images are not supported by this agent "
            "(it runs tasks on the host and has no OCI runtime configured)"
        )
        assert not (agent.checkpoint.sandboxes / "fw1" / tid / "ran").exists()
    assert (await master.wait_terminal("plain")).state is S.TASK_FINISHED


@pytest.mark.slow
async def test_devices_survive_kill_9_and_no_new_task_gets_them(master: Any, agent_procs: Any, tmp_path: Path) -> None:
    work = tmp_path / "agent"
    proc = await agent_procs(work, "--nvidia-gpu-devices", "0,1").start()
    await master.wait_connected()
    await master.run_many([gpu_task("a", 1), gpu_task("b", 1)])
    a = await seen(master, work / "sandboxes" / "fw1" / "a")
    b = await seen(master, work / "sandboxes" / "fw1" / "b")
    assert {a, b} == {"0|0", "1|1"}
    await master.wait_state("a", S.TASK_RUNNING)
    await master.wait_state("b", S.TASK_RUNNING)

    await proc.kill9()
    n = len(master.registrations)
    again = await agent_procs(work, "--nvidia-gpu-devices", "0,1").start()
    reg = await master.wait_connected(n + 1)
    assert {t.task_id.value: t.state for t in reg.tasks} == {"a": S.TASK_RUNNING, "b": S.TASK_RUNNING}
    async with aiohttp.ClientSession() as http, http.get(again.url + "/state") as r:
        state = await r.json()
    held = {g["index"]: g["tasks"] for g in state["gpus"]}
    assert held == {int(a[0]): ["fw1/a"], int(b[0]): ["fw1/b"]}

    await master.run_many([gpu_task("c", 1)])  # both devices are still theirs
    st = await master.wait_terminal("c")
    assert st.state is S.TASK_FAILED and "0 of 2 free" in (st.message or "")
    await master.kill("b")
    await master.wait_terminal("b")
    await master.run_many([gpu_task("d", 1)])
    assert await seen(master, work / "sandboxes" / "fw1" / "d") == b


async def test_a_custom_executor_sees_the_devices_of_its_task(master: Any, make_agent: Any) -> None:
    agent: AgentService = await make_agent(nvidia_gpu_devices="2")
    await master.wait_connected()
    ex = ExecutorInfo(executor_id=ExecutorID("gpu-ex"), type=ExecutorType.CUSTOM,
                      command=CommandInfo(value='echo "$CUDA_VISIBLE_DEVICES|$AGORA_GPU_UUIDS" > seen; exec sleep 60'))
    task = TaskInfo(name="t", task_id=TaskID("t"), resources=Resources.of(cpus=0.1, mem=32, gpus=1).to_mesos(),
                    executor=ex)
    await master.run_many([task])
    assert await seen(master, agent.checkpoint.sandbox("fw1", "gpu-ex")) == "2|GPU-2222"


async def test_other_devices_after_a_restart_are_a_resource_change(master: Any, make_agent: Any, tmp_path: Path) -> None:
    """The devices are part of what recovery compares: a task's checkpoint names its devices by
    index, so an agent started again with other devices does not adopt tasks onto them."""
    work = tmp_path / "g"
    first: AgentService = await make_agent(work, nvidia_gpu_devices="0,1")
    await master.wait_connected()
    await master.run_many([gpu_task("old", 1)])
    st = await master.wait_state("old", S.TASK_RUNNING)
    wrapper = psutil.Process(int((st.message or "pid 0").split()[1]))
    await first.stop()
    with pytest.raises(StartupError, match=r"gpus\[0=GPU-0000;1=GPU-1111\].*gpus\[0=GPU-0000\]"):
        await make_agent(work, nvidia_gpu_devices="0", strict=True)
    assert wrapper.is_running()
    await make_agent(work, nvidia_gpu_devices="0")
    reg = await master.wait_connected(2)
    assert reg.agent_id is None and reg.tasks == ()
    await asyncio.to_thread(wrapper.wait, 10)
