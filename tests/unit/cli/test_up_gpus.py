"""`agora up` splits the machine's GPUs between its agents instead of giving each all of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import nvml
from frameworks.cli.common import CliError
from frameworks.cli.up import gpu_split, split_devices

SHARE = "cpus:2;mem:1024;disk:1024"


def test_split_devices_is_contiguous_and_near_equal() -> None:
    assert split_devices([0, 1, 2, 3], 2) == [[0, 1], [2, 3]]
    assert split_devices([0, 1, 2], 2) == [[0, 1], [2]]
    assert split_devices([0], 3) == [[0], [], []]
    assert split_devices([], 2) == [[], []]


def _fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    path = nvml.FakeNvml.write(tmp_path / "nvml.json", [{"uuid": f"GPU-{i}", "name": "NVIDIA A100", "memory_mb": 40960} for i in range(n)])
    monkeypatch.setenv(nvml.FAKE_ENV, str(path))


def test_each_agent_gets_its_own_devices_and_one_without_gets_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(tmp_path, monkeypatch, 3)
    assert gpu_split(2, SHARE, ()) == [
        (SHARE, ("--nvidia-gpu-devices", "0,1")),
        (SHARE, ("--nvidia-gpu-devices", "2")),
    ]
    _fake(tmp_path, monkeypatch, 1)
    assert gpu_split(2, SHARE, ()) == [(SHARE, ("--nvidia-gpu-devices", "0")), (SHARE + ";gpus:0", ())]


def test_the_operator_decides_when_gpus_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(tmp_path, monkeypatch, 4)
    assert gpu_split(2, SHARE + ";gpus:1", ()) == [(SHARE + ";gpus:1", ())] * 2
    assert gpu_split(2, SHARE, ("--nvidia-gpu-devices", "3")) == [(SHARE, ())] * 2


def test_no_gpus_changes_nothing_and_a_broken_nvml_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(tmp_path, monkeypatch, 0)
    assert gpu_split(2, SHARE, ()) == [(SHARE, ())] * 2
    monkeypatch.setenv(nvml.FAKE_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(CliError, match="cannot read this machine's GPUs"):
        gpu_split(1, SHARE, ())
