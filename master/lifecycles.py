"""The master's framework and agent lifecycles as transition tables (``protocol.transitions``;
tasks use ``protocol.task_states``). An illegal transition raises ``IllegalPhase``: a bug, never
ignored.
"""

from __future__ import annotations

import enum

from protocol.transitions import IllegalMove, Lifecycle

__pure__ = True


class FrameworkPhase(enum.Enum):
    SUBSCRIBED = "SUBSCRIBED"  # connected, stream open
    DISCONNECTED = "DISCONNECTED"  # stream gone; removed at its failover deadline unless it returns
    RECOVERED = "RECOVERED"  # known from the registry after a master restart, not yet re-subscribed
    REMOVED = "REMOVED"  # torn down or failover timeout elapsed (terminal)


class AgentPhase(enum.Enum):
    REGISTERED = "REGISTERED"  # connected, pings answered
    DRAINING = "DRAINING"  # registered, but nothing new is offered (maintenance)
    RECOVERED = "RECOVERED"  # known from the registry after a master restart, not yet back
    UNREACHABLE = "UNREACHABLE"  # missed pings / never came back; tasks UNREACHABLE/LOST
    REMOVED = "REMOVED"  # gone for good (terminal)


IllegalPhase = IllegalMove


F = FrameworkPhase
FRAMEWORK_TRANSITIONS: dict[FrameworkPhase, frozenset[FrameworkPhase]] = {
    # re-subscribing while subscribed is a failover: SUBSCRIBED -> SUBSCRIBED (new stream)
    F.SUBSCRIBED: frozenset({F.SUBSCRIBED, F.DISCONNECTED, F.REMOVED}),
    F.DISCONNECTED: frozenset({F.SUBSCRIBED, F.REMOVED}),
    F.RECOVERED: frozenset({F.SUBSCRIBED, F.REMOVED}),
    F.REMOVED: frozenset(),
}
FRAMEWORK_TERMINAL = frozenset({F.REMOVED})

A = AgentPhase
AGENT_TRANSITIONS: dict[AgentPhase, frozenset[AgentPhase]] = {
    A.REGISTERED: frozenset({A.REGISTERED, A.DRAINING, A.UNREACHABLE, A.REMOVED}),
    A.DRAINING: frozenset({A.DRAINING, A.REGISTERED, A.UNREACHABLE, A.REMOVED}),
    A.RECOVERED: frozenset({A.REGISTERED, A.DRAINING, A.UNREACHABLE, A.REMOVED}),
    # an unreachable agent may come back (re-register) or be removed
    A.UNREACHABLE: frozenset({A.REGISTERED, A.DRAINING, A.REMOVED}),
    A.REMOVED: frozenset(),
}
AGENT_TERMINAL = frozenset({A.REMOVED})


FRAMEWORK = Lifecycle("framework", FRAMEWORK_TRANSITIONS)
AGENT = Lifecycle("agent", AGENT_TRANSITIONS)


def check_framework(old: FrameworkPhase, new: FrameworkPhase) -> None:
    FRAMEWORK.move(old, new)


def check_agent(old: AgentPhase, new: AgentPhase) -> None:
    AGENT.move(old, new)
