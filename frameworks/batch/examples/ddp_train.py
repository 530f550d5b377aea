"""Data-parallel training across a gang with PyTorch DDP, rendezvous through ``env://``.

Every task of the gang runs this file; the batch framework gives each one ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``, which is all ``torch.distributed``'s
``env://`` rendezvous needs. The backend is NCCL when the task sees a GPU (the agent puts exactly
the task's devices in ``CUDA_VISIBLE_DEVICES``, so its first GPU is ``cuda:0``, whatever its
``LOCAL_RANK``) and gloo on the CPU.

    agora job submit --count 3 --gang 3 --cpus 1 --mem 1024 -- python3 ddp_train.py       # CPU, gloo
    agora job submit --count 2 --gang 2 --gpus 1 --mem 4096 -- python3 ddp_train.py       # GPU, NCCL

The model is a small MLP classifier on a synthetic, seeded data set (nothing is downloaded):
each rank trains on its own part (``DistributedSampler``), DDP averages the gradients, and at the
end every rank checks that its parameters equal rank 0's (an allreduce of their checksum) and
that the held-out accuracy is high. Rank 0 prints the loss per epoch; every rank prints one
``rank R/W: ...`` line. Exit 0 on success, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

FEATURES, CLASSES = 20, 4


def synthetic(n: int, seed: int) -> TensorDataset:
    """Points around CLASSES seeded centres, overlapping a little: a small MLP learns ~97%."""
    g = torch.Generator().manual_seed(1234)
    centres = torch.randn(CLASSES, FEATURES, generator=g) * 0.8
    g.manual_seed(seed)
    y = torch.randint(0, CLASSES, (n,), generator=g)
    x = centres[y] + torch.randn(n, FEATURES, generator=g)
    return TensorDataset(x, y)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args(argv)

    use_cuda = torch.cuda.is_available()
    backend = "nccl" if use_cuda else "gloo"
    device = torch.device("cuda:0" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(1)
    started = time.monotonic()
    dist.init_process_group(backend, init_method="env://")  # MASTER_ADDR/PORT, RANK, WORLD_SIZE
    rank, world = dist.get_rank(), dist.get_world_size()
    assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])
    where = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    joined = time.monotonic() - started

    torch.manual_seed(0)  # the same initial model everywhere (DDP also broadcasts rank 0's)
    model = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, 64), torch.nn.ReLU(), torch.nn.Linear(64, CLASSES)
    ).to(device)
    ddp = DistributedDataParallel(model, device_ids=[0] if use_cuda else None)
    train, test = synthetic(args.samples, seed=1), synthetic(1024, seed=2)
    sampler: DistributedSampler[Any] = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(train, batch_size=args.batch, sampler=sampler)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total = torch.zeros(2, device=device)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            opt.zero_grad()
            loss = loss_fn(ddp(x), y)
            loss.backward()  # DDP allreduces (averages) the gradients here
            opt.step()
            total += torch.tensor([loss.item() * len(y), len(y)], device=device)
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}: loss {float(total[0] / total[1]):.4f} over {int(total[1])} samples", flush=True)

    with torch.no_grad():
        x, y = test.tensors
        accuracy = float((model(x.to(device)).argmax(dim=1) == y.to(device)).float().mean())
        checksum = torch.stack([p.double().sum() for p in model.parameters()]).sum().reshape(1)
        sums = [torch.zeros_like(checksum) for _ in range(world)]
        dist.all_gather(sums, checksum)
    same = all(torch.equal(s, sums[0]) for s in sums)
    print(
        f"rank {rank}/{world}: backend {backend} on {device}, rendezvous {where} in {joined:.2f}s, "
        f"test accuracy {accuracy:.4f}, parameters equal on all ranks: {same} (checksum {float(checksum):.6f})",
        flush=True,
    )
    dist.destroy_process_group()
    return 0 if same and accuracy >= 0.9 else 1


if __name__ == "__main__":
    sys.exit(main())
