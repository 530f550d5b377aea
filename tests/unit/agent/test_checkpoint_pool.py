"""The checkpoint's pool of recycled files (``meta/free``): finished tasks' logs and exit files are
truncated and renamed into it, new tasks' files renamed out of it; what recovery finds after a
crash at every step of that (``agent/checkpoint.py``, "Recycled files")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent import checkpoint as ckpt
from agent.checkpoint import Checkpoint, CheckpointError, PidRecord, TaskRecordFile
from protocol.mesos import CommandInfo, FrameworkInfo, TaskInfo, TaskStatus
from protocol.mesos_common import AgentID, FrameworkID, TaskID
from protocol.task_states import TaskState as S


def task(tid: str) -> TaskInfo:
    return TaskInfo(name=tid, task_id=TaskID(tid), command=CommandInfo(value="true"))


def status(tid: str, n: int, state: S) -> TaskStatus:
    return TaskStatus(task_id=TaskID(tid), state=state, uuid=bytes([n]) * 16, agent_id=AgentID("a1"), timestamp=1.5)


def finished(cp: Checkpoint, tid: str) -> None:
    """A task's whole life in its log: record, pid, RUNNING, FINISHED, both acked; its exit file."""
    cp.write_task(TaskRecordFile("f1", task(tid)))
    cp.write_pid("f1", tid, PidRecord(10, 1.0, "boot"))
    cp.append_update("f1", tid, status(tid, 1, S.TASK_RUNNING), sync=False)
    cp.append_update("f1", tid, status(tid, 2, S.TASK_FINISHED), sync=True)
    cp.append_ack("f1", tid, bytes([1]) * 16)
    cp.append_ack("f1", tid, bytes([2]) * 16)
    cp.commit()
    cp.exit_status_path("f1", tid).write_bytes(b"0\n")
    cp.release("f1", tid)  # DropTask: the stream is done


@pytest.fixture
def cp(tmp_path: Path) -> Checkpoint:
    c = Checkpoint(tmp_path, fsync=False)  # durability is not what these tests are about
    c.init()
    c.write_framework("f1", FrameworkInfo(user="u", name="fw", id=FrameworkID("f1")))
    return c


def pool(cp: Checkpoint) -> list[str]:
    return sorted(os.listdir(cp.meta / "free"))


def test_recycled_files_are_reused_empty_by_the_next_task(cp: Checkpoint) -> None:
    finished(cp, "a")
    log_ino = cp.task_log("f1", "a").stat().st_ino
    exit_ino = cp.exit_status_path("f1", "a").stat().st_ino
    cp.recycle_task("f1", "a")
    assert not cp.task_log("f1", "a").exists() and not cp.exit_status_path("f1", "a").exists()
    assert pool(cp) == ["0", "1"] and cp.pool_size == 2 and cp.recycled == 2
    assert all((cp.meta / "free" / n).stat().st_size == 0 for n in pool(cp))

    cp.write_task(TaskRecordFile("f1", task("b")))
    cp.commit()
    assert pool(cp) == [] and cp.pool_size == 0 and cp.reused == 2
    # the same inodes, now b's: the log holds b's record only, the exit file is empty
    assert cp.task_log("f1", "b").stat().st_ino == log_ino
    assert cp.exit_status_path("f1", "b").stat().st_ino == exit_ino
    rec, log, pid, kill = cp.read_task_log(cp.task_log("f1", "b"))
    assert rec.task == task("b") and log.updates == () and log.acked == frozenset() and pid is None and kill is None
    assert cp.exit_status_path("f1", "b").read_bytes() == b""
    assert cp.read_exit_status("f1", "b") is None


def test_an_empty_pool_creates_files_and_no_exit_file(cp: Checkpoint) -> None:
    cp.write_task(TaskRecordFile("f1", task("a")))
    cp.commit()
    assert cp.task_log("f1", "a").stat().st_size > 0
    assert not cp.exit_status_path("f1", "a").exists()  # the wrapper creates it
    assert cp.reused == 0


def test_a_log_that_exists_is_still_refused_and_the_pool_keeps_its_file(cp: Checkpoint) -> None:
    finished(cp, "a")
    finished(cp, "b")
    cp.recycle_task("f1", "a")
    assert cp.pool_size == 2
    with pytest.raises(CheckpointError, match="already exists"):
        cp.write_task(TaskRecordFile("f1", task("b")))
    assert cp.pool_size == 2 and cp.reused == 0
    _, log, _, _ = cp.read_task_log(cp.task_log("f1", "b"))  # b's log untouched
    assert [u.state for u in log.updates] == [S.TASK_RUNNING, S.TASK_FINISHED]


def test_link_and_unlink_where_renameat2_is_missing(cp: Checkpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ckpt, "_renameat2", None)
    finished(cp, "a")
    finished(cp, "b")
    cp.recycle_task("f1", "a")
    with pytest.raises(CheckpointError, match="already exists"):
        cp.write_task(TaskRecordFile("f1", task("b")))
    cp.write_task(TaskRecordFile("f1", task("c")))
    cp.commit()
    assert cp.pool_size == 0 and pool(cp) == [] and cp.task_log("f1", "c").stat().st_nlink == 1


def test_the_pool_is_capped(cp: Checkpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ckpt, "FREE_POOL", 3)
    finished(cp, "a")
    finished(cp, "b")
    cp.recycle_task("f1", "a")
    cp.recycle_task("f1", "b")  # b's log fills the pool, its exit file is unlinked
    assert cp.pool_size == 3 and len(pool(cp)) == 3
    assert not cp.task_log("f1", "b").exists() and not cp.exit_status_path("f1", "b").exists()


def test_recycling_a_task_without_files_does_nothing(cp: Checkpoint) -> None:
    cp.recycle_task("f1", "never")
    assert cp.pool_size == 0 and pool(cp) == []


# --- a crash at every step: what a restarted agent finds -------------------------------------


def restart(tmp_path: Path) -> tuple[Checkpoint, ckpt.Recovery]:
    cp = Checkpoint(tmp_path, fsync=False)
    rec = cp.recover()
    cp.init()
    return cp, rec


def test_crash_before_the_truncate_finds_the_finished_log(cp: Checkpoint, tmp_path: Path) -> None:
    finished(cp, "a")
    _, rec = restart(tmp_path)
    (t,) = rec.tasks  # fully acknowledged: the planner drops it (DropFinished), nothing re-sent
    assert t.log is not None and t.log.updates[-1].state == S.TASK_FINISHED
    assert t.log.acked == frozenset({bytes([1]) * 16, bytes([2]) * 16}) and t.exit_code == 0


def test_crash_between_truncate_and_rename_finds_an_empty_log(cp: Checkpoint, tmp_path: Path) -> None:
    finished(cp, "a")
    os.truncate(cp.task_log("f1", "a"), 0)  # the sweep's first step for the log, then the crash
    cp2, rec = restart(tmp_path)
    assert rec.tasks == () and rec.broken == ()  # "never launched": removed, not reported
    assert not cp2.task_log("f1", "a").exists()


def test_crash_after_the_rename_leaves_files_in_the_pool_that_restart_unlinks(cp: Checkpoint, tmp_path: Path) -> None:
    finished(cp, "a")
    finished(cp, "b")
    cp.recycle_task("f1", "a")
    (cp.meta / "free" / "stale").write_bytes(b"not emptied")  # whatever a crash left there
    cp2, rec = restart(tmp_path)
    assert [t.task_id for t in rec.tasks] == ["b"] and rec.broken == ()  # the pool is never read
    assert pool(cp2) == [] and cp2.pool_size == 0
    cp2.write_framework("f1", FrameworkInfo(user="u", name="fw", id=FrameworkID("f1")))
    cp2.write_task(TaskRecordFile("f1", task("c")))  # a fresh pool: created as before
    cp2.commit()
    assert cp2.reused == 0 and cp2.task_log("f1", "c").exists()


def test_crash_between_link_and_unlink_keeps_the_new_task_log(cp: Checkpoint, tmp_path: Path) -> None:
    finished(cp, "a")
    cp.recycle_task("f1", "a")
    src = str(cp.meta / "free" / "0")
    dst = str(cp.task_log("f1", "c"))
    os.link(src, dst)  # link done, unlink not: the pool entry and c's log are one inode
    with open(dst, "ab") as f:
        f.write(ckpt.encode_record({"t": {"framework_id": "f1", "task": {"task_id": {"value": "c"}, "name": "c"},
                                          "executor": None, "killing_state": False}}))
    cp2, rec = restart(tmp_path)
    assert pool(cp2) == []  # unlinked, not truncated: c's log keeps its record
    (t,) = rec.tasks
    assert t.task_id == "c" and t.record is not None and t.broken is None
    assert Path(dst).stat().st_size > 0 and Path(dst).stat().st_nlink == 1


def test_a_reused_log_showing_another_tasks_records_is_reported_corrupt(cp: Checkpoint, tmp_path: Path) -> None:
    """What a power loss without a journal may leave (the rename durable, the truncate not)."""
    finished(cp, "a")
    os.rename(cp.task_log("f1", "a"), cp.task_log("f1", "b"))
    _, rec = restart(tmp_path)
    (t,) = rec.tasks
    assert t.task_id == "b" and t.broken is not None and "ids do not match" in t.broken.reason


# --- what the recovery planner makes of each crash point (nothing lost, nothing resurrected) --


def planned(tmp_path: Path) -> str:
    """The restarted agent's plan (``agent/recovery_plan.py``) for what is on disk, as text."""
    from agent import recovery_plan as rp

    _, rec = restart(tmp_path)
    boot = rp.Boot("boot", "cpus:1")
    st = rp.start(rec, boot)
    return repr(rp.plan(rec, st, boot, rp.Found()))


@pytest.mark.parametrize("step", ["finished", "truncated", "in the pool", "reused"])
def test_the_planner_at_every_step_of_a_recycle(cp: Checkpoint, tmp_path: Path, step: str) -> None:
    cp.write_agent(ckpt.AgentMeta("a1", "boot", "cpus:1", "", "host"))
    finished(cp, "done-task")
    if step == "truncated":
        os.truncate(cp.task_log("f1", "done-task"), 0)
    if step in ("in the pool", "reused"):
        cp.recycle_task("f1", "done-task")
    if step == "reused":  # a new task took the files (its record written, the crash before its spawn)
        cp.write_task(TaskRecordFile("f1", task("new-task")))
        cp.commit()
        assert cp.reused == 2
    plan = planned(tmp_path)
    # the finished task is at most dropped (its log removed), never reported or tracked again
    if step == "finished":
        assert "DropFinished(framework_id='f1', task_id='done-task')" in plan
        assert plan.count("done-task") == 1
    else:
        assert "done-task" not in plan
    # the task that reused its files is recovered like any task with a fresh log: never spawned,
    # and no exit code (its exit file is the finished task's, emptied: not that task's "0")
    assert ("new-task" in plan) == (step == "reused")
    if step == "reused":
        assert "spawned=False" in plan and "exit_code=None" in plan and "exit_code=0" not in plan
