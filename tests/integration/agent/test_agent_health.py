"""A real agent in-process running command tasks with health checks and checks: COMMAND, HTTP
and TCP probes against the task's own process, healthy/unhealthy TASK_RUNNING updates with
Mesos' reasons, a task killed after its consecutive failures, check_status changes, and the
container id every status carries."""

from __future__ import annotations

import socket
import sys
from typing import Any

import pytest

from protocol.mesos import (
    CheckInfo,
    CheckType,
    CommandInfo,
    Environment,
    HealthCheck,
    HealthCheckType,
    HTTPCheckInfo,
    TaskInfo,
    TcpCheck,
    Variable,
)
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState as S

pytestmark = pytest.mark.slow


# the task's side: healthy until a check has seen it so, then not
WAIT_FOR_CHECK = "touch healthy; while [ ! -f seen ]; do sleep 0.05; done; rm healthy; exec sleep 30"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def task(tid: str, cmd: str, **kw: Any) -> TaskInfo:
    return TaskInfo(name=tid, task_id=TaskID(tid), resources=Resources.of(cpus=0.1, mem=64).to_mesos(),
                    command=CommandInfo(value=cmd), **kw)


async def test_command_health_check_reports_and_kills(master: Any, make_agent: Any) -> None:
    # healthy while the file is there; the task removes it once a check has seen it (the check
    # leaves 'seen'): two failures in a row then kill the task
    hc = HealthCheck(type=HealthCheckType.COMMAND, command=CommandInfo(value="test -f healthy && touch seen"), delay_seconds=0,
                     interval_seconds=0.1, timeout_seconds=5, grace_period_seconds=30, consecutive_failures=2)
    await make_agent()
    await master.wait_connected()
    await master.run_many([task("h", WAIT_FOR_CHECK, health_check=hc)])
    st = await master.wait_terminal("h")
    assert st.state is S.TASK_KILLED and st.healthy is False, st
    assert st.message is not None and st.message.startswith(
        "Task killed after 2 consecutive failed health checks: command 'test -f healthy && touch seen' exited with status 1")
    health = [(s.healthy, s.reason.name if s.reason else None) for s in master.statuses("h") if s.state is S.TASK_RUNNING]
    assert health == [
        (None, None),  # TASK_RUNNING: pid N
        (True, "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"),
        (False, "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"),
        (False, "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"),
    ]
    # every status names the same container, a UUID as in Mesos
    ids = {s.container_status.container_id.value for s in master.statuses("h")
           if s.container_status is not None and s.container_status.container_id is not None}
    assert len(ids) == 1 and len(next(iter(ids))) == 36


async def test_http_health_check_and_tcp_check_of_the_tasks_server(master: Any, make_agent: Any) -> None:
    port = free_port()
    serve = f"exec {sys.executable} -m http.server {port} --bind 127.0.0.1"
    hc = HealthCheck(type=HealthCheckType.HTTP, http=HTTPCheckInfo(port, path="/"), delay_seconds=0,
                     interval_seconds=0.1, grace_period_seconds=30, consecutive_failures=3)
    ck = CheckInfo(type=CheckType.TCP, tcp=TcpCheck(port), delay_seconds=0, interval_seconds=0.1)
    await make_agent()
    await master.wait_connected()
    await master.run_many([task("web", serve, health_check=hc, check=ck)])
    healthy = await master.wait_for(lambda: next((s for s in master.statuses("web") if s.healthy), None))
    assert healthy.state is S.TASK_RUNNING and healthy.reason.name == "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"
    checked = await master.wait_for(lambda: next(
        (s for s in master.statuses("web") if s.check_status is not None and s.check_status.tcp is not None
         and s.check_status.tcp.succeeded), None))
    assert checked.reason.name == "REASON_TASK_CHECK_STATUS_UPDATED" and checked.check_status.type is CheckType.TCP
    first = next(s for s in master.statuses("web") if s.state is S.TASK_RUNNING)
    assert first.check_status is not None and first.check_status.type is CheckType.TCP and first.check_status.tcp is None
    await master.kill("web")
    st = await master.wait_terminal("web")
    assert st.state is S.TASK_KILLED and st.healthy is None  # killed by its framework, not its health


async def test_a_task_with_a_bad_health_check_is_task_error(master: Any, make_agent: Any) -> None:
    await make_agent()
    await master.wait_connected()
    await master.run_many([task("bad", "true", health_check=HealthCheck(type=HealthCheckType.TCP))])
    st = await master.wait_terminal("bad")
    assert st.state is S.TASK_ERROR and st.message is not None and "health check of type TCP needs 'tcp'" in st.message


async def test_a_command_health_check_runs_with_the_tasks_own_environment(master: Any, make_agent: Any) -> None:
    env = Environment(variables=(Variable(name="PROBE_FILE", value="alive"),))
    hc = HealthCheck(type=HealthCheckType.COMMAND, command=CommandInfo(value='test -f "$PROBE_FILE"'), delay_seconds=0,
                     interval_seconds=0.1, timeout_seconds=5, grace_period_seconds=30, consecutive_failures=1)
    await make_agent()
    await master.wait_connected()
    command = CommandInfo(value="touch alive; exec sleep 30", environment=env)
    await master.run_many([TaskInfo(name="e", task_id=TaskID("e"), resources=Resources.of(cpus=0.1, mem=64).to_mesos(),
                                    command=command, health_check=hc)])
    await master.wait_for(lambda: any(s.healthy is True for s in master.statuses("e")))
    await master.kill("e")
    assert (await master.wait_terminal("e")).state is S.TASK_KILLED
