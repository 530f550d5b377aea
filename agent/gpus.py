"""GPU devices of an agent and which task holds which (pure).

* ``GpuDevice``: one device as NVML describes it (index, UUID, model, memory).
* ``choose_devices``: the devices this agent uses, from what NVML knows (``None``: no NVML),
  ``--nvidia-gpu-devices`` and a ``gpus`` count in ``--resources`` (rules in ``docs/gpus.md``).
* ``GpuBook``: the assignment of devices to tasks. Whole devices by default; with sharing a
  request below one GPU takes a share of one device. ``assign`` never gives a device held by a
  live task to another one (nor more than its capacity with sharing), ``release`` frees a
  task's devices, ``restore`` puts a recovered task's devices back after a restart.
* ``gpu_environment``: what a task's environment says about its devices; ``gpu_attributes``:
  the agent attributes (``gpu_model``, ``gpu_mem_mb``) jobs can constrain on.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping

import attrs

__pure__ = True

MILLI = 1000  # shares are counted in thousandths of a device (the resource algebra's precision)
DECLARED_MODEL = ""  # a device declared by --nvidia-gpu-devices on a machine without NVML


class GpuConfigError(ValueError):
    """A device selection this agent cannot start with (the message names the flag)."""


@attrs.frozen
class GpuDevice:
    index: int  # NVML index (PCI bus order)
    uuid: str
    model: str = DECLARED_MODEL
    memory_mb: int = 0
    minor: int | None = None  # /dev/nvidia<minor>

    @property
    def declared(self) -> bool:
        return self.model == DECLARED_MODEL

    def to_json(self) -> dict[str, object]:
        return {"index": self.index, "uuid": self.uuid, "model": self.model, "memory_mb": self.memory_mb,
                "minor": self.minor}


def declared_device(index: int) -> GpuDevice:
    return GpuDevice(index, f"GPU-declared-{index}")


def parse_device_list(text: str) -> tuple[int, ...]:
    """``--nvidia-gpu-devices``: comma-separated NVML indices (``0,1,3``), each once."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise GpuConfigError(f"--nvidia-gpu-devices must list device indices like 0,1 (got {text!r})")
    out: list[int] = []
    for p in parts:
        if not p.isdigit():
            raise GpuConfigError(f"--nvidia-gpu-devices: {p!r} is not a device index (0, 1, ...)")
        i = int(p)
        if i in out:
            raise GpuConfigError(f"--nvidia-gpu-devices: device {i} is listed twice")
        out.append(i)
    return tuple(out)


def _names(indices: Iterable[int]) -> str:
    return ",".join(str(i) for i in indices) or "none"


def choose_devices(
    known: tuple[GpuDevice, ...] | None,
    requested: tuple[int, ...] | None,
    resources_gpus: float | None,
) -> tuple[GpuDevice, ...]:
    """The devices this agent uses, in index order.

    ``known``: what NVML reports (``None`` where there is no NVML); ``requested``: the indices of
    ``--nvidia-gpu-devices`` (``None`` if not given); ``resources_gpus``: the ``gpus`` that
    ``--resources`` gives (``None`` if it does not mention gpus)."""
    if resources_gpus is not None and (resources_gpus < 0 or resources_gpus != int(resources_gpus)):
        raise GpuConfigError(f"--resources gpus:{resources_gpus:g}: GPUs are whole devices")
    count = None if resources_gpus is None else int(resources_gpus)
    if requested is not None:
        if count is not None and count != len(requested):
            raise GpuConfigError(
                f"--resources gpus:{count} does not match --nvidia-gpu-devices {_names(requested)} "
                f"({len(requested)} device(s))"
            )
        if known is None:
            return tuple(declared_device(i) for i in sorted(requested))
        by_index = {d.index: d for d in known}
        missing = [i for i in requested if i not in by_index]
        if missing:
            raise GpuConfigError(
                f"--nvidia-gpu-devices: NVML knows no device {_names(missing)} on this machine "
                f"(it knows {_names(sorted(by_index))})"
            )
        return tuple(by_index[i] for i in sorted(requested))
    if count is not None:
        if known is None:
            return tuple(declared_device(i) for i in range(count))
        if count > len(known):
            raise GpuConfigError(
                f"--resources gpus:{count}, but NVML reports only {len(known)} device(s) on this machine"
            )
        return tuple(sorted(known, key=lambda d: d.index)[:count])
    return tuple(sorted(known or (), key=lambda d: d.index))


def identity(devices: tuple[GpuDevice, ...]) -> str:
    """What recovery compares besides the resources: the devices by index and UUID ("" for none)."""
    return ";".join(f"{d.index}={d.uuid}" for d in devices)


_ATTR_TEXT = re.compile(r"[^A-Za-z0-9_.\-/]+")


def gpu_attributes(devices: tuple[GpuDevice, ...]) -> dict[str, str | float]:
    """``gpu_model`` (spaces as ``_``; ``mixed`` when the devices differ) and ``gpu_mem_mb`` (the
    smallest device memory), from the devices NVML describes (declared devices have neither)."""
    real = [d for d in devices if not d.declared]
    if not real:
        return {}
    models = {_ATTR_TEXT.sub("_", d.model.strip()).strip("_") or "unknown" for d in real}
    out: dict[str, str | float] = {"gpu_model": models.pop() if len(models) == 1 else "mixed"}
    mems = [d.memory_mb for d in real if d.memory_mb > 0]
    if mems:
        out["gpu_mem_mb"] = float(min(mems))
    return out


def gpu_environment(devices: tuple[GpuDevice, ...], agent_has_gpus: bool) -> dict[str, str]:
    """The task's GPU variables: exactly its devices; on a GPU agent a task without devices is
    told it has none; on an agent without GPUs nothing."""
    if not agent_has_gpus:
        return {}
    if not devices:
        return {"CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "none"}
    ordered = sorted(devices, key=lambda d: d.index)
    indices = ",".join(str(d.index) for d in ordered)
    return {
        "CUDA_VISIBLE_DEVICES": indices,
        "NVIDIA_VISIBLE_DEVICES": indices,
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "AGORA_GPU_UUIDS": ",".join(d.uuid for d in ordered),
    }


# --- the book ----------------------------------------------------------------------------------


@attrs.frozen
class Refused:
    """A request the agent does not run: ``message`` goes into the task's status."""

    message: str
    reason: str  # the status reason
    error: bool  # True: TASK_ERROR (the request itself is wrong); False: TASK_FAILED


def whole(amount: float) -> bool:
    return abs(amount - round(amount)) * MILLI < 0.5


class GpuBook:
    """Which task holds which device. Keys are any hashable task key (the agent uses
    ``(framework_id, task_id)``). Each device has ``MILLI`` thousandths to hand out: a whole-GPU
    request takes all of each of its devices, a shared request (with ``sharing``) part of one."""

    def __init__(self, devices: tuple[GpuDevice, ...], sharing: bool = False) -> None:
        self.devices: dict[int, GpuDevice] = {d.index: d for d in devices}
        self.sharing = sharing
        self._held: dict[Hashable, dict[int, int]] = {}  # task -> device index -> thousandths

    # queries

    def environment(self, indices: tuple[int, ...]) -> dict[str, str]:
        """A task's GPU variables for its devices ``indices`` (``gpu_environment``)."""
        return gpu_environment(tuple(self.devices[i] for i in indices if i in self.devices), bool(self.devices))

    def __contains__(self, key: Hashable) -> bool:
        return key in self._held

    def of(self, key: Hashable) -> tuple[GpuDevice, ...]:
        return tuple(self.devices[i] for i in sorted(self._held.get(key, {})) if i in self.devices)

    def used(self, index: int) -> int:
        """Thousandths of device ``index`` held by live tasks."""
        return sum(h.get(index, 0) for h in self._held.values())

    def holders(self, index: int) -> tuple[Hashable, ...]:
        return tuple(k for k, h in self._held.items() if index in h)

    def free(self) -> tuple[int, ...]:
        """Devices no task holds any part of."""
        return tuple(i for i in sorted(self.devices) if self.used(i) == 0)

    def assignments(self) -> Mapping[Hashable, Mapping[int, int]]:
        return {k: dict(v) for k, v in self._held.items()}

    # changes

    def assign(self, key: Hashable, amount: float) -> tuple[GpuDevice, ...] | Refused:
        """Devices for a task asking for ``amount`` gpus (0: none). A task that holds devices
        already keeps them (a duplicate launch)."""
        if key in self._held:
            return self.of(key)
        if amount <= 0:
            return ()
        milli = round(amount * MILLI)
        if not whole(amount):
            if not self.sharing:
                return Refused(
                    f"gpus {amount:g}: this agent hands out whole GPUs only (a fractional GPU "
                    "request needs an agent started with --gpu-sharing)",
                    "REASON_TASK_INVALID", True,
                )
            if milli > MILLI:
                return Refused(
                    f"gpus {amount:g}: a request above one GPU must be a whole number of GPUs",
                    "REASON_TASK_INVALID", True,
                )
            fits = [i for i in sorted(self.devices) if self.used(i) + milli <= MILLI]
            if not fits:
                return self._short(amount)
            best = max(fits, key=lambda i: (self.used(i), -i))  # pack: the busiest that fits
            self._held[key] = {best: milli}
            return self.of(key)
        n = round(amount)
        free = self.free()
        if len(free) < n:
            return self._short(amount)
        self._held[key] = {i: MILLI for i in free[:n]}
        return self.of(key)

    def _short(self, amount: float) -> Refused:
        busy = {i: self.holders(i) for i in sorted(self.devices) if self.used(i)}
        held = "; ".join(f"{i}: {', '.join(map(_key_text, ks))}" for i, ks in busy.items())
        return Refused(
            f"gpus {amount:g}: not enough free GPUs on this agent ({len(self.free())} of "
            f"{len(self.devices)} free" + (f"; held by {held}" if held else "") + ")",
            "REASON_CONTAINER_LAUNCH_FAILED", False,
        )

    def restore(self, key: Hashable, indices: Iterable[int], amount: float) -> str | None:
        """Put back a recovered task's devices (from its checkpoint). Returns why not, if it
        cannot be (a device this agent no longer has, or one held beyond its capacity); the
        task then holds the devices that could be restored."""
        want = sorted(set(indices))
        milli = MILLI if whole(amount) or len(want) != 1 else round(amount * MILLI)
        got: dict[int, int] = {}
        problems: list[str] = []
        for i in want:
            if i not in self.devices:
                problems.append(f"device {i} is not one of this agent's GPUs")
            elif self.used(i) + milli > MILLI:
                problems.append(f"device {i} is already held by {', '.join(map(_key_text, self.holders(i)))}")
            else:
                got[i] = milli
        if got:
            self._held[key] = got
        return "; ".join(problems) or None

    def release(self, key: Hashable) -> tuple[int, ...]:
        """Free a task's devices (it reached a terminal state); the indices it held."""
        return tuple(sorted(self._held.pop(key, {})))


def _key_text(key: Hashable) -> str:
    if isinstance(key, tuple):
        return "/".join(str(k) for k in key)
    return str(key)
