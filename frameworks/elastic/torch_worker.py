"""PyTorch workers on the elastic framework: tensors in, gradients out.

``TorchWorker`` binds a ``torch.nn.Module`` to an ``ElasticJob`` (``worker.py``). The job's
parameters live in the coordinator's parameter server, which applies the optimizer (the job's
SGD/momentum); a worker only computes gradients:

```python
from frameworks.elastic.torch_worker import TorchWorker
from frameworks.elastic.worker import ElasticJob

with ElasticJob.from_env() as job:
    model = TorchWorker(job, torch.nn.Sequential(...))   # the first worker's initial values win
    for shard in job.shards():
        for x, y in batches(shard):
            model.module.zero_grad()
            loss = loss_fn(model.module(x), y)
            loss.backward()
            model.push(samples=len(x), loss=loss.item())    # gradients out, fresh parameters in
```

Membership changes are the worker library's as for numpy workers: a worker may join or leave at
any time (a new one starts from the job's current parameters, ``init``), a lease that expired
makes its pushes skipped, SIGTERM returns the lease. Only the module's parameters travel (named
as ``module.named_parameters()`` names them); buffers such as batch-norm statistics stay local.
A parameter without a gradient in a step (unused by that batch) is sent as zeros. Parameters go
over the wire in their own float dtype and are copied back onto the module's device.

PyTorch is not a dependency of Agora: import this module where ``torch`` is installed.
"""

from __future__ import annotations

import numpy as np
import torch

from frameworks.elastic.worker import ElasticJob


class TorchWorker:
    def __init__(self, job: ElasticJob, module: torch.nn.Module, *, init: bool = True) -> None:
        self.job = job
        self.module = module
        if init:
            self.init()

    def parameters(self) -> dict[str, np.ndarray]:
        """The module's parameters as numpy arrays (a copy, on the CPU)."""
        return {name: p.detach().cpu().numpy().copy() for name, p in self.module.named_parameters()}

    def gradients(self) -> dict[str, np.ndarray]:
        """The gradients of the last ``backward()`` (zeros for a parameter that got none)."""
        out: dict[str, np.ndarray] = {}
        for name, p in self.module.named_parameters():
            g = p.grad
            out[name] = np.zeros(tuple(p.shape), dtype=_dtype(p)) if g is None else g.detach().cpu().numpy().copy()
        return out

    def load(self, params: dict[str, np.ndarray]) -> None:
        """Copy ``params`` into the module (same names and shapes; each onto its parameter's device)."""
        with torch.no_grad():
            for name, p in self.module.named_parameters():
                if name not in params:
                    raise KeyError(f"the job's parameters have no {name!r}: a different model?")
                value = torch.from_numpy(np.ascontiguousarray(params[name]))
                if tuple(value.shape) != tuple(p.shape):
                    raise ValueError(f"parameter {name}: the job's shape {tuple(value.shape)} != {tuple(p.shape)}")
                p.copy_(value.to(device=p.device, dtype=p.dtype))

    def init(self) -> None:
        """Offer this module's initial parameters; load the job's (the first offer wins)."""
        self.load(self.job.init_parameters(self.parameters()))

    def pull(self) -> None:
        """Load the job's current parameters."""
        self.load(self.job.pull())

    def push(self, *, samples: int = 0, loss: float | None = None, accuracy: float | None = None) -> None:
        """Send the gradients of the last ``backward()``; the coordinator applies them and the
        fresh parameters are loaded into the module."""
        self.load(self.job.push(self.gradients(), samples=samples, loss=loss, accuracy=accuracy))


def _dtype(p: torch.Tensor) -> np.dtype:
    return np.dtype(str(p.dtype).removeprefix("torch."))
