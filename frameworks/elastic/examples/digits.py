"""Softmax regression on scikit-learn's handwritten digits (8x8 images, 10 classes; shipped with
scikit-learn, nothing is downloaded), trained data-parallel through the elastic worker library.

The training split (80%, seeded) is cut into ``num_shards`` shards; each leased shard is processed
in minibatches, each minibatch's gradient is pushed to the coordinator's parameter server (SGD with
momentum) and the fresh parameters come back. Workers may come and go at any time. When the shard
queue is finished each worker evaluates the final parameters on the held-out 20% and reports
``test_accuracy`` (>= 0.90 is expected; it is typically ~0.95).

    python -m frameworks.elastic.coordinator --job digits --num-shards 24 --epochs 8 --port 8470
    python -m frameworks.elastic.examples.digits worker --coordinator http://127.0.0.1:8470
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

import numpy as np

from frameworks.elastic.worker import ElasticJob

FEATURES = 64
CLASSES = 10


def load_split(
    seed: int = 0, test_fraction: float = 0.2
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(X_train, y_train, X_test, y_test), features scaled to [0, 1], a seeded stratified-enough split."""
    from sklearn.datasets import load_digits

    data = load_digits()
    X = data.data.astype(np.float64) / 16.0
    y = data.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(X))
    n_test = int(len(X) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return X[train], y[train], X[test], y[test]


def shard_rows(n_rows: int, shard: int, num_shards: int) -> np.ndarray:
    """Row indices of one shard: contiguous, nearly equal slices of the (already shuffled) split."""
    return np.array_split(np.arange(n_rows), num_shards)[shard]


def initial_parameters() -> dict[str, np.ndarray]:
    return {"W": np.zeros((FEATURES, CLASSES)), "b": np.zeros(CLASSES)}


def forward(params: dict[str, np.ndarray], X: np.ndarray) -> np.ndarray:
    z = X @ params["W"] + params["b"]
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def gradients(
    params: dict[str, np.ndarray], X: np.ndarray, y: np.ndarray, l2: float = 1e-4
) -> tuple[dict[str, np.ndarray], float, float]:
    """Mean cross-entropy gradients, loss and batch accuracy."""
    p = forward(params, X)
    n = len(X)
    loss = float(-np.log(p[np.arange(n), y] + 1e-12).mean())
    acc = float((p.argmax(axis=1) == y).mean())
    d = p.copy()
    d[np.arange(n), y] -= 1.0
    d /= n
    return {"W": X.T @ d + l2 * params["W"], "b": d.sum(axis=0)}, loss, acc


def accuracy(params: dict[str, np.ndarray], X: np.ndarray, y: np.ndarray) -> float:
    return float((forward(params, X).argmax(axis=1) == y).mean())


def run_worker(job: ElasticJob, batch: int = 32, step_delay: float = 0.0, seed: int = 0) -> float:
    """Train until the job's shard queue is finished; returns (and reports) the test accuracy."""
    X, y, Xt, yt = load_split(seed)
    params = job.init_parameters(initial_parameters())
    for shard in job.shards():
        rows = shard_rows(len(X), shard.index, shard.num_shards)
        rng = np.random.default_rng(shard.epoch * 100_003 + shard.index)
        rows = rng.permutation(rows)
        for start in range(0, len(rows), batch):
            idx = rows[start : start + batch]
            grads, loss, acc = gradients(params, X[idx], y[idx])
            params = job.push(grads, samples=len(idx), loss=loss, accuracy=acc)
            if step_delay:
                time.sleep(step_delay)  # stands in for real compute in demos and tests
    final = job.pull()
    test_acc = accuracy(final, Xt, yt)
    job.report(test_accuracy=test_acc)
    return test_acc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m frameworks.elastic.examples.digits")
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="train as one elastic worker")
    w.add_argument("--coordinator", help="coordinator URL (default: $AGORA_ELASTIC_COORDINATOR)")
    w.add_argument("--worker-id")
    w.add_argument("--batch", type=int, default=32)
    w.add_argument(
        "--step-delay", type=float, default=0.0, help="seconds to sleep per minibatch (simulated compute)"
    )
    w.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    job = ElasticJob(args.coordinator, args.worker_id) if args.coordinator else ElasticJob.from_env()
    with job:
        print(
            f"worker {job.worker_id}: rank {job.rank} of {job.world_size} (generation {job.generation})",
            flush=True,
        )
        acc = run_worker(job, args.batch, args.step_delay, args.seed)
    print(f"worker {job.worker_id}: done, test accuracy {acc:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
