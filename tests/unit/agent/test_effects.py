"""The agent's effect runner (agent/effects.py): disk effects flushed in order before any later
loop effect, each loop effect to the one handler of its type, ``next`` ahead of the queue."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any

import pytest

from agent import status_updates as su
from agent import tasks as tk
from agent.effects import EffectRunner, Signal, WriteKill, needs_thread
from agent.taskspec import CommandSpec, TaskSpec

SPEC = TaskSpec("f", "t", "t", CommandSpec(argv=("true",)))


async def run(effects: list[object], first: tuple[object, ...] = ()) -> tuple[list[object], list[list[object]]]:
    done: list[object] = []
    batches: list[list[object]] = []
    tasks: list[asyncio.Task[Any]] = []

    def spawn(coro: Coroutine[Any, Any, Any], name: str) -> None:
        tasks.append(asyncio.get_running_loop().create_task(coro, name=name))

    def disk(batch: list[object]) -> list[str]:
        batches.append(batch)
        return [f"spawned {e.spec.task_id}" for e in batch if isinstance(e, tk.SpawnTask)]

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        runner: EffectRunner[str] = EffectRunner(disk, done.append, pool, spawn, lambda: None)
        runner.on(tk.EmitStatus, done.append)
        runner.on(Signal, done.append)
        runner.next(*first)
        runner.submit(effects)
        await asyncio.wait_for(runner.drain(), 5)
    return done, batches


async def test_disk_effects_run_first_in_one_ordered_batch_and_spawns_come_back() -> None:
    emit = tk.EmitStatus("f", "t", tk.S.TASK_RUNNING)
    ack = su.CheckpointAck("f", "t", b"u")
    done, batches = await run([tk.CheckpointTask(SPEC), emit, tk.SpawnTask(SPEC), ack])
    assert batches == [[tk.CheckpointTask(SPEC), tk.SpawnTask(SPEC), ack]]  # pulled forward, in order
    assert done == ["spawned t", emit]


async def test_next_goes_ahead_of_the_queue_its_disk_effect_first() -> None:
    kill = WriteKill("f", "t", "FRAMEWORK", 3.0)
    sig = Signal("f", "t", "TERM")
    emit = tk.EmitStatus("f", "t", tk.S.TASK_KILLED)
    runner_done, batches = await run([emit], first=(kill, sig))
    assert batches == [[kill]] and runner_done == [sig, emit]


async def test_an_effect_without_a_handler_is_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    emit = tk.EmitStatus("f", "t", tk.S.TASK_RUNNING)
    done, _ = await run([tk.ReleaseTask("f", "t"), emit])
    assert done == [emit] and "unhandled effect ReleaseTask" in caplog.text


def test_only_spawns_creations_and_fsyncs_need_the_checkpoint_thread() -> None:
    update = su.Update("f", "t", b"u", tk.S.TASK_RUNNING, None)
    assert not needs_thread([su.CheckpointAck("f", "t", b"u"), WriteKill("f", "t", "X"), su.CheckpointUpdate(update, durable=False)])
    assert needs_thread([su.CheckpointUpdate(update, durable=True)])
    assert needs_thread([tk.SpawnTask(SPEC)]) and needs_thread([tk.CheckpointTask(SPEC)])
