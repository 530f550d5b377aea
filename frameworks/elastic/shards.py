"""The shard queue: which pieces of the dataset are to do, leased or done, epoch by epoch.

A worker *leases* a shard for ``lease_timeout`` seconds (renewed by its heartbeats), then
completes or fails it. An expired lease, or the leases of a worker that left or died, go back to
to-do. A shard that fails ``max_failures`` times is *set aside* with the last reason and skipped
in later epochs; so is a shard whose holders *died* (their process ended: the service's terminal
update for it) ``max_failures`` times in a row without anyone completing it - a shard that crashes
its workers outright. A holder that merely went silent (missed heartbeats: descheduled, a network
hiccup) returns its leases without counting a death (``worker_timed_out``); the shards it held are
remembered against it, and count then only if its death is reported afterwards. Epoch ``e+1``
starts when every shard of epoch ``e`` is done or set aside; the
queue is finished after ``epochs`` epochs. Every lease has a unique id, so a late completion from
a worker whose lease was taken back is refused as stale (each shard is done exactly once per
epoch). Pure: time is an argument.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

__pure__ = True


class ShardState(enum.Enum):
    TODO = "TODO"
    LEASED = "LEASED"
    DONE = "DONE"
    SET_ASIDE = "SET_ASIDE"


class ShardError(ValueError):
    """Bad shard-queue input."""


@attrs.frozen
class Lease:
    lease_id: int
    shard: int
    epoch: int
    worker_id: str
    expires_at: float


@attrs.frozen
class LeaseReturned:
    """Fact: a leased shard went back to to-do (``reason``: expired, worker left, released...)."""

    lease: Lease
    reason: str


@attrs.frozen
class SetAside:
    shard: int
    failures: int
    reason: str


class Outcome(enum.Enum):
    ACCEPTED = "ACCEPTED"
    STALE = "STALE"  # the lease is no longer held (expired, returned, epoch moved on)


@attrs.frozen
class FailResult:
    outcome: Outcome
    set_aside: SetAside | None = None


@attrs.define
class ShardQueue:
    num_shards: int
    epochs: int
    lease_timeout: float
    max_failures: int = 3
    epoch: int = 0
    _todo: list[int] = attrs.field(factory=list)
    _leases: dict[int, Lease] = attrs.field(factory=dict)  # lease_id -> lease
    _done: set[int] = attrs.field(factory=set)
    _failures: dict[int, int] = attrs.field(factory=dict)
    _deaths: dict[int, int] = attrs.field(factory=dict)  # holders that died since it was last done
    _set_aside: dict[int, SetAside] = attrs.field(factory=dict)
    # worker -> shards it held when it went silent (a death reported later counts against them)
    _silent: dict[str, tuple[int, ...]] = attrs.field(factory=dict)
    _next_lease_id: int = 1
    completed_total: int = 0

    def __attrs_post_init__(self) -> None:
        if self.num_shards < 1:
            raise ShardError(f"num_shards must be at least 1, got {self.num_shards}")
        if self.epochs < 1:
            raise ShardError(f"epochs must be at least 1, got {self.epochs}")
        if self.lease_timeout <= 0:
            raise ShardError(f"lease_timeout must be positive, got {self.lease_timeout}")
        if self.max_failures < 1:
            raise ShardError(f"max_failures must be at least 1, got {self.max_failures}")
        if not self._todo and not self._done and not self._leases and self.epoch < self.epochs:
            self._todo = [s for s in range(self.num_shards) if s not in self._set_aside]

    # -- queries -------------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self.epoch >= self.epochs

    def state_of(self, shard: int) -> ShardState:
        if shard in self._set_aside:
            return ShardState.SET_ASIDE
        if shard in self._done:
            return ShardState.DONE
        if any(lease.shard == shard for lease in self._leases.values()):
            return ShardState.LEASED
        return ShardState.TODO

    def leases(self) -> tuple[Lease, ...]:
        return tuple(self._leases.values())

    def holds(self, lease_id: int, worker_id: str) -> bool:
        """Whether ``worker_id`` still holds lease ``lease_id``."""
        lease = self._leases.get(lease_id)
        return lease is not None and lease.worker_id == worker_id

    def leases_of(self, worker_id: str) -> tuple[Lease, ...]:
        return tuple(lease for lease in self._leases.values() if lease.worker_id == worker_id)

    def set_aside(self) -> tuple[SetAside, ...]:
        return tuple(self._set_aside.values())

    def counts(self) -> dict[str, int]:
        return {
            "todo": len(self._todo),
            "leased": len(self._leases),
            "done": len(self._done),
            "set_aside": len(self._set_aside),
        }

    def progress(self) -> float:
        """Fraction of all shard-epochs finished (set-aside shards count as finished)."""
        if self.finished:
            return 1.0
        per_epoch = self.num_shards
        return (self.epoch * per_epoch + len(self._done) + len(self._set_aside)) / (self.epochs * per_epoch)

    # -- commands ------------------------------------------------------------------------------
    def lease(self, worker_id: str, now: float) -> Lease | None:
        """Lease the next to-do shard, or None (finished, or the epoch's last shards are leased)."""
        if self.finished or not self._todo:
            return None
        shard = self._todo.pop(0)
        lease = Lease(self._next_lease_id, shard, self.epoch, worker_id, now + self.lease_timeout)
        self._next_lease_id += 1
        self._leases[lease.lease_id] = lease
        return lease

    def renew(self, worker_id: str, now: float) -> tuple[Lease, ...]:
        """Extend every lease the worker holds (called on its heartbeat)."""
        renewed = []
        for lid, lease in list(self._leases.items()):
            if lease.worker_id == worker_id:
                self._leases[lid] = attrs.evolve(
                    lease, expires_at=max(lease.expires_at, now + self.lease_timeout)
                )
                renewed.append(self._leases[lid])
        return tuple(renewed)

    def complete(self, lease_id: int, worker_id: str) -> Outcome:
        lease = self._leases.get(lease_id)
        if lease is None or lease.worker_id != worker_id:
            return Outcome.STALE
        del self._leases[lease_id]
        self._done.add(lease.shard)
        self._deaths.pop(lease.shard, None)
        self._forget_silent(lease.shard)
        self.completed_total += 1
        self._maybe_next_epoch()
        return Outcome.ACCEPTED

    def fail(self, lease_id: int, worker_id: str, reason: str) -> FailResult:
        """The worker could not process the shard: back to to-do, or set aside after max_failures."""
        lease = self._leases.get(lease_id)
        if lease is None or lease.worker_id != worker_id:
            return FailResult(Outcome.STALE)
        del self._leases[lease_id]
        n = self._failures.get(lease.shard, 0) + 1
        self._failures[lease.shard] = n
        if n >= self.max_failures:
            aside = SetAside(lease.shard, n, reason)
            self._set_aside[lease.shard] = aside
            self._maybe_next_epoch()
            return FailResult(Outcome.ACCEPTED, aside)
        self._todo.insert(0, lease.shard)
        return FailResult(Outcome.ACCEPTED)

    def release(self, lease_id: int, worker_id: str, reason: str = "released") -> LeaseReturned | None:
        """Give a lease back without counting a failure (clean worker exit)."""
        lease = self._leases.get(lease_id)
        if lease is None or lease.worker_id != worker_id:
            return None
        return self._return(lease, reason)

    def release_worker(self, worker_id: str, reason: str) -> tuple[LeaseReturned, ...]:
        """Return every lease of a worker that left or died."""
        return tuple(self._return(lease, reason) for lease in self.leases_of(worker_id))

    def worker_timed_out(self, worker_id: str, reason: str) -> tuple[LeaseReturned, ...]:
        """The worker missed its heartbeats: its leases go back to to-do *without* counting a death
        (it may only have been descheduled). The shards are remembered against it, so a death
        reported later (``worker_died``) still counts against them."""
        held = self.leases_of(worker_id)
        if held:
            self._silent[worker_id] = self._silent.get(worker_id, ()) + tuple(le.shard for le in held)
        return tuple(self._return(lease, reason) for lease in held)

    def worker_back(self, worker_id: str) -> None:
        """A silent worker showed it is alive (it rejoined): forget the shards held against it."""
        self._silent.pop(worker_id, None)

    def worker_died(
        self, worker_id: str, reason: str
    ) -> tuple[tuple[LeaseReturned, ...], tuple[SetAside, ...]]:
        """The worker's process died holding leases: they go back to to-do, and a shard whose
        holders died ``max_failures`` times in a row is set aside instead. Shards it held when it
        went silent before count too (a death each), unless they were completed since."""
        back: list[LeaseReturned] = []
        aside: list[SetAside] = []
        for lease in self.leases_of(worker_id):
            del self._leases[lease.lease_id]
            a = self._count_death(lease.shard, reason)
            if a is not None:
                aside.append(a)
            else:
                self._todo.insert(0, lease.shard)
                back.append(LeaseReturned(lease, reason))
        for shard in self._silent.pop(worker_id, ()):
            if shard in self._set_aside:
                continue
            a = self._count_death(shard, reason)
            if a is not None:
                if shard in self._todo:
                    self._todo.remove(shard)
                else:  # leased by another worker now: its lease ends with the shard set aside
                    for lid in [lid for lid, le in self._leases.items() if le.shard == shard]:
                        del self._leases[lid]
                aside.append(a)
        if aside:
            self._maybe_next_epoch()
        return tuple(back), tuple(aside)

    def _forget_silent(self, shard: int) -> None:
        """Someone completed ``shard``: earlier silent holders no longer count against it."""
        for w, shards in list(self._silent.items()):
            left = tuple(x for x in shards if x != shard)
            if left:
                self._silent[w] = left
            else:
                del self._silent[w]

    def _count_death(self, shard: int, reason: str) -> SetAside | None:
        n = self._deaths.get(shard, 0) + 1
        self._deaths[shard] = n
        if n < self.max_failures:
            return None
        a = SetAside(shard, n, f"{n} workers died holding it; last: {reason}")
        self._set_aside[shard] = a
        return a

    def expire(self, now: float) -> tuple[LeaseReturned, ...]:
        """Return every lease past its expiry."""
        late = [lease for lease in self._leases.values() if lease.expires_at <= now]
        return tuple(self._return(lease, f"lease expired (held by {lease.worker_id})") for lease in late)

    def _return(self, lease: Lease, reason: str) -> LeaseReturned:
        del self._leases[lease.lease_id]
        self._todo.insert(0, lease.shard)
        return LeaseReturned(lease, reason)

    def _maybe_next_epoch(self) -> None:
        while not self.finished and len(self._done) + len(self._set_aside) >= self.num_shards:
            self.epoch += 1
            self._done.clear()
            self._todo = (
                [] if self.finished else [s for s in range(self.num_shards) if s not in self._set_aside]
            )

    # -- persistence ---------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Plain data for a checkpoint. Outstanding leases are saved as to-do (their holders will
        find them stale after a restore and the shards are redone)."""
        return {
            "num_shards": self.num_shards,
            "epochs": self.epochs,
            "epoch": self.epoch,
            "done": sorted(self._done),
            "failures": {str(k): v for k, v in self._failures.items()},
            "deaths": {str(k): v for k, v in self._deaths.items()},
            "set_aside": [[a.shard, a.failures, a.reason] for a in self._set_aside.values()],
            "next_lease_id": self._next_lease_id,
            "completed_total": self.completed_total,
        }

    @classmethod
    def restore(cls, snap: dict[str, Any], lease_timeout: float, max_failures: int) -> ShardQueue:
        try:
            aside = {int(s): SetAside(int(s), int(n), str(r)) for s, n, r in snap["set_aside"]}
            done = {int(s) for s in snap["done"]}
            num_shards = int(snap["num_shards"])
            epoch = int(snap["epoch"])
            epochs = int(snap["epochs"])
            q = cls(
                num_shards=num_shards,
                epochs=epochs,
                lease_timeout=lease_timeout,
                max_failures=max_failures,
                epoch=epoch,
                todo=[s for s in range(num_shards) if s not in done and s not in aside]
                if epoch < epochs
                else [],
                done=done,
                failures={int(k): int(v) for k, v in snap["failures"].items()},
                deaths={int(k): int(v) for k, v in snap.get("deaths", {}).items()},
                set_aside=aside,
                next_lease_id=int(snap["next_lease_id"]),
                completed_total=int(snap["completed_total"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ShardError(f"bad shard-queue snapshot: {e!r}") from None
        return q
