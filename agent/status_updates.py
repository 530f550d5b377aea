"""The status-update manager: reliable, ordered, per-task streams of status updates (pure core).

Every status update the agent produces for a task enters that task's *stream*. The manager
guarantees:

- **checkpoint before send**: an update is returned as a ``CheckpointUpdate`` effect before any
  ``SendUpdate`` effect for it; the shell runs effects in order. A *terminal* update is
  ``durable`` (the shell awaits its fdatasync before sending); a non-terminal one need only be
  *written* (page cache) before it is sent: an agent crash keeps the page cache, so recovery
  still finds and resends it, and only a machine crash can lose it — which kills the task as
  well, so the update that matters next is a terminal one (LOST/GONE), never a contradiction.
  A lost *terminal* update could be contradicted after a reboot (a second, different terminal
  update), hence its fsync. ``durable_all`` (the agent's ``--sync-updates all``) makes every
  update durable before it is sent;
- **ordered, one in flight**: only the stream's head is sent; later updates wait until the head is
  acknowledged (``SendUpdate.latest_state`` tells the master the newest known state meanwhile);
- **at least once**: the head is resent with capped exponential backoff (jitter injected through
  ``rng``) until an ``Acknowledged`` with its uuid arrives; a duplicate or unknown uuid is ignored;
- **done after the terminal ack**: once the terminal update is acknowledged the stream emits
  ``StreamDone`` (the shell garbage-collects the task's checkpoint) and is forgotten.

While the agent is disconnected the manager is *paused*: nothing is sent and no resend is due;
``Resumed`` sends every stream's head at once (after re-registration).

The core never reads time or randomness: ``now`` is an argument and ``rng`` returns floats in
``[0, 1)``. Payloads (the ``TaskStatus`` objects) are opaque to it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import attrs

from protocol.task_states import TaskState, is_terminal

__pure__ = True

StreamKey = tuple[str, str]  # (framework_id, task_id)


@attrs.frozen
class Update:
    """One status update as the manager sees it; ``status`` is the wire ``TaskStatus``."""

    framework_id: str
    task_id: str
    uuid: bytes
    state: TaskState
    status: Any = attrs.field(eq=False, default=None)

    @property
    def key(self) -> StreamKey:
        return (self.framework_id, self.task_id)


# --- events ---------------------------------------------------------------------------------


@attrs.frozen
class UpdateGenerated:
    """The agent (or an executor) produced a new status update for a task."""

    update: Update


@attrs.frozen
class Acknowledged:
    """The framework's acknowledgement, forwarded by the master."""

    framework_id: str
    task_id: str
    uuid: bytes


@attrs.frozen
class Tick:
    """Time passed; resend the heads whose deadline is due."""


@attrs.frozen
class Paused:
    """The master connection is down: stop sending."""


@attrs.frozen
class Resumed:
    """(Re-)registered with a master: send every stream's head now."""


@attrs.frozen
class Recovered:
    """A stream read back from the checkpoint: ``updates`` in log order, ``acked`` uuids."""

    framework_id: str
    task_id: str
    updates: tuple[Update, ...]
    acked: frozenset[bytes]


Event = UpdateGenerated | Acknowledged | Tick | Paused | Resumed | Recovered


# --- effects --------------------------------------------------------------------------------


@attrs.frozen
class CheckpointUpdate:
    """Append the update to the task's update log before anything is sent; ``durable``: also
    fdatasync it first (terminal updates; see the module docstring)."""

    update: Update
    durable: bool = True


@attrs.frozen
class CheckpointAck:
    """Record that ``uuid`` was acknowledged (no fsync needed: losing it only causes a resend)."""

    framework_id: str
    task_id: str
    uuid: bytes


@attrs.frozen
class SendUpdate:
    update: Update
    attempt: int  # 0 for the first send, then 1, 2, ... for resends
    latest_state: TaskState | None = None


@attrs.frozen
class AckForwarded:
    """An acknowledgement matched the stream's head (the shell tells an executor, if any)."""

    framework_id: str
    task_id: str
    uuid: bytes
    state: TaskState


@attrs.frozen
class StreamDone:
    """The terminal update was acknowledged: the stream is finished and forgotten."""

    framework_id: str
    task_id: str
    final_state: TaskState


@attrs.frozen
class Ignored:
    """An event that changed nothing (duplicate ack, unknown uuid, update after terminal)."""

    framework_id: str
    task_id: str
    why: str


Effect = CheckpointUpdate | CheckpointAck | SendUpdate | AckForwarded | StreamDone | Ignored


# --- configuration and state ----------------------------------------------------------------


@attrs.frozen
class RetryPolicy:
    """Capped exponential resend schedule: ``initial * factor**n`` up to ``maximum``, each delay
    jittered down by up to ``jitter`` (a fraction)."""

    initial: float = 10.0  # Mesos' status_update_retry_interval_min
    maximum: float = 600.0  # Mesos' status_update_retry_interval_max
    factor: float = 2.0
    jitter: float = 0.2

    def __attrs_post_init__(self) -> None:
        if not (0 < self.initial <= self.maximum and self.factor >= 1 and 0 <= self.jitter < 1):
            raise ValueError("retry policy needs 0 < initial <= maximum, factor >= 1, 0 <= jitter < 1")

    def delay(self, attempt: int, u: float) -> float:
        base = min(self.maximum, self.initial * self.factor ** min(attempt, 64))
        return base * (1.0 - self.jitter * u)


@attrs.define
class _Stream:
    pending: deque[Update] = attrs.field(factory=deque)  # head first; head is the one in flight
    seen: set[bytes] = attrs.field(factory=set)
    attempt: int = 0  # sends of the current head so far
    deadline: float | None = None  # when to resend the head (None: not sent / paused)
    terminal_seen: bool = False


class StatusUpdateManager:
    """Pure core: ``handle(event, now) -> list[Effect]``. ``next_deadline()`` tells the shell
    when to deliver the next ``Tick``."""

    def __init__(
        self,
        policy: RetryPolicy | None = None,
        rng: Callable[[], float] | None = None,
        *,
        durable_all: bool = False,
    ) -> None:
        self.policy = policy or RetryPolicy()
        self.durable_all = durable_all  # fdatasync every update before sending, not only terminal ones
        self._rng = rng or (lambda: 0.0)
        self._streams: dict[StreamKey, _Stream] = {}
        self.paused = True  # nothing is sent until the agent has registered

    # --- queries ---------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        ds = [s.deadline for s in self._streams.values() if s.deadline is not None]
        return min(ds) if ds else None

    def pending(self, framework_id: str, task_id: str) -> tuple[Update, ...]:
        s = self._streams.get((framework_id, task_id))
        return tuple(s.pending) if s else ()

    def latest(self, framework_id: str, task_id: str) -> Update | None:
        s = self._streams.get((framework_id, task_id))
        return s.pending[-1] if s and s.pending else None

    def streams(self) -> list[StreamKey]:
        return list(self._streams)

    def __len__(self) -> int:
        return len(self._streams)

    # --- events ----------------------------------------------------------------------------

    def handle(self, event: Event, now: float) -> list[Effect]:
        if isinstance(event, UpdateGenerated):
            return self._generated(event.update, now)
        if isinstance(event, Acknowledged):
            return self._acknowledged(event, now)
        if isinstance(event, Tick):
            return self._tick(now)
        if isinstance(event, Paused):
            self.paused = True
            for s in self._streams.values():
                s.deadline = None
            return []
        if isinstance(event, Resumed):
            self.paused = False
            out: list[Effect] = []
            for s in self._streams.values():
                s.attempt = 0
                out.extend(self._send_head(s, now))
            return out
        if isinstance(event, Recovered):
            return self._recovered(event, now)
        raise TypeError(f"unknown event {event!r}")

    def _generated(self, u: Update, now: float) -> list[Effect]:
        s = self._streams.get(u.key)
        if s is None:
            s = self._streams[u.key] = _Stream()
        if u.uuid in s.seen:
            return [Ignored(u.framework_id, u.task_id, "duplicate update uuid")]
        if s.terminal_seen:
            return [Ignored(u.framework_id, u.task_id, f"{u.state.name} after a terminal update")]
        s.seen.add(u.uuid)
        s.terminal_seen = is_terminal(u.state)
        s.pending.append(u)
        out: list[Effect] = [CheckpointUpdate(u, durable=s.terminal_seen or self.durable_all)]
        if len(s.pending) == 1:
            s.attempt = 0
            out.extend(self._send_head(s, now))
        return out

    def _send_head(self, s: _Stream, now: float) -> list[Effect]:
        if self.paused or not s.pending:
            s.deadline = None
            return []
        head = s.pending[0]
        latest = s.pending[-1].state if len(s.pending) > 1 else None
        eff = SendUpdate(head, s.attempt, latest)
        s.deadline = now + self.policy.delay(s.attempt, self._rng())
        s.attempt += 1
        return [eff]

    def _acknowledged(self, a: Acknowledged, now: float) -> list[Effect]:
        key = (a.framework_id, a.task_id)
        s = self._streams.get(key)
        if s is None:
            return [Ignored(a.framework_id, a.task_id, "acknowledgement for an unknown stream")]
        if not s.pending or s.pending[0].uuid != a.uuid:
            why = "duplicate acknowledgement" if a.uuid in s.seen else "acknowledgement of an unknown uuid"
            if s.pending and a.uuid in {u.uuid for u in s.pending}:
                why = "acknowledgement of an update not yet sent"
            return [Ignored(a.framework_id, a.task_id, why)]
        head = s.pending.popleft()
        out: list[Effect] = [CheckpointAck(a.framework_id, a.task_id, a.uuid)]
        out.append(AckForwarded(a.framework_id, a.task_id, a.uuid, head.state))
        if is_terminal(head.state):
            del self._streams[key]
            out.append(StreamDone(a.framework_id, a.task_id, head.state))
            return out
        s.attempt = 0
        if s.pending:
            out.extend(self._send_head(s, now))
        else:
            s.deadline = None
        return out

    def _tick(self, now: float) -> list[Effect]:
        if self.paused:
            return []
        out: list[Effect] = []
        for s in self._streams.values():
            if s.deadline is not None and s.deadline <= now:
                out.extend(self._send_head(s, now))
        return out

    def _recovered(self, r: Recovered, now: float) -> list[Effect]:
        key = (r.framework_id, r.task_id)
        s = _Stream()
        for u in r.updates:
            if u.uuid in s.seen or s.terminal_seen:
                continue  # a damaged log cannot make the stream lie: first terminal wins
            s.seen.add(u.uuid)
            s.terminal_seen = is_terminal(u.state)
            if u.uuid not in r.acked:
                s.pending.append(u)
        if s.terminal_seen and not s.pending:
            final = next(u.state for u in r.updates if is_terminal(u.state))
            self._streams.pop(key, None)
            return [StreamDone(r.framework_id, r.task_id, final)]
        self._streams[key] = s
        return self._send_head(s, now) if s.pending else []
