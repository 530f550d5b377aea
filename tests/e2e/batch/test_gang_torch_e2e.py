"""The PyTorch DDP example (``frameworks/batch/examples/ddp_train.py``) trains data-parallel across
a 3-rank gang on two agents, its ranks meeting through ``env://`` (MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE from the batch framework), gloo on the CPU. Runs where PyTorch is installed (``pip
install torch``, or ``AGORA_WITH_TORCH=1 scripts/install``); the standard-library allreduce proves
the same contract everywhere (``test_gang_e2e.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from frameworks.batch.examples import ddp_train
from frameworks.cli.up import LocalCluster

from .test_batch_e2e import cli, show, submit, succeeds

DDP = str(Path(ddp_train.__file__).resolve())


@pytest.mark.slow
def test_pytorch_ddp_trains_across_a_gang_on_two_agents(cluster: LocalCluster) -> None:
    jid = submit(cluster, "--count", "3", "--gang", "3", "--cpus", "2", "--mem", "1024", "--env", "OMP_NUM_THREADS=1",
                 "--", sys.executable, DDP, "--epochs", "4")
    succeeds(cluster, jid, timeout=110)
    d = show(cluster, jid)
    assert len({t["history"][-1]["agent_id"] for t in d["task_list"]}) == 2
    outputs = []
    for i in range(3):
        code, out = cli(cluster, "logs", str(jid), "--task", str(i))
        assert code == 0, out
        outputs.append(out)
        print(f"\n--- rank {i} ---\n{out}", end="")
    assert outputs[0].startswith("epoch 0: loss ")
    checksums = set()
    for i, out in enumerate(outputs):
        line = out.strip().splitlines()[-1]
        assert line.startswith(f"rank {i}/3: backend gloo on cpu, rendezvous ") and "equal on all ranks: True" in line
        checksums.add(line.rsplit("checksum ", 1)[1])
    assert len(checksums) == 1
