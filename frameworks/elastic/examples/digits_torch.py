"""The digits example with a PyTorch model: a small MLP (64 -> 32 -> 10) on scikit-learn's
handwritten digits, trained data-parallel through the elastic framework (``torch_worker``).

The same split and shards as ``digits.py``; each minibatch's gradients (``loss.backward()``) are
pushed to the coordinator's parameter server, which applies the job's optimizer, and the fresh
parameters are loaded back into the module. Workers may come and go at any time. When the shard
queue is finished each worker evaluates the final parameters on the held-out 20% and reports
``test_accuracy`` (>= 0.90 is expected).

    python -m frameworks.elastic.coordinator --job digits-torch --num-shards 24 --epochs 10 \
        --momentum 0.5 --port 8470
    python -m frameworks.elastic.examples.digits_torch worker --coordinator http://127.0.0.1:8470

The gradients of several workers reach the parameter server asynchronously (each computed on
slightly older parameters): an MLP wants a smaller momentum than the convex numpy model, 0.5 with
the learning rate 0.1 (0.9 diverged with 3 workers). As an elastic job: ``[worker] command =
"{python} -m frameworks.elastic.examples.digits_torch worker"`` with ``mem = 512`` or more, and
``[optimizer] momentum = 0.5``. Needs PyTorch (the CPU build is enough).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

import numpy as np
import torch

from frameworks.elastic.examples.digits import CLASSES, FEATURES, load_split, shard_rows
from frameworks.elastic.torch_worker import TorchWorker
from frameworks.elastic.worker import ElasticJob

HIDDEN = 32


def make_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, CLASSES))


def accuracy(model: torch.nn.Module, X: np.ndarray, y: np.ndarray) -> float:
    with torch.no_grad():
        pred = model(torch.from_numpy(X).float()).argmax(dim=1).numpy()
    return float((pred == y).mean())


def run_worker(job: ElasticJob, batch: int = 32, step_delay: float = 0.0, seed: int = 0) -> float:
    """Train until the job's shard queue is finished; returns (and reports) the test accuracy."""
    torch.set_num_threads(1)
    X, y, Xt, yt = load_split(seed)
    worker = TorchWorker(job, make_model(seed))
    model = worker.module
    loss_fn = torch.nn.CrossEntropyLoss()
    for shard in job.shards():
        rows = np.random.default_rng(shard.epoch * 100_003 + shard.index).permutation(
            shard_rows(len(X), shard.index, shard.num_shards)
        )
        for start in range(0, len(rows), batch):
            idx = rows[start : start + batch]
            xb, yb = torch.from_numpy(X[idx]).float(), torch.from_numpy(y[idx])
            model.zero_grad()
            out = model(xb)
            loss = loss_fn(out, yb)
            loss.backward()
            acc = float((out.argmax(dim=1) == yb).float().mean())
            worker.push(samples=len(idx), loss=float(loss.item()), accuracy=acc)
            if step_delay:
                time.sleep(step_delay)  # stands in for real compute in demos and tests
    worker.pull()
    test_acc = accuracy(model, Xt, yt)
    job.report(test_accuracy=test_acc)
    return test_acc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m frameworks.elastic.examples.digits_torch")
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="train as one elastic worker")
    w.add_argument("--coordinator", help="coordinator URL (default: $AGORA_ELASTIC_COORDINATOR)")
    w.add_argument("--worker-id")
    w.add_argument("--batch", type=int, default=32)
    w.add_argument("--step-delay", type=float, default=0.0, help="seconds to sleep per minibatch")
    w.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    job = ElasticJob(args.coordinator, args.worker_id) if args.coordinator else ElasticJob.from_env()
    with job:
        print(
            f"worker {job.worker_id} (torch {torch.__version__}): rank {job.rank} of {job.world_size} "
            f"(generation {job.generation})",
            flush=True,
        )
        acc = run_worker(job, args.batch, args.step_delay, args.seed)
    print(f"worker {job.worker_id}: done, test accuracy {acc:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
