"""Lifecycles as transition tables (pure).

A ``Lifecycle`` names a kind of thing (``"agent"``, ``"elastic worker"``) and, for each state,
the states it may move to; a state with no moves is terminal. Two ways in:

- ``move(old, new)``: a decision of our own. A move the table does not allow is a bug and raises
  ``IllegalMove``; it is never silently ignored.
- ``report(old, new, ignored)``: what a peer says happened (an agent's status, a framework's
  call). A report the table does not allow is not believed: the old state stays and the report is
  counted in ``ignored`` under ``"<kind> OLD->NEW"`` so it shows in metrics instead of in a
  traceback.

Every lifecycle of Agora that is not a task's (``protocol.task_states``) or a job's is one of
these: the master's frameworks and agents (``master.lifecycles``) and the elastic framework's
workers (``frameworks.elastic.jobs``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, MutableMapping
from typing import Generic, TypeVar

import attrs

__pure__ = True

S = TypeVar("S", bound=enum.Enum)


class IllegalMove(ValueError):
    """A move the lifecycle's table does not allow, decided by Agora itself (a bug)."""

    def __init__(self, kind: str, old: enum.Enum, new: enum.Enum) -> None:
        super().__init__(f"illegal {kind} transition {old.name} -> {new.name}")
        self.kind = kind
        self.old = old
        self.new = new


@attrs.frozen
class Lifecycle(Generic[S]):
    kind: str
    moves: Mapping[S, frozenset[S]]

    def __attrs_post_init__(self) -> None:
        states = set(self.moves)
        for old, targets in self.moves.items():
            unknown = set(targets) - states
            if unknown:
                raise ValueError(f"{self.kind}: {old.name} moves to states without a row: {sorted(s.name for s in unknown)}")

    def terminal(self, state: S) -> bool:
        return not self.moves[state]

    def allows(self, old: S, new: S) -> bool:
        return new in self.moves[old]

    def move(self, old: S, new: S) -> S:
        """``new`` if the table allows ``old -> new``; else ``IllegalMove``."""
        if new not in self.moves[old]:
            raise IllegalMove(self.kind, old, new)
        return new

    def report(self, old: S, new: S, ignored: MutableMapping[str, int]) -> S:
        """The state after a peer reports ``new``: ``new`` if allowed, else ``old`` with the
        report counted in ``ignored``."""
        if new in self.moves[old]:
            return new
        key = f"{self.kind} {old.name}->{new.name}"
        ignored[key] = ignored.get(key, 0) + 1
        return old
