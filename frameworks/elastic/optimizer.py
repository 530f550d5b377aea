"""Parameter store with an SGD / momentum optimizer (numpy, in memory). Pure: no I/O.

Gradients are applied as they arrive (asynchronous parameter-server training); every push bumps
the parameter ``version``, so a worker can tell how stale its gradient was. The optimizer state
(momentum velocity) is kept alongside the parameters and saved in checkpoints.
"""

from __future__ import annotations

import numpy as np

__pure__ = True


class OptimizerError(ValueError):
    """Gradients that do not match the parameters, or a bad configuration."""


class ParameterStore:
    def __init__(self, kind: str = "momentum", learning_rate: float = 0.1, momentum: float = 0.9) -> None:
        if kind not in ("sgd", "momentum"):
            raise OptimizerError(f"optimizer kind must be sgd or momentum, got {kind!r}")
        if learning_rate <= 0:
            raise OptimizerError(f"learning_rate must be positive, got {learning_rate}")
        if not 0 <= momentum < 1:
            raise OptimizerError(f"momentum must be in [0, 1), got {momentum}")
        self.kind = kind
        self.learning_rate = learning_rate
        self.momentum = momentum if kind == "momentum" else 0.0
        self.params: dict[str, np.ndarray] = {}
        self.velocity: dict[str, np.ndarray] = {}
        self.version = 0

    @property
    def initialized(self) -> bool:
        return bool(self.params)

    def initialize(self, params: dict[str, np.ndarray]) -> bool:
        """Set the initial parameters unless already set; True if these were taken."""
        if self.initialized:
            return False
        if not params:
            raise OptimizerError("initial parameters must not be empty")
        for name, value in params.items():
            if not np.issubdtype(value.dtype, np.floating):
                raise OptimizerError(f"parameter {name} must be a float array, got {value.dtype}")
        self.params = {k: v.copy() for k, v in params.items()}
        self.velocity = {k: np.zeros_like(v) for k, v in params.items()}
        self.version = 1
        return True

    def apply(self, grads: dict[str, np.ndarray]) -> int:
        """Apply one gradient step; returns the new version."""
        if not self.initialized:
            raise OptimizerError("parameters are not initialized yet (pull, or init first)")
        if set(grads) != set(self.params):
            raise OptimizerError(
                f"gradient names {sorted(grads)} do not match parameters {sorted(self.params)}"
            )
        for name, g in grads.items():
            if g.shape != self.params[name].shape:
                raise OptimizerError(
                    f"gradient {name} has shape {g.shape}, parameter has {self.params[name].shape}"
                )
            if not np.all(np.isfinite(g)):
                raise OptimizerError(f"gradient {name} has non-finite values")
        for name, g in grads.items():
            p = self.params[name]
            step = g.astype(p.dtype, copy=False)
            if self.momentum:
                v = self.velocity[name]
                v *= self.momentum
                v += step
                step = v
            p -= self.learning_rate * step
        self.version += 1
        return self.version

    def load(self, params: dict[str, np.ndarray], velocity: dict[str, np.ndarray], version: int) -> None:
        """Restore from a checkpoint."""
        if set(velocity) - set(params):
            raise OptimizerError("optimizer state names do not match the parameters")
        self.params = {k: v.copy() for k, v in params.items()}
        self.velocity = {
            k: velocity[k].copy() if k in velocity else np.zeros_like(v) for k, v in params.items()
        }
        self.version = version
