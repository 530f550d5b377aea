"""Offer filters (DECLINE / ACCEPT ``refuse_seconds``), indexed three ways.

A filter says: do not offer framework F in role R resources on agent A that are contained in
``resources`` until ``expires`` (Mesos refused-resources semantics: if more becomes free on the
agent, the larger offer goes through). Indexed per (framework, role) -> agent (and the same
maps per role -> framework), per agent, and in an expiry heap, so expiry is O(log n), a REVIVE touches only that framework's filters and a
framework filtered on every agent can be skipped without looking at any agent.
"""

from __future__ import annotations

import heapq

from protocol.resources import Resources

__pure__ = True

Key = tuple[str, str]  # (framework_id, role)


class Filter:
    __slots__ = ("expires", "resources", "seq")

    def __init__(self, expires: float, resources: Resources, seq: int) -> None:
        self.expires = expires
        self.resources = resources
        self.seq = seq


class FilterIndex:
    def __init__(self) -> None:
        # (framework, role) -> agent -> filter; no empty inner maps. Read-only outside this class
        # (the DRF stage looks filters up here directly: it is the hot path)
        self.by_key: dict[Key, dict[str, Filter]] = {}
        # the same agent -> filter maps by role, then framework (no tuple key to build)
        self.by_role: dict[str, dict[str, dict[str, Filter]]] = {}
        self._by_agent: dict[str, set[Key]] = {}
        self._heap: list[tuple[float, int, str, str, str]] = []
        self._seq = 0
        self._count = 0  # live filters

    def __len__(self) -> int:
        return self._count

    def add(self, framework_id: str, role: str, agent_id: str, resources: Resources, expires: float) -> None:
        self._seq += 1
        key = (framework_id, role)
        filters = self.by_key.get(key)
        if filters is None:
            filters = self.by_key[key] = {}
            self.by_role.setdefault(role, {})[framework_id] = filters
        if agent_id not in filters:
            self._count += 1
        filters[agent_id] = Filter(expires, resources, self._seq)
        self._by_agent.setdefault(agent_id, set()).add(key)
        heapq.heappush(self._heap, (expires, self._seq, framework_id, role, agent_id))
        if len(self._heap) > 2 * self._count + 1024:
            self._compact()

    def agents_filtered(self, framework_id: str, role: str) -> int:
        filters = self.by_key.get((framework_id, role))
        return len(filters) if filters else 0

    def of(self, framework_id: str, role: str) -> dict[str, Filter] | None:
        """The live agent -> filter map of a (framework, role), or None (hot path)."""
        return self.by_key.get((framework_id, role))

    def filtered(self, framework_id: str, role: str, agent_id: str, candidate: Resources) -> bool:
        filters = self.by_key.get((framework_id, role))
        if not filters:
            return False
        f = filters.get(agent_id)
        return f is not None and f.resources.contains(candidate)

    def expires_at(self, framework_id: str, role: str, agent_id: str) -> float | None:
        filters = self.by_key.get((framework_id, role))
        f = filters.get(agent_id) if filters else None
        return f.expires if f is not None else None

    def next_deadline(self) -> float | None:
        heap = self._heap
        while heap:
            expires, seq, fid, role, agent = heap[0]
            filters = self.by_key.get((fid, role))
            f = filters.get(agent) if filters else None
            if f is not None and f.seq == seq:
                return expires
            heapq.heappop(heap)
        return None

    def expire(self, now: float) -> list[tuple[str, str, str]]:
        """Drop filters that expired at or before ``now``; returns (framework, role, agent)."""
        out: list[tuple[str, str, str]] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, seq, fid, role, agent = heapq.heappop(heap)
            filters = self.by_key.get((fid, role))
            f = filters.get(agent) if filters else None
            if f is not None and f.seq == seq:
                self._drop(fid, role, agent)
                out.append((fid, role, agent))
        return out

    def clear(self, framework_id: str, roles: set[str] | None = None) -> list[str]:
        """Remove a framework's filters (for ``roles`` or all); returns the agents touched."""
        touched: list[str] = []
        for key in [k for k in self.by_key if k[0] == framework_id and (roles is None or k[1] in roles)]:
            filters = self.by_key.pop(key)
            self._unlink(key)
            self._count -= len(filters)
            for agent in filters:
                touched.append(agent)
                keys = self._by_agent.get(agent)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._by_agent[agent]
        return touched

    def on_agent(self, agent_id: str) -> list[tuple[str, str, Resources]]:
        """(framework, role, filtered resources) of every filter on this agent."""
        keys = self._by_agent.get(agent_id)
        if not keys:
            return []
        out = []
        for fid, role in keys:
            f = self.by_key[(fid, role)][agent_id]
            out.append((fid, role, f.resources))
        return out

    def drop(self, framework_id: str, role: str, agent_id: str) -> None:
        self._drop(framework_id, role, agent_id)

    def remove_agent(self, agent_id: str) -> None:
        for key in self._by_agent.pop(agent_id, set()):
            filters = self.by_key.get(key)
            if filters is not None:
                if filters.pop(agent_id, None) is not None:
                    self._count -= 1
                if not filters:
                    del self.by_key[key]
                    self._unlink(key)

    def _compact(self) -> None:
        """Drop heap entries of filters replaced, cleared or removed (lazy deletion leftovers)."""
        live = []
        for entry in self._heap:
            _, seq, fid, role, agent = entry
            filters = self.by_key.get((fid, role))
            f = filters.get(agent) if filters else None
            if f is not None and f.seq == seq:
                live.append(entry)
        heapq.heapify(live)
        self._heap = live

    def _drop(self, fid: str, role: str, agent: str) -> None:
        key = (fid, role)
        filters = self.by_key.get(key)
        if filters is None:
            return
        if filters.pop(agent, None) is not None:
            self._count -= 1
        if not filters:
            del self.by_key[key]
            self._unlink(key)
        keys = self._by_agent.get(agent)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_agent[agent]

    def _unlink(self, key: Key) -> None:
        """Forget an emptied (framework, role) map in ``by_role`` too."""
        fid, role = key
        of_role = self.by_role.get(role)
        if of_role is not None:
            of_role.pop(fid, None)
            if not of_role:
                del self.by_role[role]
