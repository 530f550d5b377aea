"""protocol.transitions: our own illegal moves raise, a peer's are ignored and counted; and the
tables built on it (master frameworks and agents, elastic workers) hold the moves they mean."""

from __future__ import annotations

import enum

import pytest

from frameworks.elastic.jobs import WORKER_LIFECYCLE, Phase, Worker
from master.lifecycles import AGENT, FRAMEWORK, AgentPhase, FrameworkPhase
from protocol.transitions import IllegalMove, Lifecycle


class Light(enum.Enum):
    RED = "RED"
    GREEN = "GREEN"
    OFF = "OFF"


LIGHT = Lifecycle("light", {Light.RED: frozenset({Light.GREEN, Light.OFF}), Light.GREEN: frozenset({Light.RED}), Light.OFF: frozenset()})


def test_move_returns_the_new_state_or_raises_naming_the_move() -> None:
    assert LIGHT.move(Light.RED, Light.GREEN) is Light.GREEN
    with pytest.raises(IllegalMove, match="illegal light transition GREEN -> OFF") as e:
        LIGHT.move(Light.GREEN, Light.OFF)
    assert (e.value.kind, e.value.old, e.value.new) == ("light", Light.GREEN, Light.OFF)
    assert LIGHT.terminal(Light.OFF) and not LIGHT.terminal(Light.RED)
    assert LIGHT.allows(Light.GREEN, Light.RED) and not LIGHT.allows(Light.OFF, Light.RED)


def test_a_peer_report_the_table_refuses_keeps_the_old_state_and_is_counted() -> None:
    ignored: dict[str, int] = {}
    assert LIGHT.report(Light.RED, Light.GREEN, ignored) is Light.GREEN
    assert LIGHT.report(Light.OFF, Light.RED, ignored) is Light.OFF
    assert LIGHT.report(Light.OFF, Light.RED, ignored) is Light.OFF
    assert LIGHT.report(Light.GREEN, Light.OFF, ignored) is Light.GREEN
    assert ignored == {"light OFF->RED": 2, "light GREEN->OFF": 1}


def test_a_table_naming_a_state_without_a_row_is_refused() -> None:
    with pytest.raises(ValueError, match=r"light: RED moves to states without a row: \['OFF'\]"):
        Lifecycle("light", {Light.RED: frozenset({Light.OFF}), Light.GREEN: frozenset()})


def test_every_state_of_each_table_has_a_row_and_only_the_ends_are_terminal() -> None:
    assert {s for s in Phase if WORKER_LIFECYCLE.terminal(s)} == {Phase.ENDED}
    assert {s for s in AgentPhase if AGENT.terminal(s)} == {AgentPhase.REMOVED}
    assert {s for s in FrameworkPhase if FRAMEWORK.terminal(s)} == {FrameworkPhase.REMOVED}


def test_an_elastic_worker_moves_through_its_table() -> None:
    w = Worker("t", 1, 0, "a", "h", "cpus:1", False, Phase.STAGING, 0.0)
    w.to(Phase.RUNNING)
    w.to(Phase.UNREACHABLE)
    with pytest.raises(IllegalMove, match="elastic worker transition UNREACHABLE -> RUNNING"):
        w.to(Phase.RUNNING)  # written off: it is killed if it comes back, never counted again
    w.to(Phase.KILLING)
    w.to(Phase.KILLING)  # a KILL sent again
    w.to(Phase.ENDED)
    with pytest.raises(IllegalMove):
        w.to(Phase.KILLING)
    assert w.phase is Phase.ENDED
