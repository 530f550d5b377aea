"""The status-update manager: order, hold-until-ack, resend schedule, dedupe, GC."""

from __future__ import annotations

import pytest

from agent.status_updates import (
    AckForwarded,
    Acknowledged,
    CheckpointAck,
    CheckpointUpdate,
    Ignored,
    Paused,
    Recovered,
    Resumed,
    RetryPolicy,
    SendUpdate,
    StatusUpdateManager,
    StreamDone,
    Tick,
    Update,
    UpdateGenerated,
)
from protocol.task_states import TaskState as S


def upd(n: int, state: S = S.TASK_RUNNING, task: str = "t1") -> Update:
    return Update("f1", task, bytes([n]) * 16, state)


def mgr(jitter: float = 0.0, u: float = 0.0) -> StatusUpdateManager:
    m = StatusUpdateManager(RetryPolicy(initial=1.0, maximum=8.0, factor=2.0, jitter=jitter), rng=lambda: u)
    m.handle(Resumed(), 0.0)
    return m


def sends(effects: list) -> list[Update]:
    return [e.update for e in effects if isinstance(e, SendUpdate)]


def test_checkpoint_comes_before_send() -> None:
    m = mgr()
    eff = m.handle(UpdateGenerated(upd(1)), 0.0)
    assert [type(e) for e in eff] == [CheckpointUpdate, SendUpdate]
    assert isinstance(eff[0], CheckpointUpdate) and isinstance(eff[1], SendUpdate)
    assert eff[0].update == eff[1].update == upd(1)


def test_only_terminal_updates_must_be_durable_before_sending() -> None:
    m = mgr()
    running = m.handle(UpdateGenerated(upd(1)), 0.0)
    finished = m.handle(UpdateGenerated(upd(2, S.TASK_FINISHED)), 0.1)
    assert running[0] == CheckpointUpdate(upd(1), durable=False)
    assert finished[0] == CheckpointUpdate(upd(2, S.TASK_FINISHED), durable=True)


def test_sync_updates_all_makes_every_update_durable_before_sending() -> None:
    m = StatusUpdateManager(RetryPolicy(initial=1.0, maximum=8.0), durable_all=True)
    m.handle(Resumed(), 0.0)
    running = m.handle(UpdateGenerated(upd(1)), 0.0)
    assert running[0] == CheckpointUpdate(upd(1), durable=True)
    assert sends(running) == [upd(1)]


def test_sync_updates_is_validated() -> None:
    import pytest

    from agent.config import AgentConfig, ConfigError

    assert AgentConfig("127.0.0.1:5050", "/tmp/w", sync_updates="all").sync_updates == "all"
    with pytest.raises(ConfigError, match="--sync-updates"):
        AgentConfig("127.0.0.1:5050", "/tmp/w", sync_updates="sometimes")


def test_later_updates_are_held_until_ack_then_sent_in_order() -> None:
    m = mgr()
    m.handle(UpdateGenerated(upd(1)), 0.0)
    eff = m.handle(UpdateGenerated(upd(2, S.TASK_FINISHED)), 0.1)
    assert [type(e) for e in eff] == [CheckpointUpdate]  # checkpointed, not sent
    # a resend of the head now tells the master the latest state
    eff = m.handle(Tick(), 1.0)
    assert eff == [SendUpdate(upd(1), 1, S.TASK_FINISHED)]
    eff = m.handle(Acknowledged("f1", "t1", upd(1).uuid), 1.5)
    assert [type(e) for e in eff] == [CheckpointAck, AckForwarded, SendUpdate]
    assert sends(eff) == [upd(2, S.TASK_FINISHED)]


def test_resend_schedule_is_capped_exponential() -> None:
    m = mgr()
    m.handle(UpdateGenerated(upd(1)), 0.0)
    times = []
    now = 0.0
    for _ in range(7):
        d = m.next_deadline()
        assert d is not None
        assert m.handle(Tick(), d - 0.001) == []  # not yet due
        now = d
        eff = m.handle(Tick(), now)
        assert sends(eff) == [upd(1)]
        times.append(now)
    gaps = [round(b - a, 6) for a, b in zip([0.0, *times], times, strict=False)]
    assert gaps == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0]


def test_jitter_is_injected_and_shortens_delays() -> None:
    m = mgr(jitter=0.5, u=1.0)
    m.handle(UpdateGenerated(upd(1)), 10.0)
    assert m.next_deadline() == 10.5


def test_duplicate_and_unknown_acks_are_ignored() -> None:
    m = mgr()
    m.handle(UpdateGenerated(upd(1)), 0.0)
    m.handle(UpdateGenerated(upd(2)), 0.0)
    assert isinstance(m.handle(Acknowledged("f1", "t1", upd(9).uuid), 0.0)[0], Ignored)
    # ack of the held (not yet sent) update does not skip the head
    assert isinstance(m.handle(Acknowledged("f1", "t1", upd(2).uuid), 0.0)[0], Ignored)
    assert m.pending("f1", "t1") == (upd(1), upd(2))
    m.handle(Acknowledged("f1", "t1", upd(1).uuid), 0.0)
    assert isinstance(m.handle(Acknowledged("f1", "t1", upd(1).uuid), 0.0)[0], Ignored)
    assert isinstance(m.handle(Acknowledged("f9", "t9", upd(1).uuid), 0.0)[0], Ignored)


def test_duplicate_update_uuid_and_update_after_terminal_are_ignored() -> None:
    m = mgr()
    m.handle(UpdateGenerated(upd(1)), 0.0)
    assert isinstance(m.handle(UpdateGenerated(upd(1)), 0.0)[0], Ignored)
    m.handle(UpdateGenerated(upd(2, S.TASK_FAILED)), 0.0)
    assert isinstance(m.handle(UpdateGenerated(upd(3, S.TASK_FINISHED)), 0.0)[0], Ignored)


def test_terminal_ack_finishes_and_forgets_the_stream() -> None:
    m = mgr()
    m.handle(UpdateGenerated(upd(1, S.TASK_FINISHED)), 0.0)
    eff = m.handle(Acknowledged("f1", "t1", upd(1).uuid), 0.2)
    assert StreamDone("f1", "t1", S.TASK_FINISHED) in eff
    assert len(m) == 0 and m.next_deadline() is None
    assert m.handle(Tick(), 100.0) == []


def test_streams_are_independent() -> None:
    m = mgr()
    m.handle(UpdateGenerated(upd(1, task="a")), 0.0)
    eff = m.handle(UpdateGenerated(upd(2, task="b")), 0.0)
    assert sends(eff) == [upd(2, task="b")]


def test_paused_sends_nothing_and_resume_sends_heads() -> None:
    m = StatusUpdateManager(RetryPolicy(initial=1.0, maximum=4.0, jitter=0.0))
    eff = m.handle(UpdateGenerated(upd(1)), 0.0)
    assert [type(e) for e in eff] == [CheckpointUpdate]
    assert m.next_deadline() is None
    eff = m.handle(Resumed(), 5.0)
    assert eff == [SendUpdate(upd(1), 0, None)]
    m.handle(Paused(), 6.0)
    assert m.handle(Tick(), 100.0) == [] and m.next_deadline() is None


def test_recovery_resends_unacked_in_order_and_drops_finished_streams() -> None:
    m = mgr()
    eff = m.handle(
        Recovered("f1", "t1", (upd(1), upd(2), upd(3, S.TASK_FINISHED)), frozenset({upd(1).uuid})), 0.0
    )
    assert eff == [SendUpdate(upd(2), 0, S.TASK_FINISHED)]
    eff = m.handle(
        Recovered("f1", "t2", (upd(4, task="t2"), upd(5, S.TASK_KILLED, "t2")), frozenset({upd(4).uuid, upd(5).uuid})),
        0.0,
    )
    assert eff == [StreamDone("f1", "t2", S.TASK_KILLED)]
    # a recovered stream with everything acked but not terminal accepts new updates
    m.handle(Recovered("f1", "t3", (upd(6, task="t3"),), frozenset({upd(6).uuid})), 0.0)
    assert sends(m.handle(UpdateGenerated(upd(7, S.TASK_FINISHED, "t3")), 0.0)) == [upd(7, S.TASK_FINISHED, "t3")]


def test_recovered_log_with_two_terminals_keeps_the_first() -> None:
    m = mgr()
    eff = m.handle(Recovered("f1", "t1", (upd(1, S.TASK_FAILED), upd(2, S.TASK_FINISHED)), frozenset()), 0.0)
    assert sends(eff) == [upd(1, S.TASK_FAILED)]
    eff = m.handle(Acknowledged("f1", "t1", upd(1).uuid), 0.0)
    assert StreamDone("f1", "t1", S.TASK_FAILED) in eff


def test_default_schedule_is_mesos_10s_doubling_to_10min() -> None:
    """Mesos' status_update_retry_interval_min/max: 10 s, 20 s, 40 s ... capped at 600 s."""
    policy = RetryPolicy(jitter=0.0)
    assert [policy.delay(n, 0.0) for n in range(8)] == [10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 600.0, 600.0]
    m = StatusUpdateManager(rng=lambda: 0.0)
    m.handle(Resumed(), 0.0)
    assert sends(m.handle(UpdateGenerated(upd(1)), 0.0)) == [upd(1)]
    assert m.handle(Tick(), 7.9) == []  # never before min * (1 - jitter) = 8 s
    assert m.next_deadline() == 10.0  # (rng 0: no jitter taken off)


def test_retry_interval_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from agent import main as agent_main

    seen: dict[str, object] = {}

    async def fake_serve(config: object) -> int:
        seen["config"] = config
        return 0

    monkeypatch.setattr(agent_main, "_serve", fake_serve)
    args = ["--master", "127.0.0.1:5050", "--work-dir", "/tmp/x"]
    res = CliRunner().invoke(agent_main.main, args)
    assert res.exit_code == 0, res.output
    cfg = seen["config"]
    assert (cfg.resend_initial, cfg.resend_max) == (10.0, 600.0)  # type: ignore[attr-defined]
    res = CliRunner().invoke(agent_main.main, [*args, "--status-update-retry-interval-min", "0.5",
                                               "--status-update-retry-interval-max", "4"])
    assert res.exit_code == 0, res.output
    assert (seen["config"].resend_initial, seen["config"].resend_max) == (0.5, 4.0)  # type: ignore[attr-defined]
    res = CliRunner().invoke(agent_main.main, [*args, "--status-update-retry-interval-min", "5",
                                               "--status-update-retry-interval-max", "4"])
    assert res.exit_code != 0 and "maximum" in res.output
