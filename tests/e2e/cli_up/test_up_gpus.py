"""`agora up --agents 2` on a machine with three GPUs (a fake NVML): the agents split them (2 and
1), each offers only its own and names the model, instead of both claiming all three."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import nvml
from frameworks.cli.common import master_state
from frameworks.cli.up import start_cluster

pytestmark = pytest.mark.slow


def test_up_splits_the_machine_gpus_between_its_agents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = nvml.FakeNvml.write(
        tmp_path / "nvml.json", [{"uuid": f"GPU-{i}", "name": "NVIDIA H100 80GB HBM3", "memory_mb": 81559} for i in range(3)]
    )
    monkeypatch.setenv(nvml.FAKE_ENV, str(path))
    cluster = start_cluster(2, tmp_path / "cluster", port=0, with_batch=False, with_elastic=False,
                            resources="cpus:1;mem:512;disk:1024", ready_timeout=60)
    try:
        state = master_state(cluster.master_url, timeout=10)
        got = sorted(
            (a["attributes"]["host_index"], a["resources"].get("gpus", 0), a["attributes"].get("gpu_model"))
            for a in state["slaves"]
        )
        assert got == [(0.0, 2.0, "NVIDIA_H100_80GB_HBM3"), (1.0, 1.0, "NVIDIA_H100_80GB_HBM3")]
    finally:
        cluster.stop(grace=5)
