"""The agent's narrow port to NVML (shell): which NVIDIA GPUs this machine has.

``read_devices(lib)`` asks an NVML library (``pynvml`` from nvidia-ml-py, or ``FakeNvml``) for
every device's index, UUID, name, memory and minor number. ``load()`` picks the library:

* ``AGORA_FAKE_NVML=FILE`` in the environment: a ``FakeNvml`` reading ``FILE``, a JSON list of
  devices (``{"uuid": ..., "name": ..., "memory_mb": ...}``, index = position) — for tests and
  dry runs on machines without GPUs; an unreadable file is an error, never silently no GPUs;
* else ``pynvml`` when it imports and ``nvmlInit`` succeeds;
* else ``None``: no NVML on this machine (no driver, no library).

Only these calls are used: ``nvmlInit``, ``nvmlShutdown``, ``nvmlDeviceGetCount``,
``nvmlDeviceGetHandleByIndex``, ``nvmlDeviceGetUUID``, ``nvmlDeviceGetName``,
``nvmlDeviceGetMemoryInfo`` (``.total`` bytes) and ``nvmlDeviceGetMinorNumber``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Protocol

from agent.gpus import GpuDevice

log = logging.getLogger(__name__)

FAKE_ENV = "AGORA_FAKE_NVML"
_MB = 1024 * 1024


class NvmlError(RuntimeError):
    """NVML is present but answers with an error, or the fake's file is unusable."""


class NvmlLibrary(Protocol):
    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...
    def nvmlDeviceGetUUID(self, handle: Any) -> str | bytes: ...
    def nvmlDeviceGetName(self, handle: Any) -> str | bytes: ...
    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any: ...
    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int: ...


class _Memory:
    def __init__(self, total: int) -> None:
        self.total = total
        self.free = total
        self.used = 0


class FakeNvml:
    """NVML's device calls over a fixed list of devices (``[{"uuid", "name", "memory_mb"}]``)."""

    def __init__(self, devices: list[dict[str, Any]]) -> None:
        self._devices = devices
        self.initialized = 0

    @classmethod
    def from_file(cls, path: str | Path) -> FakeNvml:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise NvmlError(f"{FAKE_ENV}={path}: {e}") from e
        if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
            raise NvmlError(f"{FAKE_ENV}={path}: expected a JSON list of device objects")
        return cls(data)

    @staticmethod
    def write(path: str | Path, devices: list[dict[str, Any]]) -> Path:
        """Write a fake NVML file (what tests and dry runs point ``AGORA_FAKE_NVML`` at)."""
        p = Path(path)
        p.write_text(json.dumps(devices))
        return p

    def nvmlInit(self) -> None:
        self.initialized += 1

    def nvmlShutdown(self) -> None:
        self.initialized -= 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self._devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if not 0 <= index < len(self._devices):
            raise NvmlError(f"invalid device index {index}")
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return str(self._devices[handle].get("uuid", f"GPU-fake-{handle}"))

    def nvmlDeviceGetName(self, handle: int) -> str:
        return str(self._devices[handle].get("name", "Fake GPU"))

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> _Memory:
        return _Memory(int(self._devices[handle].get("memory_mb", 0)) * _MB)

    def nvmlDeviceGetMinorNumber(self, handle: int) -> int:
        return int(self._devices[handle].get("minor", handle))


def _text(v: str | bytes) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def load() -> NvmlLibrary | None:
    """The NVML library to ask (see the module docstring), initialized; None without NVML."""
    fake = os.environ.get(FAKE_ENV)
    if fake:
        lib: NvmlLibrary = FakeNvml.from_file(fake)
    else:
        try:
            import pynvml
        except Exception:
            return None
        lib = pynvml
    try:
        lib.nvmlInit()
    except Exception as e:  # no driver, no device, library not found: no NVML here
        log.debug("NVML not available: %s", e)
        return None
    return lib


def read_devices(lib: NvmlLibrary) -> tuple[GpuDevice, ...]:
    """Every device ``lib`` reports (it is initialized; shut down here)."""
    try:
        out = []
        for i in range(int(lib.nvmlDeviceGetCount())):
            h = lib.nvmlDeviceGetHandleByIndex(i)
            try:
                minor: int | None = int(lib.nvmlDeviceGetMinorNumber(h))
            except Exception:
                minor = None
            out.append(
                GpuDevice(
                    index=i,
                    uuid=_text(lib.nvmlDeviceGetUUID(h)),
                    model=_text(lib.nvmlDeviceGetName(h)) or "unknown",
                    memory_mb=int(lib.nvmlDeviceGetMemoryInfo(h).total) // _MB,
                    minor=minor,
                )
            )
        return tuple(out)
    except NvmlError:
        raise
    except Exception as e:
        raise NvmlError(f"NVML failed to describe the GPUs: {e}") from e
    finally:
        try:
            lib.nvmlShutdown()
        except Exception:
            pass


def machine_devices() -> tuple[GpuDevice, ...] | None:
    """This machine's GPUs as NVML reports them; None where there is no NVML."""
    lib = load()
    return None if lib is None else read_devices(lib)
