"""GPU devices of an agent (agent/gpus.py, agent/nvml.py): which devices it uses, who holds which,
what a task's environment says, and the NVML port against a fake NVML library."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import nvml
from agent.checkpoint import Checkpoint, TaskRecordFile
from agent.gpus import (
    GpuBook,
    GpuConfigError,
    GpuDevice,
    Refused,
    choose_devices,
    declared_device,
    gpu_attributes,
    gpu_environment,
    identity,
    parse_device_list,
)
from protocol.mesos import CommandInfo, TaskInfo
from protocol.mesos_common import AgentID, TaskID

H100 = "NVIDIA H100 80GB HBM3"
FOUR = tuple(GpuDevice(i, f"GPU-{i:04d}", H100, 81559, i) for i in range(4))


# --- which devices -------------------------------------------------------------------------------


def test_device_list_parses_indices_and_refuses_nonsense() -> None:
    assert parse_device_list("0,1, 3") == (0, 1, 3)
    for bad, why in (("", "like 0,1"), ("0,,1", "like 0,1"), ("a", "'a' is not a device index"),
                     ("-1", "'-1' is not"), ("1,1", "device 1 is listed twice")):
        with pytest.raises(GpuConfigError, match=why):
            parse_device_list(bad)


def test_without_flags_every_nvml_device_and_none_without_nvml() -> None:
    assert choose_devices(FOUR, None, None) == FOUR
    assert choose_devices(None, None, None) == ()
    assert choose_devices(FOUR, None, 0) == ()


def test_flag_picks_devices_by_nvml_index() -> None:
    assert choose_devices(FOUR, (3, 1), None) == (FOUR[1], FOUR[3])
    assert choose_devices(FOUR, (0, 1), 2) == FOUR[:2]


def test_a_device_nvml_does_not_know_is_a_startup_error() -> None:
    with pytest.raises(GpuConfigError) as e:
        choose_devices(FOUR[:2], (0, 1, 5), None)
    assert str(e.value) == (
        "--nvidia-gpu-devices: NVML knows no device 5 on this machine (it knows 0,1)"
    )


def test_without_nvml_the_flag_declares_devices() -> None:
    got = choose_devices(None, (0, 1), None)
    assert got == (declared_device(0), declared_device(1))
    assert all(d.declared and d.uuid == f"GPU-declared-{d.index}" for d in got)


def test_resources_count_takes_the_first_devices_and_must_agree_with_the_flag() -> None:
    assert choose_devices(FOUR, None, 2) == FOUR[:2]
    assert choose_devices(None, None, 2) == (declared_device(0), declared_device(1))
    with pytest.raises(GpuConfigError, match="gpus:5, but NVML reports only 4"):
        choose_devices(FOUR, None, 5)
    with pytest.raises(GpuConfigError, match=r"gpus:3 does not match --nvidia-gpu-devices 0,1 \(2 device"):
        choose_devices(FOUR, (0, 1), 3)
    with pytest.raises(GpuConfigError, match="GPUs are whole devices"):
        choose_devices(FOUR, None, 1.5)


def test_attributes_and_identity() -> None:
    assert gpu_attributes(FOUR) == {"gpu_model": "NVIDIA_H100_80GB_HBM3", "gpu_mem_mb": 81559.0}
    mixed = (FOUR[0], GpuDevice(1, "GPU-x", "NVIDIA A100-SXM4-40GB", 40536))
    assert gpu_attributes(mixed) == {"gpu_model": "mixed", "gpu_mem_mb": 40536.0}
    assert gpu_attributes((declared_device(0),)) == {}
    assert identity(FOUR[:2]) == "0=GPU-0000;1=GPU-0001"
    assert identity(()) == ""


def test_environment_names_exactly_the_task_devices() -> None:
    assert gpu_environment((FOUR[3], FOUR[1]), True) == {
        "CUDA_VISIBLE_DEVICES": "1,3",
        "NVIDIA_VISIBLE_DEVICES": "1,3",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "AGORA_GPU_UUIDS": "GPU-0001,GPU-0003",
    }
    assert gpu_environment((), True) == {"CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "none"}
    assert gpu_environment((), False) == {}


# --- the book ----------------------------------------------------------------------------------


def test_whole_devices_go_to_one_task_each_and_come_back_on_release() -> None:
    book = GpuBook(FOUR[:2])
    assert book.assign("a", 1) == (FOUR[0],)
    assert book.assign("b", 1) == (FOUR[1],)
    refused = book.assign("c", 1)
    assert refused == Refused(
        "gpus 1: not enough free GPUs on this agent (0 of 2 free; held by 0: a; 1: b)",
        "REASON_CONTAINER_LAUNCH_FAILED", False,
    )
    assert "c" not in book
    assert book.release("a") == (0,)
    assert book.release("a") == ()
    assert book.assign("c", 1) == (FOUR[0],)
    assert book.assign("c", 1) == (FOUR[0],)  # a duplicate launch keeps what it has
    assert book.assign("none", 0) == () and "none" not in book


def test_multi_gpu_request_takes_the_lowest_free_devices() -> None:
    book = GpuBook(FOUR)
    book.assign("x", 1)
    assert book.assign("y", 2) == FOUR[1:3]
    assert isinstance(book.assign("z", 2), Refused)
    assert book.free() == (3,)


def test_fractional_request_refused_without_sharing() -> None:
    book = GpuBook(FOUR)
    got = book.assign("t", 0.5)
    assert got == Refused(
        "gpus 0.5: this agent hands out whole GPUs only (a fractional GPU request needs an agent "
        "started with --gpu-sharing)",
        "REASON_TASK_INVALID", True,
    )
    assert book.free() == (0, 1, 2, 3)


def test_sharing_packs_fractions_and_keeps_whole_devices_whole() -> None:
    book = GpuBook(FOUR[:2], sharing=True)
    assert book.assign("a", 0.5) == (FOUR[0],)
    assert book.assign("b", 0.25) == (FOUR[0],)  # packed onto the busiest that fits
    assert book.assign("c", 0.5) == (FOUR[1],)
    assert book.assign("d", 0.25) == (FOUR[0],)
    assert book.used(0) == 1000 and book.used(1) == 500
    assert isinstance(book.assign("w", 1), Refused)  # no device is entirely free
    refused = book.assign("big", 1.5)
    assert isinstance(refused, Refused) and refused.error and "must be a whole number" in refused.message
    book.release("c")
    assert book.assign("w", 1) == (FOUR[1],)


def test_restore_keeps_a_recovered_task_devices_from_new_tasks() -> None:
    book = GpuBook(FOUR[:2])
    assert book.restore("old", [1], 1) is None
    assert book.assign("new", 1) == (FOUR[0],)
    assert isinstance(book.assign("newer", 1), Refused)
    assert book.restore("clash", [1], 1) == "device 1 is already held by old"
    assert book.restore("gone", [7], 1) == "device 7 is not one of this agent's GPUs"
    assert "gone" not in book and "clash" not in book


# --- the checkpoint carries the assignment ------------------------------------------------------


def test_task_record_keeps_the_devices(tmp_path: Path) -> None:
    cp = Checkpoint(tmp_path)
    cp.init()
    task = TaskInfo(name="t", task_id=TaskID("t1"), agent_id=AgentID("a"), command=CommandInfo(value="true"))
    cp.write_task(TaskRecordFile("f1", task, gpus=(1, 3)))
    plain = TaskInfo(name="p", task_id=TaskID("t2"), agent_id=AgentID("a"), command=CommandInfo(value="true"))
    cp.write_task(TaskRecordFile("f1", plain))
    cp.commit()
    got = {t.task_id: t.record for t in cp.recover().tasks}
    assert got["t1"] is not None and got["t1"].gpus == (1, 3)
    assert got["t2"] is not None and got["t2"].gpus == ()
    cp.close()


# --- the NVML port --------------------------------------------------------------------------------


def test_read_devices_through_the_fake_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = nvml.FakeNvml.write(tmp_path / "nvml.json", [
        {"uuid": "GPU-aaaa", "name": H100, "memory_mb": 81559},
        {"uuid": "GPU-bbbb", "name": H100, "memory_mb": 81559, "minor": 7},
    ])
    monkeypatch.setenv(nvml.FAKE_ENV, str(path))
    lib = nvml.load()
    assert isinstance(lib, nvml.FakeNvml) and lib.initialized == 1
    devices = nvml.read_devices(lib)
    assert devices == (GpuDevice(0, "GPU-aaaa", H100, 81559, 0), GpuDevice(1, "GPU-bbbb", H100, 81559, 7))
    assert lib.initialized == 0  # shut down after reading
    assert nvml.machine_devices() == devices


def test_broken_fake_file_is_an_error_not_zero_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(nvml.FAKE_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(nvml.NvmlError, match="AGORA_FAKE_NVML="):
        nvml.machine_devices()
    (tmp_path / "bad.json").write_text('{"not": "a list"}')
    monkeypatch.setenv(nvml.FAKE_ENV, str(tmp_path / "bad.json"))
    with pytest.raises(nvml.NvmlError, match="expected a JSON list"):
        nvml.machine_devices()


def test_real_nvml_on_this_machine_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    # nvidia-ml-py is installed; without a driver (CI) nvmlInit fails and there is no NVML
    monkeypatch.delenv(nvml.FAKE_ENV, raising=False)
    got = nvml.machine_devices()
    assert got is None or all(d.uuid for d in got)
