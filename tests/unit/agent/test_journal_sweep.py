"""The journal's sweep (``Journal.reap_dropped``): every task dropped since the last sweep is
recycled into the checkpoint's pool in one pass, no lock held while files move; a launch that
reuses a dropped task's id never loses its fresh log to the sweep."""

from __future__ import annotations

import concurrent.futures
import threading
from pathlib import Path

import pytest

from agent import tasks as tk
from agent.checkpoint import Checkpoint
from agent.diskwatch import Reserve
from agent.journal import Journal
from agent.processes import SpawnResult
from agent.taskspec import CommandSpec, TaskSpec
from protocol.mesos import CommandInfo, FrameworkInfo, TaskInfo
from protocol.mesos_common import FrameworkID, TaskID


def spec(tid: str) -> TaskSpec:
    return TaskSpec("f1", tid, tid, CommandSpec(("true",)),
                    info=TaskInfo(name=tid, task_id=TaskID(tid), command=CommandInfo(value="true")))


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    cp = Checkpoint(tmp_path, fsync=False)
    cp.init()
    tracker = tk.TaskTracker()
    tracker.frameworks["f1"] = FrameworkInfo(user="u", name="fw", id=FrameworkID("f1"))

    def no_spawn(s: TaskSpec) -> SpawnResult:
        raise AssertionError("nothing is spawned here")

    return Journal(cp, tracker, Reserve(tmp_path / "reserve", 0), "boot", no_spawn,
                   concurrent.futures.ThreadPoolExecutor(1))


def test_one_sweep_recycles_every_dropped_task(journal: Journal) -> None:
    cp = journal.checkpoint
    journal.run([tk.CheckpointTask(spec(t)) for t in ("a", "b", "c")])
    journal.run([tk.DropTask("f1", "a"), tk.DropTask("f1", "b")])
    assert journal.drops_pending
    journal.reap_dropped()
    assert not journal.drops_pending
    assert cp.recycled == 2 and cp.pool_size == 2  # two logs (no exit file was written)
    assert not cp.task_log("f1", "a").exists() and not cp.task_log("f1", "b").exists()
    assert cp.task_log("f1", "c").exists()
    journal.run([tk.CheckpointTask(spec("d"))])  # from the pool: its log and its exit file
    assert cp.reused == 2 and cp.pool_size == 0
    rec, log, _, _ = cp.read_task_log(cp.task_log("f1", "d"))
    assert rec.task.task_id.value == "d" and log.updates == ()


def test_an_id_reused_before_the_sweep_takes_its_drop_back(journal: Journal) -> None:
    cp = journal.checkpoint
    journal.run([tk.CheckpointTask(spec("a"))])
    journal.run([tk.DropTask("f1", "a"), tk.CheckpointTask(spec("a"))])  # removed, then a fresh log
    journal.reap_dropped()
    assert cp.recycled == 0 and cp.task_log("f1", "a").stat().st_size > 0


class _Watched(threading.Condition):
    """The journal's lock, telling when someone starts waiting on it."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting.set()
        return super().wait(timeout)


def test_an_id_reused_during_the_sweep_waits_for_it(journal: Journal, monkeypatch: pytest.MonkeyPatch) -> None:
    cp = journal.checkpoint
    lock = _Watched()
    monkeypatch.setattr(journal, "_drops_lock", lock)
    journal.run([tk.CheckpointTask(spec("a"))])
    journal.run([tk.DropTask("f1", "a")])
    order: list[str] = []
    sweeping, go_on = threading.Event(), threading.Event()
    recycle = cp.recycle_task

    def slow_recycle(fid: str, tid: str) -> None:
        sweeping.set()
        assert go_on.wait(10)
        recycle(fid, tid)
        order.append("recycled")

    monkeypatch.setattr(cp, "recycle_task", slow_recycle)
    sweep = threading.Thread(target=journal.reap_dropped)
    sweep.start()
    assert sweeping.wait(10)
    launch = threading.Thread(target=lambda: (journal.run([tk.CheckpointTask(spec("a"))]), order.append("written")))
    launch.start()
    assert lock.waiting.wait(10), "the launch did not wait for the sweep"
    go_on.set()
    sweep.join(10)
    launch.join(10)
    assert order == ["recycled", "written"]
    rec, log, _, _ = cp.read_task_log(cp.task_log("f1", "a"))  # the new log, whole
    assert rec.task.task_id.value == "a" and log.updates == ()
    assert cp.recycled == 1 and cp.reused == 1  # the old log went to the pool, and came back for the new one


def test_a_launch_that_finds_the_work_dir_full_is_given_the_reserve(tmp_path: Path) -> None:
    """A recycled checkpoint log takes no new room, so on a full work dir the task's own files can
    be the first to meet ENOSPC: the reserve is released and the spawn tried once more."""
    cp = Checkpoint(tmp_path, fsync=False)
    cp.init()
    tracker = tk.TaskTracker()
    tracker.frameworks["f1"] = FrameworkInfo(user="u", name="fw", id=FrameworkID("f1"))
    reserve = Reserve(tmp_path / "reserve", 1 << 20)
    (tmp_path / "reserve").write_bytes(b"\0" * 1024)  # held
    tries: list[bool] = []

    def full_until_released(s: TaskSpec) -> SpawnResult:
        tries.append(reserve.released)
        if not reserve.released:
            return SpawnResult(s, None, "Failed to launch: [Errno 28] No space left on device", no_space=True)
        return SpawnResult(s, None, "Failed to launch: not spawned here")  # any other outcome: not retried

    journal = Journal(cp, tracker, reserve, "boot", full_until_released, concurrent.futures.ThreadPoolExecutor(1))
    (result,) = journal.run([tk.CheckpointTask(spec("a")), tk.SpawnTask(spec("a"))])
    assert tries == [False, True] and reserve.released and not (tmp_path / "reserve").exists()
    assert result.error == "Failed to launch: not spawned here"
    (again,) = journal.run([tk.CheckpointTask(spec("b")), tk.SpawnTask(spec("b"))])  # released once: no more retries
    assert tries == [False, True, True] and again.error == "Failed to launch: not spawned here"
