"""PyTorch workers (``frameworks.elastic.torch_worker``) train the digits MLP through a real
coordinator on loopback while the membership changes: two workers start, a third joins, one is
sent SIGTERM (returns its lease and leaves); training still reaches >= 90% test accuracy, and the
coordinator's final parameters, loaded into a fresh module here, score the same.

Runs where PyTorch is installed (``pip install torch``, or ``AGORA_WITH_TORCH=1 scripts/install``);
the numpy worker path is tested everywhere (``test_digits_elastic.py``)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from frameworks.elastic.coordinator import Coordinator  # noqa: E402
from frameworks.elastic.core import CoordinatorConfig  # noqa: E402
from frameworks.elastic.examples import digits, digits_torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def _status(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/v1/status", timeout=5) as r:
        out: dict[str, Any] = json.loads(r.read())
        return out


async def wait_for(url: str, cond: Callable[[dict[str, Any]], bool], what: str, within: float = 60.0) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        st = await asyncio.to_thread(_status, url)
        if cond(st):
            return st
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}; status: {json.dumps(st)[:2000]}")
        await asyncio.sleep(0.05)


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_torch_workers_train_through_membership_changes(tmp_path: Path) -> None:
    cfg = CoordinatorConfig(
        job="digits-torch", num_shards=24, epochs=10, heartbeat_timeout=2.0, learning_rate=0.1, momentum=0.5
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    procs: dict[str, asyncio.subprocess.Process] = {}

    async def start(wid: str, url: str) -> None:
        fd = os.open(tmp_path / f"{wid}.out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            procs[wid] = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "frameworks.elastic.examples.digits_torch", "worker", "--coordinator", url,
                "--worker-id", wid, "--step-delay", "0.05", cwd=str(ROOT), env=env, stdout=fd,
                stderr=asyncio.subprocess.STDOUT,
            )
        finally:
            os.close(fd)

    async with Coordinator(cfg) as coord:
        try:
            await start("t1", coord.url)
            await start("t2", coord.url)
            await wait_for(coord.url, lambda st: st["world_size"] == 2, "two torch workers")
            await wait_for(coord.url, lambda st: any(le["worker_id"] == "t2" for le in st["leases"]), "t2 leasing")
            procs["t2"].send_signal(signal.SIGTERM)  # returns its lease and leaves
            assert await asyncio.wait_for(procs["t2"].wait(), 30) == 143
            await start("t3", coord.url)
            st = await wait_for(coord.url, lambda st: "t3" in [w["worker_id"] for w in st["workers"]], "t3 joined")
            assert st["shards"]["progress"] < 1, st["shards"]  # it joined while the job trains
            for wid in ("t1", "t3"):
                assert await asyncio.wait_for(procs[wid].wait(), 120) == 0, (tmp_path / f"{wid}.out").read_text()
            st = await asyncio.to_thread(_status, coord.url)
            assert st["finished"]
            assert st["progress"]["reports"]["test_accuracy"] >= 0.90, st["progress"]
            assert any("t2 left" in e["text"] for e in st["log"])
            out = (tmp_path / "t3.out").read_text()
            assert "(torch " in out and "test accuracy" in out
            # the final parameters, in a fresh module, evaluated here
            params = {k: v.copy() for k, v in coord.core.store.params.items()}
            model = digits_torch.make_model(seed=1)  # other initial values: all of them are overwritten
            with torch.no_grad():
                for name, p in model.named_parameters():
                    p.copy_(torch.from_numpy(params[name]))
            _, _, Xt, yt = digits.load_split()
            final = digits_torch.accuracy(model, Xt, yt)
            assert final >= 0.90
            print(f"\ntorch elastic digits: test accuracy {final:.4f}, reported {st['progress']['reports']}")
        finally:
            for p in procs.values():
                if p.returncode is None:
                    p.kill()
                    await p.wait()
