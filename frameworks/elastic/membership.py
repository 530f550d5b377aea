"""Membership by generation: the rendezvous of a job's workers.

Workers join, leave and heartbeat; a worker silent for longer than ``heartbeat_timeout`` is
expired. Every change of the member set bumps the *generation*; within a generation each member
has a rank (0..world_size-1, in join order, survivors keep their relative order) and sees the same
peer list. Time is passed in (``now``); nothing here does I/O.
"""

from __future__ import annotations

import attrs

__pure__ = True


class MembershipError(ValueError):
    """Bad membership input (unknown worker, bad id)."""


class UnknownWorker(MembershipError):
    def __init__(self, worker_id: str) -> None:
        super().__init__(f"worker {worker_id!r} is not a member (never joined, left or expired); rejoin")
        self.worker_id = worker_id


@attrs.frozen
class Peer:
    worker_id: str
    address: str
    rank: int


@attrs.frozen
class Generation:
    """One membership epoch: the members in rank order."""

    number: int
    peers: tuple[Peer, ...] = ()

    @property
    def world_size(self) -> int:
        return len(self.peers)

    def rank_of(self, worker_id: str) -> int | None:
        for p in self.peers:
            if p.worker_id == worker_id:
                return p.rank
        return None


@attrs.frozen
class Assignment:
    """What a member learns from join/heartbeat: its place in the current generation."""

    worker_id: str
    generation: int
    rank: int
    world_size: int
    peers: tuple[Peer, ...]


@attrs.frozen
class GenerationChanged:
    """Fact: the member set changed. ``joined``/``left`` say why."""

    generation: Generation
    joined: tuple[str, ...] = ()
    left: tuple[str, ...] = ()
    reason: str = ""


@attrs.define
class _Member:
    worker_id: str
    address: str
    last_seen: float


@attrs.define
class Membership:
    heartbeat_timeout: float
    generation_number: int = 0
    _members: dict[str, _Member] = attrs.field(factory=dict)  # insertion order = join order
    _current: Generation = attrs.field(factory=lambda: Generation(0))

    def __attrs_post_init__(self) -> None:
        if self.heartbeat_timeout <= 0:
            raise MembershipError(f"heartbeat_timeout must be positive, got {self.heartbeat_timeout}")
        self._current = Generation(self.generation_number)

    # -- queries -------------------------------------------------------------------------------
    @property
    def generation(self) -> Generation:
        return self._current

    def is_member(self, worker_id: str) -> bool:
        return worker_id in self._members

    def members(self) -> tuple[str, ...]:
        return tuple(self._members)

    def assignment(self, worker_id: str) -> Assignment:
        rank = self._current.rank_of(worker_id)
        if rank is None:
            raise UnknownWorker(worker_id)
        g = self._current
        return Assignment(worker_id, g.number, rank, g.world_size, g.peers)

    def last_seen(self, worker_id: str) -> float:
        m = self._members.get(worker_id)
        if m is None:
            raise UnknownWorker(worker_id)
        return m.last_seen

    # -- changes -------------------------------------------------------------------------------
    def join(self, worker_id: str, address: str, now: float) -> tuple[Assignment, GenerationChanged | None]:
        """Add a worker (idempotent: a re-join of a live member refreshes it without a new generation
        unless its address changed)."""
        if not worker_id or len(worker_id) > 200:
            raise MembershipError(f"bad worker id {worker_id!r}")
        existing = self._members.get(worker_id)
        if existing is not None and existing.address == address:
            existing.last_seen = now
            return self.assignment(worker_id), None
        if existing is not None:
            existing.address = address
            existing.last_seen = now
            change = self._bump((), (), f"{worker_id} moved to {address}")
        else:
            self._members[worker_id] = _Member(worker_id, address, now)
            change = self._bump((worker_id,), (), f"{worker_id} joined")
        return self.assignment(worker_id), change

    def leave(self, worker_id: str, now: float, reason: str = "left") -> GenerationChanged | None:
        """Remove a worker; leaving twice is a no-op (returns None)."""
        if self._members.pop(worker_id, None) is None:
            return None
        return self._bump((), (worker_id,), f"{worker_id} {reason}")

    def heartbeat(self, worker_id: str, now: float) -> Assignment:
        m = self._members.get(worker_id)
        if m is None:
            raise UnknownWorker(worker_id)
        m.last_seen = max(m.last_seen, now)
        return self.assignment(worker_id)

    def expire(self, now: float) -> GenerationChanged | None:
        """Drop every member not heard from for more than ``heartbeat_timeout``; one generation bump."""
        dead = tuple(w for w, m in self._members.items() if now - m.last_seen > self.heartbeat_timeout)
        if not dead:
            return None
        for w in dead:
            del self._members[w]
        return self._bump((), dead, f"heartbeat timeout: {', '.join(dead)}")

    def next_deadline(self) -> float | None:
        """When the next member would expire if silent (for the shell's timer)."""
        if not self._members:
            return None
        return min(m.last_seen for m in self._members.values()) + self.heartbeat_timeout

    def _bump(self, joined: tuple[str, ...], left: tuple[str, ...], reason: str) -> GenerationChanged:
        self.generation_number += 1
        peers = tuple(Peer(m.worker_id, m.address, i) for i, m in enumerate(self._members.values()))
        self._current = Generation(self.generation_number, peers)
        return GenerationChanged(self._current, joined, left, reason)
