"""Tentative placement: place a gang's members on a working copy of free resources, then commit
the whole plan or discard it (a Volcano *statement*).

``Tentative`` is the one type the three gang placers share: the allocator's demand stage (a
gang's units on agents, ``master/allocator/demand.py``), the batch planner (a job's tasks on
cached offers, ``frameworks/batch/planner.py``) and the elastic service's start (a job's minimum
workers, ``frameworks/elastic/service_core.py``). The base mapping (key -> free resources) is
never changed until ``commit``; ``free(key)`` reads the working copy; ``place`` records an item
and takes its resources out of the working copy; ``hold``/``release`` move resources in and out
of the working copy without placing anything (what a reservation hides from a job). A draft is
used once: after ``commit`` or ``discard`` it refuses further use (``TentativeClosed``).

Pure: no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Mapping, MutableMapping
from typing import Generic, TypeVar

from protocol.resources import Resources

__pure__ = True

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class TentativeClosed(RuntimeError):
    """A committed or discarded draft was used again."""


class DraftState(enum.Enum):
    OPEN = "open"
    COMMITTED = "committed"
    DISCARDED = "discarded"


class Tentative(Generic[K, T]):
    """A tentative placement over ``free`` (key -> free resources): items placed on a working
    copy, then committed whole (``commit``) or discarded (``discard``).

    Only the keys of ``free`` have a working copy; ``place`` on another key records the item
    without tracking resources (a placer that visits each key once needs no copy)."""

    __slots__ = ("_base", "_items", "_state", "_units", "_work")

    def __init__(self, free: Mapping[K, Resources]) -> None:
        self._base = free
        self._work: dict[K, Resources] = {}  # the keys changed so far, with their working value
        self._items: list[T] = []
        self._units = 0
        self._state = DraftState.OPEN

    # --- reading ---------------------------------------------------------------------------

    @property
    def state(self) -> DraftState:
        return self._state

    def free(self, key: K) -> Resources:
        """The working copy's free resources of ``key`` (``KeyError`` for a key not in the base)."""
        work = self._work
        return work[key] if key in work else self._base[key]

    def get(self, key: K) -> Resources | None:
        """``free(key)``, or None for a key not in the base."""
        work = self._work
        return work[key] if key in work else self._base.get(key)

    def working(self) -> dict[K, Resources]:
        """The whole working copy as a new dict (base with every change applied)."""
        out = dict(self._base)
        out.update(self._work)
        return out

    def changes(self) -> dict[K, Resources]:
        """Only the keys changed so far, with their working value."""
        return dict(self._work)

    @property
    def placed(self) -> list[T]:
        """The items placed so far, in order (a copy)."""
        return list(self._items)

    @property
    def units(self) -> int:
        """How many units were placed (``place``'s ``units`` summed)."""
        return self._units

    def __len__(self) -> int:
        return len(self._items)

    # --- changing the working copy ------------------------------------------------------------

    def place(self, key: K, resources: Resources, item: T, units: int = 1) -> None:
        """Place ``item`` (``units`` units) on ``key``, taking ``resources`` out of its working copy."""
        self._open()
        if key in self._work or key in self._base:
            self._work[key] = self.free(key) - resources
        self._items.append(item)
        self._units += units

    def hold(self, key: K, resources: Resources) -> None:
        """Take ``resources`` out of the working copy without placing anything."""
        self._open()
        self._work[key] = self.free(key) - resources

    def release(self, key: K, resources: Resources) -> None:
        """Put ``resources`` back into the working copy (what ``hold`` took)."""
        self._open()
        self._work[key] = self.free(key) + resources

    # --- ending ---------------------------------------------------------------------------------

    def commit(self, into: MutableMapping[K, Resources] | None = None) -> list[T]:
        """Accept the plan: write the working copy's changes into ``into`` (usually the base
        mapping the draft was made from) and return the placed items."""
        self._open()
        self._state = DraftState.COMMITTED
        if into is not None:
            into.update(self._work)
        return list(self._items)

    def discard(self) -> None:
        """Drop the plan: nothing placed is kept and the base is untouched."""
        self._open()
        self._state = DraftState.DISCARDED

    def _open(self) -> None:
        if self._state is not DraftState.OPEN:
            raise TentativeClosed(f"the tentative placement is already {self._state.value}")
