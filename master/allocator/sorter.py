"""Sorters: the ``Sorter`` interface every allocation stage orders clients through, the weighted
DRF sorter behind it (the default), and a first-come sorter (``AgeSorter``) that shows the seam.

The role tree (``roles.py``), the ledger's revocable sorter and every stage use only the
``Sorter`` methods; which class is built is ``AllocatorConfig.sorter`` (a factory taking the
shared ``Totals``), so another ordering policy plugs in without touching a stage.

``DRFSorter`` orders named clients by dominant share (allocation over cluster total, maximum
over the resource names that count for fairness) divided by weight, ties broken by age (the
order clients were added). Changing one client's allocation repositions only that client
(``bisect``); a change of the cluster total marks the sorter stale and it re-sorts once, lazily,
the next time it is read. Only *active* clients are in the ordered list, so a deactivated
client (inactive framework, fully suppressed or fully filtered) costs nothing to skip.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

__pure__ = True

Scalars = dict[str, float]
SortKey = tuple[float, int, str]  # (weighted share or other rank, age, client name)


class Totals:
    """Cluster totals per scalar name, shared by every sorter, plus the names excluded from
    fair sharing. ``version`` bumps on every change so sorters know they are stale."""

    __slots__ = ("excluded", "fair", "values", "version")

    def __init__(self, excluded: Iterable[str] = ()) -> None:
        self.values: Scalars = {}
        self.excluded = frozenset(excluded)
        # the positive totals of the names that count for fairness (what shares divide by)
        self.fair: Scalars = {}
        self.version = 0

    def add(self, scalars: Mapping[str, float], sign: float = 1.0) -> None:
        values = self.values
        fair = self.fair
        for name, value in scalars.items():
            total = values[name] = values.get(name, 0.0) + sign * value
            if total > 0.0 and name not in self.excluded:
                fair[name] = total
            else:
                fair.pop(name, None)
        self.version += 1

    def share(self, alloc: Mapping[str, float]) -> float:
        values = self.values
        excluded = self.excluded
        best = 0.0
        for name, value in alloc.items():
            if value <= 0.0 or name in excluded:
                continue
            total = values.get(name, 0.0)
            if total > 0.0:
                s = value / total
                if s > best:
                    best = s
        return best


def _add_into(acc: Scalars, scalars: Mapping[str, float], sign: float) -> None:
    get = acc.get
    for key, value in scalars.items():
        new = get(key, 0.0) + sign * value
        if new > 1e-9:
            acc[key] = new
        else:
            acc.pop(key, None)


class _Client:
    __slots__ = ("active", "alloc", "key", "name", "seq", "weight")

    def __init__(self, name: str, seq: int, weight: float) -> None:
        self.name = name
        self.seq = seq
        self.weight = weight
        self.alloc: Scalars = {}
        self.active = True
        self.key: tuple[float, int, str] = (0.0, seq, name)


class Sorter(Protocol):
    """An ordering of named clients (frameworks of a role, child roles of a role, revocable
    frameworks) that the allocation stages serve first to last.

    Allocations are kept per client (``update``/``grow``, or ``moved`` after a caller-owned
    ``alloc`` dict passed to ``add`` changed); only *active* clients are ordered. ``first_keys``
    is the live ordered list of ``(rank, age, name)`` keys: callers read ``key[2]`` and read the
    list again after any update (the order may have changed)."""

    def __contains__(self, name: object) -> bool: ...

    def __len__(self) -> int: ...

    def names(self) -> list[str]: ...

    def add(self, name: str, weight: float = 1.0, alloc: Scalars | None = None) -> None: ...

    def remove(self, name: str) -> None: ...

    def set_weight(self, name: str, weight: float) -> None: ...

    def activate(self, name: str) -> None: ...

    def deactivate(self, name: str) -> None: ...

    def is_active(self, name: str) -> bool: ...

    def allocation(self, name: str) -> Scalars: ...

    def share(self, name: str) -> float: ...

    def update(
        self, name: str, scalars: Mapping[str, float], sign: float = 1.0, also: Scalars | None = None
    ) -> None: ...

    def grow(self, name: str, quantities: Mapping[str, float], also: Scalars) -> None: ...

    def moved(self, name: str, scalars: Mapping[str, float], sign: float = 1.0) -> None: ...

    def sorted(self) -> list[str]: ...

    def first_keys(self) -> Sequence[SortKey]: ...


SorterFactory = Callable[[Totals], Sorter]


class DRFSorter:
    """Weighted DRF order over clients (frameworks of a role, or child roles of a role)."""

    __slots__ = ("_clients", "_keys", "_lazy", "_seq", "_totals", "_version")

    def __init__(self, totals: Totals) -> None:
        self._totals = totals
        self._clients: dict[str, _Client] = {}
        self._keys: list[tuple[float, int, str]] = []
        self._seq = 0
        self._version = totals.version
        self._lazy = False  # a lone client's key is recomputed only when order matters

    def __contains__(self, name: object) -> bool:
        return name in self._clients

    def __len__(self) -> int:
        return len(self._clients)

    def names(self) -> list[str]:
        return list(self._clients)

    def add(self, name: str, weight: float = 1.0, alloc: Scalars | None = None) -> None:
        """Add a client. ``alloc`` may be a dict owned and kept current by the caller (then
        call ``moved`` instead of ``update`` after changing it)."""
        if name in self._clients:
            return
        # a lone client's key may be stale (``moved`` need not be called while it is alone)
        self._refresh(force=self._lazy or len(self._clients) == 1)
        self._seq += 1
        client = _Client(name, self._seq, weight)
        if alloc is not None:
            client.alloc = alloc
        client.key = self._key(client)
        self._clients[name] = client
        insort(self._keys, client.key)

    def remove(self, name: str) -> None:
        client = self._clients.pop(name, None)
        if client is not None and client.active:
            self._drop_key(client)

    def set_weight(self, name: str, weight: float) -> None:
        client = self._clients.get(name)
        if client is not None:
            client.weight = weight
            self._reposition(client)

    def activate(self, name: str) -> None:
        client = self._clients.get(name)
        if client is not None and not client.active:
            client.active = True
            client.key = self._key(client)
            insort(self._keys, client.key)

    def deactivate(self, name: str) -> None:
        client = self._clients.get(name)
        if client is not None and client.active:
            self._drop_key(client)
            client.active = False

    def is_active(self, name: str) -> bool:
        client = self._clients.get(name)
        return client is not None and client.active

    def allocation(self, name: str) -> Scalars:
        client = self._clients.get(name)
        return dict(client.alloc) if client is not None else {}

    def share(self, name: str) -> float:
        client = self._clients.get(name)
        if client is None:
            return 0.0
        return self._totals.share(client.alloc) / client.weight if client.weight > 0 else float("inf")

    def update(
        self, name: str, scalars: Mapping[str, float], sign: float = 1.0, also: Scalars | None = None
    ) -> None:
        """Add (``sign=1``) or remove (``sign=-1``) an allocation and reposition the client.
        ``also`` (the owner's sum over its clients, e.g. a role's allocation) gets the same
        change."""
        if sign > 0:
            if sign != 1.0:
                scalars = {key: sign * value for key, value in scalars.items()}
                sign = 1.0
            if min(scalars.values(), default=0.0) >= 0:
                self.grow(name, scalars, also if also is not None else {})
                return
        client = self._clients.get(name)
        if also is not None:
            _add_into(also, scalars, sign)
        if client is None:
            return
        _add_into(client.alloc, scalars, sign)
        self._move(client, False, scalars)

    def grow(self, name: str, quantities: Mapping[str, float], also: Scalars) -> None:
        """``update(name, quantities, +1, also)`` for non-negative quantities (an offer made, a
        task started: the hot path). Only the grown names can raise the dominant share, so it is
        computed in the same loop that updates the allocations, and the key is moved at once."""
        client = self._clients.get(name)
        if client is None:
            _add_into(also, quantities, 1.0)
            return
        alloc = client.alloc
        get = alloc.get
        also_get = also.get
        fair = self._totals.fair
        best = 0.0
        for key, value in quantities.items():
            new = get(key, 0.0) + value
            if new > 1e-9:
                alloc[key] = new
                total = fair.get(key)
                if total is not None:
                    share = new / total
                    if share > best:
                        best = share
            else:
                alloc.pop(key, None)
            new = also_get(key, 0.0) + value
            if new > 1e-9:
                also[key] = new
            else:
                also.pop(key, None)
        if self._deferred(client):
            return
        old = client.key[0] * client.weight
        self._place(client, best if best > old else old)

    def moved(self, name: str, scalars: Mapping[str, float], sign: float = 1.0) -> None:
        """A client with a caller-owned ``alloc`` changed by ``sign * scalars``: reposition.
        Optional while the client is alone (``add`` re-keys a lone client first)."""
        if len(self._clients) == 1:
            self._lazy = True
            return
        client = self._clients.get(name)
        if client is not None:
            self._move(client, sign > 0 and min(scalars.values(), default=0.0) >= 0, scalars)

    def _move(self, client: _Client, grew: bool, scalars: Mapping[str, float]) -> None:
        if self._deferred(client):
            return
        alloc = client.alloc
        # recompute the weighted dominant share and move the key
        totals = self._totals
        values = totals.values
        excluded = totals.excluded
        best = 0.0
        if grew:  # only the changed names can raise the dominant share
            best = client.key[0] * client.weight
            names = scalars
        else:
            names = alloc
        for key in names:
            if key in excluded:
                continue
            total = values.get(key, 0.0)
            if total > 0.0:
                share = alloc.get(key, 0.0) / total
                if share > best:
                    best = share
        self._place(client, best)

    def _deferred(self, client: _Client) -> bool:
        """Handle a move the cheap way when one exists: a lone client is re-keyed lazily (by the
        next ``add``), and stale totals need a full ``_reposition``. True when handled."""
        if len(self._clients) == 1:
            self._lazy = True
            return True
        if self._lazy or self._version != self._totals.version:
            self._reposition(client)
            return True
        return False

    def _place(self, client: _Client, best: float) -> None:
        """Give the client the key of (unweighted) dominant share ``best`` and move it there."""
        weight = client.weight
        new_key = (best / weight if weight > 0 else float("inf"), client.seq, client.name)
        old_key = client.key
        client.key = new_key
        if client.active and new_key != old_key:
            keys = self._keys
            if keys and keys[0] is old_key:  # DRF serves the first client: no search
                del keys[0]
            else:
                i = bisect_left(keys, old_key)
                if i < len(keys) and keys[i] == old_key:
                    del keys[i]
                else:
                    client.key = old_key
                    self._drop_key(client)
                    client.key = new_key
            insort(keys, new_key)

    def sorted(self) -> list[str]:
        """Active clients, lowest weighted share first (a fresh list)."""
        self._refresh()
        return [key[2] for key in self._keys]

    def first_keys(self) -> list[SortKey]:
        """The live ordered key list (do not mutate); callers must re-read after updates."""
        if self._lazy or self._version != self._totals.version:
            self._refresh()
        return self._keys

    # --- internals ------------------------------------------------------------------------

    def _key(self, client: _Client) -> tuple[float, int, str]:
        share = self._totals.share(client.alloc)
        weighted = share / client.weight if client.weight > 0 else float("inf")
        return (weighted, client.seq, client.name)

    def _drop_key(self, client: _Client) -> None:
        keys = self._keys
        if self._version == self._totals.version and not self._lazy:
            i = bisect_left(keys, client.key)
            if i < len(keys) and keys[i] == client.key:
                del keys[i]
                return
        # stale (totals changed since the last sort): the listed key may differ; scan by name
        name = client.name
        for i, key in enumerate(keys):
            if key[2] == name:
                del keys[i]
                return

    def _reposition(self, client: _Client) -> None:
        if self._lazy:
            self._refresh(force=True)
        if self._version != self._totals.version:
            client.key = self._key(client)
            return  # the whole list is re-sorted on the next read
        new_key = self._key(client)
        if client.active:
            if new_key != client.key:
                self._drop_key(client)
                client.key = new_key
                insort(self._keys, new_key)
        else:
            client.key = new_key

    def _refresh(self, force: bool = False) -> None:
        if not force and self._version == self._totals.version:
            if not self._lazy:
                return
            if len(self._clients) <= 1:  # a lone client: its key's value does not matter
                self._lazy = False
                return
        self._version = self._totals.version
        self._lazy = False
        for client in self._clients.values():
            client.key = self._key(client)
        self._keys = sorted(c.key for c in self._clients.values() if c.active)


class AgeSorter:
    """First come, first served: active clients in the order they were added, whatever they
    hold (no fairness). Allocations are still kept (``allocation``, ``share``) so views and
    quota see the same numbers as under DRF; only the order differs."""

    __slots__ = ("_active", "_allocs", "_keys", "_seq", "_totals", "_weights")

    def __init__(self, totals: Totals) -> None:
        self._totals = totals
        self._allocs: dict[str, Scalars] = {}
        self._weights: dict[str, float] = {}
        self._active: dict[str, SortKey] = {}  # name -> key, for the active clients
        self._keys: list[SortKey] = []
        self._seq = 0

    def __contains__(self, name: object) -> bool:
        return name in self._allocs

    def __len__(self) -> int:
        return len(self._allocs)

    def names(self) -> list[str]:
        return list(self._allocs)

    def add(self, name: str, weight: float = 1.0, alloc: Scalars | None = None) -> None:
        if name in self._allocs:
            return
        self._seq += 1
        self._allocs[name] = alloc if alloc is not None else {}
        self._weights[name] = weight
        key = (0.0, self._seq, name)
        self._active[name] = key
        insort(self._keys, key)

    def remove(self, name: str) -> None:
        if self._allocs.pop(name, None) is not None:
            self._weights.pop(name, None)
            self.deactivate(name)

    def set_weight(self, name: str, weight: float) -> None:
        if name in self._weights:
            self._weights[name] = weight

    def activate(self, name: str) -> None:
        if name in self._allocs and name not in self._active:
            self._seq += 1  # back in line at the end, as a queue would take it
            key = (0.0, self._seq, name)
            self._active[name] = key
            insort(self._keys, key)

    def deactivate(self, name: str) -> None:
        key = self._active.pop(name, None)
        if key is not None:
            del self._keys[bisect_left(self._keys, key)]

    def is_active(self, name: str) -> bool:
        return name in self._active

    def allocation(self, name: str) -> Scalars:
        return dict(self._allocs.get(name, {}))

    def share(self, name: str) -> float:
        alloc = self._allocs.get(name)
        if alloc is None:
            return 0.0
        weight = self._weights.get(name, 1.0)
        return self._totals.share(alloc) / weight if weight > 0 else float("inf")

    def update(
        self, name: str, scalars: Mapping[str, float], sign: float = 1.0, also: Scalars | None = None
    ) -> None:
        if also is not None:
            _add_into(also, scalars, sign)
        alloc = self._allocs.get(name)
        if alloc is not None:
            _add_into(alloc, scalars, sign)

    def grow(self, name: str, quantities: Mapping[str, float], also: Scalars) -> None:
        self.update(name, quantities, 1.0, also)

    def moved(self, name: str, scalars: Mapping[str, float], sign: float = 1.0) -> None:
        return  # the order does not depend on allocations

    def sorted(self) -> list[str]:
        return [key[2] for key in self._keys]

    def first_keys(self) -> list[SortKey]:
        return self._keys


# the sorters a master can be started with (``--role_sorter``/``--framework_sorter``): Mesos'
# ``drf`` and Agora's ``age``
SORTERS: dict[str, SorterFactory] = {"drf": DRFSorter, "age": AgeSorter}


def sorter_named(name: str) -> SorterFactory:
    """The factory of the sorter ``name`` (``SORTERS``); ``ValueError`` naming the known ones."""
    factory = SORTERS.get(name)
    if factory is None:
        raise ValueError(f"unknown sorter {name!r} (one of: {', '.join(sorted(SORTERS))})")
    return factory
