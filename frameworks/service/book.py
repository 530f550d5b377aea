"""The book of warm service instances and the tasks in flight on each (pure).

A service instance is one long-running process (the user's command under the service executor)
that takes many tasks, one after the other, over its channel. The book knows, for every
instance, where it runs, how far it has come, and which tasks were sent to it and not yet
answered, in the order they were sent. Its owner (the batch core, or a client library pool)
decides what the tasks are; the book decides nothing about them beyond the window.

Instance lifecycle (``TRANSITIONS``)::

    LAUNCHING --(TASK_RUNNING)--> RUNNING --(channel hello)--> CONNECTED
        |                            |                             |
        +----------------------------+---------> STOPPING <--------+   (told to stop, or killed)
        |                            |              |              |
        +----------------------------+--------------+--------------+--> GONE  (its task ended)

Only a CONNECTED instance takes tasks, at most ``window`` at once. When it is GONE the tasks it
still had come back from ``gone``: the first (the one its worker was on: results come back in
order) apart from the rest (which it had not begun).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

import attrs

__pure__ = True

K = TypeVar("K")


class InstanceState(enum.Enum):
    LAUNCHING = "LAUNCHING"
    RUNNING = "RUNNING"
    CONNECTED = "CONNECTED"
    STOPPING = "STOPPING"
    GONE = "GONE"


TRANSITIONS: dict[InstanceState, frozenset[InstanceState]] = {
    InstanceState.LAUNCHING: frozenset({InstanceState.RUNNING, InstanceState.CONNECTED, InstanceState.STOPPING, InstanceState.GONE}),
    InstanceState.RUNNING: frozenset({InstanceState.CONNECTED, InstanceState.STOPPING, InstanceState.GONE}),
    InstanceState.CONNECTED: frozenset({InstanceState.STOPPING, InstanceState.GONE}),
    InstanceState.STOPPING: frozenset({InstanceState.GONE}),
    InstanceState.GONE: frozenset(),
}
LIVE = frozenset({InstanceState.LAUNCHING, InstanceState.RUNNING, InstanceState.CONNECTED})


class IllegalInstanceTransition(ValueError):
    pass


@attrs.define(eq=False)
class Instance(Generic[K]):
    instance_id: str
    owner: int | str  # whose tasks it runs (a batch job id, a pool's name)
    window: int  # tasks in flight at most
    agent_id: str | None = None
    hostname: str | None = None
    state: InstanceState = InstanceState.LAUNCHING
    inflight: dict[int, K] = attrs.field(factory=dict)  # seq -> task key, in the order sent
    next_seq: int = 0
    answered: int = 0  # results received
    killing: str | None = None  # why we ended it ("stop", "cancel", ...); None: it ended by itself
    message: str | None = None  # how it ended (its task's terminal message)

    @property
    def room(self) -> int:
        """How many more tasks it takes now."""
        if self.state is not InstanceState.CONNECTED:
            return 0
        return self.window - len(self.inflight)

    @property
    def live(self) -> bool:
        return self.state in LIVE


class ServiceBook(Generic[K]):
    """Every instance by id, and each owner's instances."""

    def __init__(self) -> None:
        self.instances: dict[str, Instance[K]] = {}
        self._by_owner: dict[int | str, dict[str, Instance[K]]] = {}

    def __contains__(self, instance_id: object) -> bool:
        return instance_id in self.instances

    def __len__(self) -> int:
        return len(self.instances)

    def get(self, instance_id: str) -> Instance[K] | None:
        return self.instances.get(instance_id)

    def of(self, owner: int | str) -> Iterable[Instance[K]]:
        return self._by_owner.get(owner, {}).values()

    def live_of(self, owner: int | str) -> int:
        return sum(1 for i in self.of(owner) if i.live)

    def __iter__(self) -> Iterator[Instance[K]]:
        return iter(self.instances.values())

    # --- lifecycle ---------------------------------------------------------------------------

    def add(
        self, instance_id: str, owner: int | str, window: int, agent_id: str | None = None, hostname: str | None = None,
        state: InstanceState = InstanceState.LAUNCHING,
    ) -> Instance[K]:
        if instance_id in self.instances:
            raise ValueError(f"instance {instance_id} exists")
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        inst: Instance[K] = Instance(instance_id, owner, window, agent_id, hostname, state)
        self.instances[instance_id] = inst
        self._by_owner.setdefault(owner, {})[instance_id] = inst
        return inst

    def move(self, inst: Instance[K], state: InstanceState) -> None:
        if state is inst.state:
            return
        if state not in TRANSITIONS[inst.state]:
            raise IllegalInstanceTransition(f"instance {inst.instance_id}: {inst.state.name} -> {state.name}")
        inst.state = state

    def running(self, instance_id: str) -> Instance[K] | None:
        """Its task runs (the executor has started). None when unknown or already past it."""
        inst = self.instances.get(instance_id)
        if inst is None or inst.state is not InstanceState.LAUNCHING:
            return None
        self.move(inst, InstanceState.RUNNING)
        return inst

    def connected(self, instance_id: str) -> Instance[K] | None:
        """Its channel is open: it takes tasks. None when unknown, stopping or gone (a channel
        from an instance the owner no longer wants)."""
        inst = self.instances.get(instance_id)
        if inst is None or inst.state not in (InstanceState.LAUNCHING, InstanceState.RUNNING):
            return None
        self.move(inst, InstanceState.CONNECTED)
        return inst

    def stopping(self, inst: Instance[K], why: str) -> None:
        """Told to stop or killed: it takes no more tasks (those in flight may still answer)."""
        if inst.state in LIVE:
            self.move(inst, InstanceState.STOPPING)
        if inst.killing is None:
            inst.killing = why

    def gone(self, instance_id: str, message: str | None = None) -> tuple[Instance[K] | None, K | None, list[K]]:
        """Its task ended: ``(instance, head, rest)`` - the task its worker was on (the oldest
        unanswered) and the others it had, in the order sent. The instance is forgotten."""
        inst = self.instances.pop(instance_id, None)
        if inst is None:
            return None, None, []
        owned = self._by_owner.get(inst.owner)
        if owned is not None:
            owned.pop(instance_id, None)
            if not owned:
                del self._by_owner[inst.owner]
        self.move(inst, InstanceState.GONE)
        inst.message = message
        keys = list(inst.inflight.values())
        inst.inflight.clear()
        return inst, (keys[0] if keys else None), keys[1:]

    # --- tasks -------------------------------------------------------------------------------

    def send(self, inst: Instance[K], key: K) -> int:
        """Record ``key`` as sent to ``inst``; its sequence number on the channel."""
        seq = inst.next_seq
        inst.next_seq = seq + 1
        inst.inflight[seq] = key
        return seq

    def answer(self, inst: Instance[K], seq: int) -> K | None:
        """The result for ``seq`` came: its key (None: not in flight, e.g. sent before a restart)."""
        key = inst.inflight.pop(seq, None)
        if key is not None:
            inst.answered += 1
        return key

    def drop(self, inst: Instance[K], keys: Iterable[K]) -> None:
        """Forget ``keys`` in flight on ``inst`` (their tasks were cancelled): a late answer is ignored."""
        gone = set(keys)
        for seq in [s for s, k in inst.inflight.items() if k in gone]:
            del inst.inflight[seq]
