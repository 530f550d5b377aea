"""The PyTorch adapter of the elastic worker library: the module's parameters go out as numpy
arrays, gradients of ``backward()`` are pushed, and what comes back is loaded into the module.
Runs where PyTorch is installed (the numpy worker path is tested everywhere)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from frameworks.elastic.torch_worker import TorchWorker  # noqa: E402


class ParameterServer:
    """The coordinator's side of init/push/pull, in memory: plain SGD with learning rate 0.5."""

    def __init__(self) -> None:
        self.params: dict[str, np.ndarray] | None = None
        self.pushes: list[dict[str, np.ndarray]] = []

    def init_parameters(self, initial: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self.params is None:
            self.params = {k: v.copy() for k, v in initial.items()}
        return {k: v.copy() for k, v in self.params.items()}

    def pull(self) -> dict[str, np.ndarray]:
        assert self.params is not None
        return {k: v.copy() for k, v in self.params.items()}

    def push(self, grads: dict[str, np.ndarray], **metrics: Any) -> dict[str, np.ndarray]:
        assert self.params is not None
        self.pushes.append(grads)
        self.params = {k: v - 0.5 * grads[k] for k, v in self.params.items()}
        return self.pull()


def test_the_first_workers_parameters_win_and_gradients_go_out() -> None:
    ps = ParameterServer()
    torch.manual_seed(0)
    a = TorchWorker(ps, torch.nn.Linear(3, 2))  # type: ignore[arg-type]
    b = TorchWorker(ps, torch.nn.Linear(3, 2))  # other initial values: the job's are loaded
    for name, p in b.module.named_parameters():
        assert torch.equal(p, dict(a.module.named_parameters())[name])
    x = torch.ones(4, 3)
    b.module(x).sum().backward()
    b.push(samples=4, loss=1.0)
    (grads,) = ps.pushes
    assert set(grads) == {"weight", "bias"} and grads["weight"].dtype == np.float32
    np.testing.assert_allclose(grads["weight"], np.full((2, 3), 4.0))  # d(sum)/dW over 4 rows of ones
    np.testing.assert_allclose(b.module.bias.detach().numpy(), ps.params["bias"])  # type: ignore[index]
    a.pull()
    assert torch.equal(a.module.weight, b.module.weight)


def test_a_parameter_without_a_gradient_is_sent_as_zeros_and_a_different_model_is_refused() -> None:
    ps = ParameterServer()
    w = TorchWorker(ps, torch.nn.Linear(2, 2))  # type: ignore[arg-type]
    assert {k: float(np.abs(v).sum()) for k, v in w.gradients().items()} == {"weight": 0.0, "bias": 0.0}
    with pytest.raises(ValueError, match="shape"):
        TorchWorker(ps, torch.nn.Linear(3, 2))  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="a different model"):
        TorchWorker(ps, torch.nn.Sequential(torch.nn.Linear(2, 2)))  # type: ignore[arg-type]
