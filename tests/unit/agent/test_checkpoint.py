"""Checkpoint layout: round trips, atomic writes, corruption detected and named."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.checkpoint import (
    AgentMeta,
    Checkpoint,
    CheckpointError,
    CorruptCheckpoint,
    PidRecord,
    TaskRecordFile,
    parse_exit_status,
)
from protocol.mesos import CommandInfo, FrameworkInfo, TaskInfo, TaskStatus
from protocol.mesos_common import AgentID, FrameworkID, TaskID
from protocol.task_states import TaskState as S


def task(tid: str = "t1") -> TaskInfo:
    return TaskInfo(name=tid, task_id=TaskID(tid), command=CommandInfo(value="sleep 1"))


def status(tid: str, n: int, state: S = S.TASK_RUNNING) -> TaskStatus:
    return TaskStatus(task_id=TaskID(tid), state=state, uuid=bytes([n]) * 16, agent_id=AgentID("a1"), timestamp=1.5)


def filled(tmp_path: Path) -> Checkpoint:
    cp = Checkpoint(tmp_path)
    cp.init()
    cp.write_agent(AgentMeta("a1", "boot", "cpus:2", "rack:r1", "host"))
    cp.write_framework("f1", FrameworkInfo(user="u", name="fw", id=FrameworkID("f1")))
    for tid in ("t1", "t2"):
        cp.write_task(TaskRecordFile("f1", task(tid)))
        cp.commit()
        cp.write_pid("f1", tid, PidRecord(123, 456.5, "boot"))
        cp.append_update("f1", tid, status(tid, 1))
        cp.append_ack("f1", tid, bytes([1]) * 16)
        cp.append_update("f1", tid, status(tid, 2, S.TASK_FINISHED))
        cp.commit()
    return cp


def test_round_trip(tmp_path: Path) -> None:
    cp = filled(tmp_path)
    cp.exit_status_path("f1", "t1").write_bytes(b"0\n")
    rec = Checkpoint(tmp_path).recover()
    assert rec.agent == AgentMeta("a1", "boot", "cpus:2", "rack:r1", "host")
    assert rec.frameworks["f1"].name == "fw"
    assert rec.broken == ()
    t1 = rec.tasks[0]
    assert t1.record is not None and t1.record.task == task("t1")
    assert t1.log is not None and [u.state for u in t1.log.updates] == [S.TASK_RUNNING, S.TASK_FINISHED]
    assert t1.log.acked == frozenset({bytes([1]) * 16})
    assert t1.pid == PidRecord(123, 456.5, "boot") and t1.exit_code == 0
    assert rec.tasks[1].exit_code is None
    assert not list(tmp_path.rglob("*.tmp"))


def test_corrupt_task_record_is_named(tmp_path: Path) -> None:
    cp = filled(tmp_path)
    p = cp.task_log("f1", "t2")
    p.write_bytes(p.read_bytes().replace(b"sleep 1", b"sleep 9"))
    rec = Checkpoint(tmp_path).recover()
    assert [b.path for b in rec.broken] == [str(p)]
    assert "checksum" in rec.broken[0].reason
    assert rec.tasks[0].broken is None and rec.tasks[1].broken is not None


def test_corrupt_update_record_is_named(tmp_path: Path) -> None:
    cp = filled(tmp_path)
    p = cp.task_log("f1", "t1")
    data = bytearray(p.read_bytes())
    data[-20] ^= 0xFF
    p.write_bytes(bytes(data))
    rec = Checkpoint(tmp_path).recover()
    assert [b.path for b in rec.broken] == [str(p)]


def test_truncated_task_record_is_named(tmp_path: Path) -> None:
    cp = filled(tmp_path)
    p = cp.task_log("f1", "t1")
    p.write_bytes(p.read_bytes()[:30])
    rec = Checkpoint(tmp_path).recover()
    assert [b.path for b in rec.broken] == [str(p)]
    assert "task record" in rec.broken[0].reason


def test_empty_log_means_never_launched(tmp_path: Path) -> None:
    cp = filled(tmp_path)
    p = cp.task_log("f1", "t1")
    p.write_bytes(b"")
    rec = Checkpoint(tmp_path).recover()
    assert [t.task_id for t in rec.tasks] == ["t2"] and rec.broken == ()
    assert not p.exists()


def test_torn_log_tail_is_cut_and_appends_continue(tmp_path: Path) -> None:
    cp = filled(tmp_path)
    p = cp.task_log("f1", "t1")
    whole = p.read_bytes()
    p.write_bytes(whole[:-5])
    cp2 = Checkpoint(tmp_path)
    _, log, pid, _ = cp2.read_task_log(p)
    assert log.truncated and [u.state for u in log.updates] == [S.TASK_RUNNING]
    assert pid == PidRecord(123, 456.5, "boot")
    cp2.append_update("f1", "t1", status("t1", 3, S.TASK_FAILED))
    cp2.commit()
    _, log, _, _ = cp2.read_task_log(p)
    assert not log.truncated and [u.state for u in log.updates] == [S.TASK_RUNNING, S.TASK_FAILED]


def test_a_task_log_is_created_once(tmp_path: Path) -> None:
    cp = filled(tmp_path)
    with pytest.raises(CheckpointError):
        cp.write_task(TaskRecordFile("f1", task("t1")))
    cp.commit()


def test_corrupt_agent_json_raises(tmp_path: Path) -> None:
    cp = filled(tmp_path)
    (cp.meta / "agent.json").write_bytes(b'{"crc32": 1, "data": {}}')
    with pytest.raises(CorruptCheckpoint) as ei:
        Checkpoint(tmp_path).recover()
    assert ei.value.path.endswith("agent.json")


def test_ids_are_path_checked(tmp_path: Path) -> None:
    cp = Checkpoint(tmp_path)
    for bad in ("..", "../x", "a/b", ".hidden", ""):
        with pytest.raises(CheckpointError):
            cp.sandbox("f1", bad)
        with pytest.raises(CheckpointError):
            cp.task_log(bad, "t")
        with pytest.raises(CheckpointError):
            cp.exit_status_path("f1", bad)


def test_a_symlink_cannot_redirect_a_sandbox(tmp_path: Path) -> None:
    cp = Checkpoint(tmp_path / "work")
    cp.init()
    outside = tmp_path / "outside"
    outside.mkdir()
    assert cp.sandbox("f1", "t1") == cp.sandboxes / "f1" / "t1"  # nothing exists yet: fine
    (cp.sandboxes / "f1").symlink_to(outside)
    with pytest.raises(CheckpointError, match="escapes"):
        cp.sandbox("f1", "t1")
    (cp.sandboxes / "f1").unlink()
    (cp.sandboxes / "f1").mkdir()
    (cp.sandboxes / "f1" / "t1").symlink_to(outside)
    with pytest.raises(CheckpointError, match="escapes"):
        cp.sandbox("f1", "t1")
    (cp.sandboxes / "f1" / "t2").mkdir()
    assert cp.sandbox("f1", "t2") == cp.sandboxes / "f1" / "t2"


def test_a_group_task_sandbox_nests_under_its_executor_and_no_symlink_redirects_it(tmp_path: Path) -> None:
    cp = Checkpoint(tmp_path / "work")
    cp.init()
    outside = tmp_path / "outside"
    outside.mkdir()
    assert cp.task_sandbox("f1", "t1") == cp.sandbox("f1", "t1")
    assert cp.task_sandbox("f1", "t1", "pod") == cp.sandboxes / "f1" / "pod" / "tasks" / "t1"
    (cp.sandboxes / "f1" / "pod").mkdir(parents=True)
    (cp.sandboxes / "f1" / "pod" / "tasks").symlink_to(outside)
    with pytest.raises(CheckpointError, match="escapes"):
        cp.task_sandbox("f1", "t1", "pod")
    with pytest.raises(CheckpointError):
        cp.task_sandbox("f1", "t1", "../x")


def test_a_task_record_keeps_its_task_group(tmp_path: Path) -> None:
    cp = Checkpoint(tmp_path)
    cp.init()
    cp.write_task(TaskRecordFile("f1", task("a"), group=("a", "b")))
    cp.write_task(TaskRecordFile("f1", task("c")))
    cp.commit()
    rec = {t.task_id: t.record for t in cp.recover().tasks}
    assert rec["a"] is not None and rec["a"].group == ("a", "b")
    assert rec["c"] is not None and rec["c"].group == ()


def test_only_updates_asked_durable_are_fdatasynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cp = filled(tmp_path)
    synced: list[int] = []
    monkeypatch.setattr("agent.checkpoint.os.fdatasync", synced.append)
    cp.write_task(TaskRecordFile("f1", task("t3")))
    cp.commit()
    cp.append_update("f1", "t3", status("t3", 1), sync=False)
    cp.append_ack("f1", "t3", bytes([1]) * 16)
    cp.commit()
    assert synced == []  # written (page cache) but not synced
    cp.append_update("f1", "t3", status("t3", 2, S.TASK_FINISHED), sync=True)
    cp.commit()
    assert len(synced) == 1
    _, log, _, _ = cp.read_task_log(cp.task_log("f1", "t3"))
    assert [u.state for u in log.updates] == [S.TASK_RUNNING, S.TASK_FINISHED]


def test_logs_stay_open_between_batches_up_to_a_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agent.checkpoint.OPEN_LOGS", 2)
    cp = Checkpoint(tmp_path)
    cp.init()
    cp.write_framework("f1", FrameworkInfo(user="u", name="fw", id=FrameworkID("f1")))
    for tid in ("a", "b", "c"):
        cp.write_task(TaskRecordFile("f1", task(tid)))
        cp.commit()
    assert len(cp._open) == 2  # the oldest was closed
    for tid in ("a", "b", "c"):  # appends after a commit land in the same files
        cp.append_update("f1", tid, status(tid, 1), sync=False)
        cp.commit()
        _, log, _, _ = cp.read_task_log(cp.task_log("f1", tid))
        assert [u.state for u in log.updates] == [S.TASK_RUNNING]
    cp.release("f1", "c")
    assert str(cp.task_log("f1", "c")) not in cp._open
    cp.remove_task("f1", "b")
    cp.write_task(TaskRecordFile("f1", task("b")))  # a reused id starts a fresh log
    cp.commit()
    _, log, _, _ = cp.read_task_log(cp.task_log("f1", "b"))
    assert log.updates == ()
    cp.close()
    assert cp._open == {}


def test_remove_task_and_empty_framework(tmp_path: Path) -> None:
    cp = filled(tmp_path)
    cp.exit_status_path("f1", "t1").write_bytes(b"0\n")
    cp.remove_task("f1", "t1")
    assert not cp.task_log("f1", "t1").exists() and not cp.exit_status_path("f1", "t1").exists()
    assert not cp.remove_framework_if_empty("f1")
    cp.remove_task("f1", "t2")
    assert cp.remove_framework_if_empty("f1")
    assert not (cp.meta / "frameworks" / "f1").exists()


def test_exit_status_parsing() -> None:
    assert parse_exit_status(b"0\n") == 0
    assert parse_exit_status(b"137\n") == 137
    assert parse_exit_status(b"13") is None
    assert parse_exit_status(b"") is None
    assert parse_exit_status(b"x\n") is None


def test_a_record_cut_by_a_full_file_system_is_taken_back(tmp_path: Path) -> None:
    import contextlib
    import errno
    import os

    from protocol.mesos_common import Label, Labels

    from ...cgroup_env import small_filesystem

    with small_filesystem(tmp_path / "small", "256k") as root:
        cp = Checkpoint(root)
        cp.init()
        cp.write_task(TaskRecordFile("f1", task("t1")))
        cp.append_update("f1", "t1", status("t1", 1))
        cp.commit()
        fd = os.open(root / "fill", os.O_WRONLY | os.O_CREAT)  # fill the file system up
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
        os.close(fd)
        big = TaskStatus(task_id=TaskID("t1"), state=S.TASK_FAILED, uuid=bytes([2]) * 16, message="x" * 20000,
                         labels=Labels(tuple(Label(f"k{i}", "v" * 100) for i in range(50))))
        log = next(root.rglob("t1.log"))
        size = log.stat().st_size
        with pytest.raises(OSError) as e:
            cp.append_update("f1", "t1", big)
            cp.commit()
        assert e.value.errno == errno.ENOSPC
        assert log.stat().st_size == size  # nothing of the cut record is left
        os.unlink(root / "fill")
        cp.append_update("f1", "t1", big)
        cp.commit()
        rec = Checkpoint(root).recover()
        assert rec.broken == ()
        assert rec.tasks[0].log is not None and [u.state for u in rec.tasks[0].log.updates] == [S.TASK_RUNNING, S.TASK_FAILED]
