"""Unit tests for the small shared pieces: task states, RecordIO, ids, backoff, clock, Service."""

from __future__ import annotations

import asyncio
import random

import pytest

from protocol import ids, recordio
from protocol.backoff import Backoff
from protocol.clock import FakeClock
from protocol.lifecycle import Service
from protocol.task_states import (
    TERMINAL_STATES,
    IllegalTransition,
    TaskState,
    can_transition,
    check_transition,
    for_framework,
    is_terminal,
)

S = TaskState


# --- task states ------------------------------------------------------------------------------


def test_terminal_set_matches_mesos() -> None:
    assert {s.name for s in TERMINAL_STATES} == {
        "TASK_FINISHED",
        "TASK_FAILED",
        "TASK_KILLED",
        "TASK_ERROR",
        "TASK_LOST",
        "TASK_DROPPED",
        "TASK_GONE",
        "TASK_GONE_BY_OPERATOR",
    }


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (S.TASK_STAGING, S.TASK_STARTING),
        (S.TASK_STARTING, S.TASK_RUNNING),
        (S.TASK_RUNNING, S.TASK_FINISHED),
        (S.TASK_RUNNING, S.TASK_KILLING),
        (S.TASK_KILLING, S.TASK_KILLED),
        (S.TASK_RUNNING, S.TASK_UNREACHABLE),
        (S.TASK_UNREACHABLE, S.TASK_RUNNING),
        (S.TASK_STAGING, S.TASK_ERROR),
        (S.TASK_RUNNING, S.TASK_RUNNING),
    ],
)
def test_legal_transitions(old: TaskState, new: TaskState) -> None:
    check_transition(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (S.TASK_FINISHED, S.TASK_RUNNING),
        (S.TASK_FINISHED, S.TASK_FINISHED),
        (S.TASK_KILLED, S.TASK_FAILED),
        (S.TASK_RUNNING, S.TASK_STAGING),
        (S.TASK_KILLING, S.TASK_RUNNING),
        (S.TASK_UNKNOWN, S.TASK_RUNNING),
    ],
)
def test_illegal_transitions_raise(old: TaskState, new: TaskState) -> None:
    assert not can_transition(old, new)
    with pytest.raises(IllegalTransition, match=f"{old.name} -> {new.name}"):
        check_transition(old, new)


def test_every_path_from_staging_ends_in_one_terminal_state() -> None:
    for t in TERMINAL_STATES:
        assert is_terminal(t)
        assert not any(can_transition(t, s) for s in TaskState)


def test_partition_states_hidden_from_non_partition_aware_frameworks() -> None:
    assert for_framework(S.TASK_DROPPED, partition_aware=False) is S.TASK_LOST
    assert for_framework(S.TASK_UNREACHABLE, partition_aware=False) is S.TASK_LOST
    assert for_framework(S.TASK_DROPPED, partition_aware=True) is S.TASK_DROPPED
    assert for_framework(S.TASK_RUNNING, partition_aware=False) is S.TASK_RUNNING


# --- RecordIO -------------------------------------------------------------------------------


def test_recordio_encode_matches_mesos_framing() -> None:
    assert recordio.encode(b'{"type":"HEARTBEAT"}') == b'20\n{"type":"HEARTBEAT"}'


def test_recordio_decoder_any_chunking() -> None:
    records = [b"a", b"", b"hello world", b"x" * 1000, b"\n\n12\n"]
    stream = b"".join(recordio.encode(r) for r in records)
    rng = random.Random(7)
    for _ in range(50):
        dec = recordio.RecordIODecoder()
        out: list[bytes] = []
        i = 0
        while i < len(stream):
            n = rng.randint(1, 40)
            out += dec.feed(stream[i : i + n])
            i += n
        assert out == records
        assert dec.pending == 0


@pytest.mark.parametrize("bad", [b"abc\n", b"-1\n", b"1 2\n", b"9" * 30])
def test_recordio_bad_header(bad: bytes) -> None:
    with pytest.raises(recordio.RecordIOError):
        recordio.RecordIODecoder().feed(bad)


def test_recordio_refuses_oversized_record_before_buffering() -> None:
    dec = recordio.RecordIODecoder(max_record=10)
    with pytest.raises(recordio.RecordIOError, match="exceeds"):
        dec.feed(b"104857600\n")


# --- ids ------------------------------------------------------------------------------------


@pytest.mark.parametrize("good", ["task-1", "a", "A.b_c-9", "x" * 200])
def test_valid_path_ids(good: str) -> None:
    assert ids.valid_path_id(good)


@pytest.mark.parametrize("bad", ["", ".", "..", "../../etc", "a/b", ".hidden", "a\x00b", "x" * 201, "sp ace"])
def test_invalid_path_ids(bad: str) -> None:
    assert not ids.valid_path_id(bad)


def test_role_names() -> None:
    assert ids.role_error("*") is None
    assert ids.role_error("eng/ml") is None
    for bad in ["", ".", "..", "-x", "a b", "eng//ml", "a\\b"]:
        assert ids.role_error(bad) is not None


def test_status_uuid_is_16_bytes() -> None:
    assert len(ids.new_status_uuid()) == 16


# --- backoff --------------------------------------------------------------------------------


def test_backoff_grows_caps_and_resets() -> None:
    b = Backoff(initial=1.0, maximum=8.0, factor=2.0, jitter=0.0)
    assert [b.next() for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    b.reset()
    assert b.next() == 1.0


def test_backoff_jitter_stays_in_range() -> None:
    b = Backoff(initial=1.0, maximum=1.0, jitter=0.5, rng=random.Random(1))
    delays = [b.next() for _ in range(100)]
    assert all(0.5 <= d <= 1.0 for d in delays)
    assert len(set(delays)) > 50


def test_backoff_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError):
        Backoff(initial=0)
    with pytest.raises(ValueError):
        Backoff(initial=2, maximum=1)


# --- clock ----------------------------------------------------------------------------------


async def test_fake_clock_wakes_sleepers_in_order() -> None:
    clock = FakeClock(start=100.0)
    woke: list[str] = []

    async def sleeper(name: str, dt: float) -> None:
        await clock.sleep(dt)
        woke.append(name)

    tasks = [asyncio.create_task(sleeper("b", 2)), asyncio.create_task(sleeper("a", 1))]
    await clock.wait_for_sleepers(2)
    assert clock.next_deadline() == 101.0
    clock.advance(1.5)
    await tasks[1]
    assert woke == ["a"]
    clock.advance(1.0)
    await asyncio.gather(*tasks)
    assert woke == ["a", "b"]
    assert clock.now() == 102.5
    with pytest.raises(ValueError):
        clock.advance(-1)


# --- service lifecycle ----------------------------------------------------------------------


class _Svc(Service):
    name = "svc"

    def __init__(self) -> None:
        super().__init__()
        self.started = asyncio.Event()
        self.closed = 0

    async def _start(self) -> None:
        self.spawn(self._loop(), name="loop")

    async def _loop(self) -> None:
        self.started.set()
        await asyncio.Event().wait()

    async def _stop(self) -> None:
        self.closed += 1


async def test_service_owns_its_tasks_and_stop_is_idempotent() -> None:
    async with _Svc() as svc:
        await asyncio.wait_for(svc.started.wait(), 5)
        assert svc.running
    assert not svc.running
    await svc.stop()
    assert svc.closed == 1
    with pytest.raises(RuntimeError):
        svc.spawn(asyncio.sleep(0))


async def test_service_records_a_failed_task() -> None:
    svc = _Svc()
    await svc.start()

    async def boom() -> None:
        raise KeyError("x")

    t = svc.spawn(boom(), name="boom")
    await asyncio.gather(t, return_exceptions=True)
    assert isinstance(svc.failed, KeyError)
    await svc.stop()


def test_chunk_frames_put_each_record_in_its_own_http_chunk() -> None:
    from protocol.httputil import chunk_frames

    records = [recordio.encode(b'{"type":"HEARTBEAT"}'), recordio.encode(b"x" * 300), b""]
    assert chunk_frames(records) == (
        b"17\r\n" + records[0] + b"\r\n" + b"%x\r\n" % len(records[1]) + records[1] + b"\r\n"
    )
