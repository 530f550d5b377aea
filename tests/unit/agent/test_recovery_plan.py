"""The recovery planner (agent/recovery_plan.py): checkpoint facts in, exact effects out, no I/O."""

from __future__ import annotations

import attrs

from agent import recovery_plan as rp
from agent import status_updates as su
from agent.checkpoint_records import (
    AgentMeta,
    CorruptCheckpoint,
    PidRecord,
    RecoveredTaskFiles,
    Recovery,
    TaskRecordFile,
    UpdateLog,
)
from agent.task_events import KillReason, RecoveredTask
from agent.taskspec import TaskSpec, task_spec
from protocol.mesos import CommandInfo, ExecutorInfo, ExecutorType, FrameworkInfo, TaskInfo, TaskStatus
from protocol.mesos_common import ExecutorID, FrameworkID, TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState as S

BOOT = rp.Boot("boot-1", "cpus:4")
FW = FrameworkInfo(user="u", name="fw", id=FrameworkID("f1"), checkpoint=True)
META = AgentMeta("a1", "boot-1", "cpus:4")


def info(tid: str) -> TaskInfo:
    return TaskInfo(name=tid, task_id=TaskID(tid), command=CommandInfo(value="sleep 1"))


def executor_task(tid: str, eid: str = "ex") -> TaskInfo:
    ex = ExecutorInfo(executor_id=ExecutorID(eid), command=CommandInfo(value="./executor"))
    return TaskInfo(name=tid, task_id=TaskID(tid), executor=ex)


def status(tid: str, n: int, state: S = S.TASK_RUNNING) -> TaskStatus:
    return TaskStatus(task_id=TaskID(tid), state=state, uuid=bytes([n]) * 16)


def files(tid: str, *, task: TaskInfo | None = None, updates: tuple[TaskStatus, ...] = (), acked: frozenset[bytes] = frozenset(),
          pid: PidRecord | None = None, exit_code: int | None = None, kill: str | None = None,
          gpus: tuple[int, ...] = (), broken: CorruptCheckpoint | None = None) -> RecoveredTaskFiles:
    record = None if broken else TaskRecordFile("f1", task or info(tid), gpus=gpus)
    return RecoveredTaskFiles("f1", tid, record, UpdateLog(updates, acked), pid, exit_code, kill, None, broken)


def recovery(*tasks: RecoveredTaskFiles, meta: AgentMeta | None = META,
             broken: tuple[CorruptCheckpoint, ...] = ()) -> Recovery:
    return Recovery(meta, {"f1": FW}, tasks, broken)


def ups(*statuses: TaskStatus) -> tuple[su.Update, ...]:
    return tuple(su.Update("f1", s.task_id.value, s.uuid or b"", s.state, s) for s in statuses)


PID = PidRecord(42, 100.0, "boot-1")
OLD_PID = PidRecord(42, 100.0, "boot-0")
TAIL = [rp.KillOrphanExecutors(frozenset()), rp.Cleanup()]


# --- the agent as a whole --------------------------------------------------------------------------


def test_a_fresh_work_dir_starts_a_new_agent() -> None:
    assert rp.start(recovery(meta=None), BOOT) == rp.Start(None, False)


def test_the_same_boot_and_resources_keep_the_agent_id() -> None:
    assert rp.start(recovery(), BOOT) == rp.Start("a1", False)
    assert rp.start(recovery(meta=attrs.evolve(META, boot_id="boot-0")), BOOT) == rp.Start("a1", True)


def test_strict_refuses_a_corrupt_checkpoint_naming_each_file() -> None:
    bad = (CorruptCheckpoint("/w/meta/frameworks/f1/tasks/t.log", "bad checksum"),)
    st = rp.start(recovery(broken=bad), attrs.evolve(BOOT, strict=True))
    assert st.refuse == "corrupt checkpoint: /w/meta/frameworks/f1/tasks/t.log (bad checksum)"
    assert rp.start(recovery(broken=bad), BOOT).refuse is None


def test_changed_resources_discard_the_old_tasks_of_this_boot_or_refuse_when_strict() -> None:
    rec = recovery(files("t1", pid=PID), files("t2", pid=OLD_PID), files("t3"))
    changed = rp.Boot("boot-1", "cpus:8")
    msg = "resources changed from 'cpus:4' to 'cpus:8'"
    assert rp.start(rec, changed) == rp.Start(None, False, discard=msg, discard_pids=(PID,))
    assert rp.start(rec, attrs.evolve(changed, strict=True)).refuse == f"{msg}; refusing to recover in strict mode"
    rebooted = recovery(files("t1", pid=PID), meta=attrs.evolve(META, boot_id="boot-0"))
    assert rp.start(rebooted, changed) == rp.Start(None, True, discard=msg)  # nothing of before lives


# --- what to look for ------------------------------------------------------------------------------


def test_probes_adopt_by_pid_find_by_marker_and_skip_what_ended() -> None:
    rec = recovery(
        files("by-pid", pid=PID),
        files("no-pid"),
        files("other-boot", pid=OLD_PID),
        files("ended", updates=(status("ended", 1, S.TASK_FINISHED),), pid=PID),
        files("acked", updates=(status("acked", 2, S.TASK_FINISHED),), acked=frozenset({bytes([2]) * 16}), pid=PID),
        files("corrupt", broken=CorruptCheckpoint("x", "bad")),
    )
    st = rp.start(rec, BOOT)
    assert rp.probes(rec, st, BOOT) == [rp.AdoptTask("f1", "by-pid", 42, 100.0), rp.FindTask("f1", "no-pid")]
    assert rp.probes(rec, attrs.evolve(st, rebooted=True), BOOT) == []


def test_an_executor_is_looked_for_once_and_only_for_a_framework_that_checkpoints() -> None:
    rec = recovery(files("e1", task=executor_task("e1")), files("e2", task=executor_task("e2")))
    st = rp.start(rec, BOOT)
    ex = executor_task("e1").executor
    assert rp.probes(rec, st, BOOT) == [rp.FindExecutor("f1", "ex", ex)]
    no_checkpoint = attrs.evolve(rec, frameworks={"f1": attrs.evolve(FW, checkpoint=False)})
    assert rp.probes(no_checkpoint, st, BOOT) == []


def test_exit_codes_are_read_again_for_every_wrapper_not_found() -> None:
    rec = recovery(files("alive", pid=PID), files("gone", pid=PID), files("e1", task=executor_task("e1")))
    found = rp.Found(tasks={("f1", "alive"): rp.Alive(42, 100.0)}, executors={("f1", "ex"): 7})
    assert rp.exit_codes_wanted(rec, found) == [("f1", "gone")]


# --- the plan --------------------------------------------------------------------------------------


def spec(tid: str, task: TaskInfo | None = None) -> TaskSpec:
    return task_spec("f1", task or info(tid))


def test_an_adopted_task_is_reattached_and_reported_running() -> None:
    running = status("t1", 1)
    rec = recovery(files("t1", updates=(running,), pid=PID))
    found = rp.Found(tasks={("f1", "t1"): rp.Alive(42, 100.0)})
    assert rp.plan(rec, rp.start(rec, BOOT), BOOT, found) == [
        rp.RestoreStream("f1", "t1", ups(running), frozenset()),
        rp.Reattach("f1", "t1", 42, spec("t1")),
        rp.Track(RecoveredTask(spec("t1"), S.TASK_RUNNING, True, True, None, 42)),
        rp.Report("task f1/t1: re-attached pid 42"),
        *TAIL,
    ]


def test_a_wrapper_found_by_its_marker_gets_its_pid_record_written() -> None:
    rec = recovery(files("t1"))
    found = rp.Found(tasks={("f1", "t1"): rp.Alive(43, 101.0, found=True)})
    assert rp.plan(rec, rp.start(rec, BOOT), BOOT, found) == [
        rp.RestoreStream("f1", "t1", (), frozenset()),
        rp.WritePid("f1", "t1", PidRecord(43, 101.0, "boot-1")),
        rp.Reattach("f1", "t1", 43, spec("t1")),
        rp.Track(RecoveredTask(spec("t1"), None, True, True, None, 43)),
        rp.Report("task f1/t1: re-attached pid 43"),
        *TAIL,
    ]


def test_a_task_that_ended_while_the_agent_was_down_reports_the_code_read_again_and_its_group_is_killed() -> None:
    rec = recovery(files("t1", pid=PID, exit_code=None, kill="MEMORY"))
    found = rp.Found(exit_codes={("f1", "t1"): 137})
    assert rp.plan(rec, rp.start(rec, BOOT), BOOT, found) == [
        rp.RestoreStream("f1", "t1", (), frozenset()),
        rp.Track(RecoveredTask(spec("t1"), None, True, False, 137, 42, KillReason.MEMORY)),
        rp.Report("task f1/t1: not running"),
        rp.KillLeftovers(((42, 100.0, "f1", "t1", None),)),
        *TAIL,
    ]


def test_after_a_reboot_nothing_is_killed_and_an_unknown_kill_reason_is_ignored() -> None:
    rec = recovery(files("t1", pid=OLD_PID, exit_code=3, kill="NOT-A-REASON"), meta=attrs.evolve(META, boot_id="boot-0"))
    st = rp.start(rec, BOOT)
    assert rp.plan(rec, st, BOOT, rp.Found()) == [
        rp.RestoreStream("f1", "t1", (), frozenset()),
        rp.Track(RecoveredTask(spec("t1"), None, True, False, 3, 42, None)),
        rp.Report("task f1/t1: not running"),
        rp.Cleanup(),
    ]


def test_a_finished_and_acknowledged_task_is_only_dropped() -> None:
    done = status("t1", 1, S.TASK_FINISHED)
    rec = recovery(files("t1", updates=(done,), acked=frozenset({done.uuid}), pid=PID))
    assert rp.plan(rec, rp.start(rec, BOOT), BOOT, rp.Found()) == [rp.DropFinished("f1", "t1"), *TAIL]


def test_a_corrupt_task_is_reported_with_its_pid_only_when_of_this_boot() -> None:
    bad = CorruptCheckpoint("/w/t1.log", "bad checksum")
    rec = recovery(files("t1", broken=bad, pid=PID), files("t2", broken=bad, pid=OLD_PID))
    assert rp.plan(rec, rp.start(rec, BOOT), BOOT, rp.Found()) == [
        rp.ReportBroken("f1", "t1", "corrupt checkpoint /w/t1.log: bad checksum", PID),
        rp.ReportBroken("f1", "t2", "corrupt checkpoint /w/t1.log: bad checksum", None),
        *TAIL,
    ]


def test_a_task_record_the_agent_cannot_run_is_reported_as_corrupt() -> None:
    bad = TaskInfo(name="x", task_id=TaskID("x"))  # neither command nor executor
    rec = recovery(files("x", task=bad))
    assert rp.plan(rec, rp.start(rec, BOOT), BOOT, rp.Found()) == [
        rp.ReportBroken("f1", "x", "corrupt checkpoint x: task has neither command nor executor", None), *TAIL,
    ]


def test_a_reattached_executor_gets_its_unacknowledged_updates_acks_and_a_reregistration_deadline() -> None:
    u1, u2 = status("e1", 1), status("e1", 2)
    rec = recovery(files("e1", task=executor_task("e1"), updates=(u1, u2), acked=frozenset({u1.uuid})),
                   files("e2", task=executor_task("e2")))
    found = rp.Found(executors={("f1", "ex"): 7})
    e1, e2 = spec("e1", executor_task("e1")), spec("e2", executor_task("e2"))
    assert rp.plan(rec, rp.start(rec, BOOT), BOOT, found) == [
        rp.RestoreStream("f1", "e1", ups(u1, u2), frozenset({u1.uuid})),
        rp.Report("executor f1/ex: re-attached pid 7"),
        rp.AcksToExecutor("ex", (u2.uuid,)),
        rp.Track(RecoveredTask(e1, S.TASK_RUNNING, True, True, None, 7)),
        rp.Report("task f1/e1: re-attached pid 7"),
        rp.RestoreStream("f1", "e2", (), frozenset()),
        rp.Track(RecoveredTask(e2, None, True, True, None, 7)),
        rp.Report("task f1/e2: re-attached pid 7"),
        rp.KillOrphanExecutors(frozenset({7})),
        rp.AwaitReregistration((("f1", "ex"),)),
        rp.Cleanup(),
    ]


def test_an_executor_not_found_leaves_its_tasks_to_be_reported_lost() -> None:
    rec = recovery(files("e1", task=executor_task("e1")))
    assert rp.plan(rec, rp.start(rec, BOOT), BOOT, rp.Found()) == [
        rp.RestoreStream("f1", "e1", (), frozenset()),
        rp.Track(RecoveredTask(spec("e1", executor_task("e1")), None, False, False, None, None)),
        rp.Report("task f1/e1: not running"),
        *TAIL,
    ]


def test_gpu_devices_are_kept_only_by_a_task_still_running() -> None:
    gpu_task = TaskInfo(name="g", task_id=TaskID("g"), command=CommandInfo(value="x"),
                        resources=Resources.of(gpus=1).to_mesos())
    ended = status("h", 1, S.TASK_FAILED)
    rec = recovery(files("g", task=gpu_task, gpus=(0,)), files("h", task=attrs.evolve(gpu_task, task_id=TaskID("h")),
                                                               gpus=(1,), updates=(ended,)))
    effects = rp.plan(rec, rp.start(rec, BOOT), BOOT, rp.Found())
    assert [e for e in effects if isinstance(e, rp.RestoreGpus)] == [rp.RestoreGpus("f1", "g", (0,), 1.0)]
    (track,) = [e for e in effects if isinstance(e, rp.Track) and e.event.spec.task_id == "h"]
    assert track.event.spec.gpu_devices == (1,)


def test_a_group_recorded_before_groups_were_checkpointed_is_its_executors_tasks() -> None:
    pod = ExecutorInfo(executor_id=ExecutorID("pod"), type=ExecutorType.DEFAULT)
    a = RecoveredTaskFiles("f1", "a", TaskRecordFile("f1", info("a"), pod), UpdateLog((), frozenset()), None, None, None)
    b = RecoveredTaskFiles("f1", "b", TaskRecordFile("f1", info("b"), pod), UpdateLog((), frozenset()), None, None, None)
    rec = recovery(a, b)
    tracks = [e.event.spec for e in rp.plan(rec, rp.start(rec, BOOT), BOOT, rp.Found()) if isinstance(e, rp.Track)]
    assert [(s.task_id, s.group, s.executor_id) for s in tracks] == [("a", ("a", "b"), "pod"), ("b", ("a", "b"), "pod")]
