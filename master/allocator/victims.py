"""Victim selection: which revocable tasks are revoked when what backs revocable use shrinks (a
usage estimate drops, or the owner of lent reserved / quota-held resources wants them back).

``VictimPolicy`` is the hook (``AllocatorConfig.victims``); ``LowestPriorityLargestFirst`` is the
default: lowest priority first, larger tasks first at equal priority so that as few tasks as
possible go, then by framework and task id (a stable, exact order). A policy gets the agent's
revocable tasks not already being revoked and the amount to free (``over``), and returns the
tasks to revoke; the allocator revokes exactly those (it does not check that they free enough:
a policy that frees less leaves the agent over its backing until the next change).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from master.allocator.state import EMPTY, TaskAlloc
from protocol.resources import Resources

__pure__ = True


class VictimPolicy(Protocol):
    def choose(self, candidates: Sequence[TaskAlloc], over: Resources) -> list[TaskAlloc]:
        """The tasks among ``candidates`` (revocable, not being revoked, on one agent) to revoke
        so that their revocable resources cover ``over``."""
        ...


def revocable_size(task: TaskAlloc) -> float:
    return sum(task.revocable.scalars().values())


class LowestPriorityLargestFirst:
    """Lowest priority first; at equal priority the larger task first (few tasks go); a task
    that frees none of the names still over is skipped; stop once ``over`` is covered."""

    def choose(self, candidates: Sequence[TaskAlloc], over: Resources) -> list[TaskAlloc]:
        ordered = sorted(candidates, key=lambda t: (t.priority, -revocable_size(t), t.framework_id, t.task_id))
        chosen: list[TaskAlloc] = []
        freed = EMPTY
        for task in ordered:
            if freed.contains(over):
                break
            if not (over - freed).scalars().keys() & task.revocable.scalars().keys():
                continue
            chosen.append(task)
            freed = freed + task.revocable
        return chosen
