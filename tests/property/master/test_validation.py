"""S4/S5 fuzzing: arbitrary quantities and ids in a LAUNCH never reach the allocator unless they
are valid and fit; the core never raises."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from master.testing import Harness, offers, to_agent, updates
from master.validation import check_task
from protocol import agent_channel as ac
from protocol import mesos
from protocol.ids import valid_path_id
from protocol.resources import Resources
from protocol.task_states import TaskState

quantities = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, -1.0, 1e300, 1e-300, 0.0005, 0.5, 1.0, 2.0, 3.0]),
)
names = st.sampled_from(["cpus", "mem", "disk", "gpus", "weird", "cpus ", "", "c\x00"])


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(tid=st.text(max_size=220), name=names, value=quantities)
def test_check_task_never_raises(tid: str, name: str, value: float) -> None:
    t = mesos.TaskInfo(
        name="n", task_id=mesos.TaskID(tid), command=mesos.CommandInfo(value="x"),
        resources=(mesos.Resource(name=name, type=mesos.ValueType.SCALAR, scalar=mesos.Scalar(value)),),
    )
    err = check_task(t)
    if err is None:
        assert valid_path_id(tid) and math.isfinite(value) and value > 0


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(cpus=quantities, mem=quantities, extra=st.lists(st.tuples(names, quantities), max_size=2))
def test_accept_with_fuzzed_quantities(cpus: float, mem: float, extra: list[tuple[str, float]]) -> None:
    h = Harness()
    fid, sid = h.subscribe()
    h.agent("cpus:2;mem:1024")
    (offer,) = offers(h.allocate(), sid)
    res = [mesos.Resource(name="cpus", type=mesos.ValueType.SCALAR, scalar=mesos.Scalar(cpus)),
           mesos.Resource(name="mem", type=mesos.ValueType.SCALAR, scalar=mesos.Scalar(mem))]
    res += [mesos.Resource(name=n, type=mesos.ValueType.SCALAR, scalar=mesos.Scalar(v)) for n, v in extra]
    t = mesos.TaskInfo(name="t", task_id=mesos.TaskID("t"), command=mesos.CommandInfo(value="x"), resources=tuple(res))
    op = mesos.Operation(type=mesos.OperationType.LAUNCH, launch=mesos.Launch(task_infos=(t,)))
    fx = h.call(fid, sid, mesos.Call.make_accept(mesos.FrameworkID(fid), (offer.id,), (op,)))
    runs = to_agent(fx, ac.RunTasks)
    if runs:
        used = h.state.used_resources()
        assert Resources.parse("cpus:2;mem:1024").contains(used.flatten().only("cpus", "mem"))
        assert updates(fx, sid) == []
    else:
        (st_,) = updates(fx, sid)
        assert st_.state is TaskState.TASK_ERROR and st_.uuid is None
        assert h.alloc.tasks() == ()
