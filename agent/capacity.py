"""The agent's capacity: probe the machine, then apply the operator's ``--resources`` overrides.

Probed (Mesos defaults):

- ``cpus``: logical cpus (``psutil.cpu_count()``),
- ``mem``: total memory in MB minus a reserve for the agent and the OS — 1 GB when the machine
  has at least 2 GB, half of it otherwise (Mesos' rule), unless ``mem_reserve_mb`` is given,
- ``disk``: MB free on the filesystem holding the work dir (the nearest existing ancestor),
- ``gpus`` are not probed here: they are devices, chosen by ``agent/gpus.py`` from what NVML
  reports (``agent/nvml.py``), ``--nvidia-gpu-devices`` and ``gpus`` in ``--resources``,
- ``ports``: ``[31000-32000]``.

``--resources`` overrides per name with Mesos semantics: every resource *name* the flag mentions
(with any role) replaces the probed entries of that name entirely, so ``cpus(ml):2`` alone means
two cpus reserved for ``ml`` and no unreserved cpus; names the flag does not mention keep the
probed value. Names the machine does not have (``fpgas:2``) are simply added; ``gpus:0``
removes any gpus (the agent then uses no GPU device).
"""

from __future__ import annotations

from pathlib import Path

import psutil

from protocol.resources import ResourceError, Resources

__all__ = [
    "DEFAULT_PORTS",
    "CapacityError",
    "apply_overrides",
    "capacity",
    "mem_reserve_mb",
    "mentioned_names",
    "probe",
]

DEFAULT_PORTS: tuple[tuple[int, int], ...] = ((31000, 32000),)
_MB = 1024 * 1024


class CapacityError(ValueError):
    """A bad ``--resources`` string, or a work dir whose filesystem cannot be examined."""


def mem_reserve_mb(total_mb: int) -> int:
    """Mesos' default memory reserve: 1 GB from machines with >= 2 GB, else half."""
    return 1024 if total_mb >= 2048 else total_mb // 2


def _existing_ancestor(path: Path) -> Path:
    p = path.absolute()
    while not p.exists():
        if p.parent == p:
            break
        p = p.parent
    return p


def _free_disk_mb(work_dir: Path) -> int:
    where = _existing_ancestor(work_dir)
    try:
        return int(psutil.disk_usage(str(where)).free // _MB)
    except OSError as e:
        raise CapacityError(f"cannot measure free disk at {where}: {e.strerror or e}") from e


def probe(
    work_dir: Path | str,
    *,
    mem_reserve: int | None = None,
) -> Resources:
    """Probe this machine's capacity (see the module docstring); never reads ``--resources``."""
    cpus = psutil.cpu_count(logical=True) or 1
    total_mb = int(psutil.virtual_memory().total // _MB)
    reserve = mem_reserve_mb(total_mb) if mem_reserve is None else max(0, int(mem_reserve))
    mem = max(0, total_mb - reserve)
    disk = _free_disk_mb(Path(work_dir))
    return Resources.of(cpus=cpus, mem=mem, disk=disk, ports=DEFAULT_PORTS)


def apply_overrides(probed: Resources, resources_flag: str | Resources | None) -> Resources:
    """Replace probed resources by name with those given in ``--resources`` (Mesos semantics)."""
    if resources_flag is None:
        return probed
    if isinstance(resources_flag, Resources):
        given = resources_flag
    else:
        try:
            given = Resources.parse(resources_flag)
        except ResourceError as e:
            raise CapacityError(f"bad --resources {resources_flag!r}: {e}") from e
    if given.revocable():
        raise CapacityError("--resources cannot declare revocable resources (use a resource estimator)")
    names = mentioned_names(resources_flag) if isinstance(resources_flag, str) else given.names()
    return probed.without(*names) + given


def mentioned_names(flag: str) -> frozenset[str]:
    """Names the flag mentions, including ones given as zero (``gpus:0`` means no gpus)."""
    names = set()
    for raw in flag.split(";"):
        token = raw.strip()
        if not token:
            continue
        head = token.split(":", 1)[0]
        names.add(head.split("(", 1)[0].split("{", 1)[0].strip())
    return frozenset(n for n in names if n)


def capacity(
    work_dir: Path | str,
    resources_flag: str | None = None,
    *,
    mem_reserve: int | None = None,
) -> Resources:
    """The agent's total resources: ``probe(work_dir)`` with ``--resources`` applied (GPUs are
    added by the agent from its devices, ``agent/gpus.py``)."""
    return apply_overrides(probe(work_dir, mem_reserve=mem_reserve), resources_flag)
