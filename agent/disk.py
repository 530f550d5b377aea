"""Disk decisions of the agent (pure): a task past its ``disk``, how old a finished sandbox may get
before it is removed, and when the work dir's reserve is taken or put back.

* **Quota** (Mesos ``disk/du`` with enforcement): a task whose sandbox holds more than its
  ``disk`` resource is killed, ``TASK_FAILED`` with ``REASON_CONTAINER_LIMITATION_DISK`` and a
  message with the usage and the limit. The sandbox counts whole (rotated logs included), as
  ``du`` counts it: allocated blocks.
* **Sandbox GC** (Mesos ``--gc_delay``, ``--gc_disk_headroom``): a finished task's sandbox is
  kept ``gc_delay * max(0, 1 - headroom - used)`` seconds, ``used`` being the fraction of the
  work dir's file system in use: the fuller the disk, the sooner; once it is fuller than
  ``1 - headroom``, at once.
* **Reserve**: the agent keeps a preallocated file in its work dir; when a checkpoint write
  finds the file system full it gives the file up, so checkpoints and status updates go on, and
  takes it again once there is room for it twice over.
"""

from __future__ import annotations

__pure__ = True

MB = 1024 * 1024


def _mb(n: int) -> str:
    return f"{n / MB:.1f} MB"


def quota_message(used: int, limit: int | None) -> str | None:
    """The kill message when ``used`` bytes exceed the task's ``limit``, else None."""
    if limit is None or used <= limit:
        return None
    return f"Disk limit exceeded: the sandbox uses {_mb(used)} of the task's {_mb(limit)} disk"


def gc_max_age(gc_delay: float, headroom: float, used_fraction: float) -> float:
    """How long a finished sandbox may stay, given how full its file system is."""
    return gc_delay * max(0.0, 1.0 - headroom - used_fraction)


def restore_reserve(free: int, reserve: int) -> bool:
    """Whether to take the reserve (again): only with room for it twice over."""
    return reserve > 0 and free >= 2 * reserve


__all__ = ["gc_max_age", "quota_message", "restore_reserve"]
