"""Per-task usage in the master (exact outcomes): an agent's USAGE_REPORT lands on the tasks it
runs (and only those), and a terminal status's usage labels are the task's final figures."""

from __future__ import annotations

from master.testing import Harness, offers, task
from protocol import agent_channel as ac
from protocol import mesos
from protocol.mesos_common import Label, Labels
from protocol.task_states import TaskState
from protocol.usage import TaskUsage

from .test_state_more import accept


def test_usage_reports_and_final_labels() -> None:
    h = Harness()
    fid, sid = h.subscribe()
    aid, conn = h.agent()
    _, other = h.agent(hostname="h2")
    offer = next(o for o in offers(h.allocate(), sid) if o.agent_id.value == aid)
    h.call(fid, sid, accept(fid, [offer.id], task("t1")))
    h.status(conn, fid, "t1", TaskState.TASK_RUNNING, uuid=b"r" * 16)
    entry = ac.TaskUsageEntry(mesos.FrameworkID(fid), mesos.TaskID("t1"), 1.5, 10, 20, -1, 7.0)
    h.agent_says(other, ac.UsageReport((entry,)))  # another agent's word about t1 is ignored
    rec = h.state.frameworks[fid].tasks["t1"]
    assert rec.current_usage() is None
    h.agent_says(conn, ac.UsageReport((entry, ac.TaskUsageEntry(mesos.FrameworkID(fid), mesos.TaskID("nope"), 1, 1, 1))))
    assert rec.current_usage() == TaskUsage(1.5, 10, 20, None, 7.0)
    final = mesos.TaskStatus(
        task_id=mesos.TaskID("t1"), state=TaskState.TASK_FINISHED, source=mesos.Source.SOURCE_EXECUTOR,
        uuid=b"f" * 16, timestamp=9.0,
        labels=Labels((Label("exit_code", "0"), *TaskUsage(2.25, 0, 64, 4096).labels())),
    )
    h.agent_says(conn, ac.StatusUpdateMsg(framework_id=mesos.FrameworkID(fid), status=final))
    done = h.state.frameworks[fid].finished("t1") or h.state.frameworks[fid].tasks["t1"]
    assert done.current_usage() == TaskUsage(2.25, 0, 64, 4096, 9.0)
