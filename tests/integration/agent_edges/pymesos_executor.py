"""A real pymesos 0.3.15 custom executor, started by the executor API tests as a subprocess.

Behaviour, by task name:
- "finish*": reports TASK_RUNNING then TASK_FINISHED.
- "long*": reports TASK_RUNNING and waits for KILL, then reports TASK_KILLED.
A task group: every task reports TASK_RUNNING then TASK_FINISHED.
Framework messages are echoed back prefixed with "echo:". Registration, every ACKNOWLEDGED and
SHUTDOWN are announced (and re-registration after an agent restart) to the agent as framework messages ("registered", "acked:<task>:<uuid>",
"shutdown") so the test can observe what the executor received.
"""

from __future__ import annotations

import logging
import sys
import uuid
from typing import Any

from pymesos import Executor, MesosExecutorDriver, decode_data, encode_data


def say(driver: Any, text: str) -> None:
    driver.sendFrameworkMessage(encode_data(text.encode()))


def update(driver: Any, task: dict[str, Any], state: str) -> None:
    driver.sendStatusUpdate({"task_id": task["task_id"], "state": state, "message": f"{state} from pymesos"})


class EchoExecutor(Executor):
    def registered(self, driver: Any, executor_info: Any, framework_info: Any, agent_info: Any) -> None:
        say(driver, f"registered:{agent_info['hostname']}:{framework_info['name']}")

    def reregistered(self, driver: Any, agent_info: Any) -> None:
        say(driver, f"reregistered:{agent_info['id']['value']}")

    def launchTask(self, driver: Any, task: Any) -> None:
        update(driver, task, "TASK_RUNNING")
        if not task["name"].startswith("long"):
            update(driver, task, "TASK_FINISHED")

    def launchTaskGroup(self, driver: Any, tasks: Any) -> None:
        for task in tasks:
            update(driver, task, "TASK_RUNNING")
        for task in tasks:
            update(driver, task, "TASK_FINISHED")

    def killTask(self, driver: Any, task_id: Any) -> None:
        driver.sendStatusUpdate({"task_id": task_id, "state": "TASK_KILLED", "message": "killed"})

    def frameworkMessage(self, driver: Any, message: Any) -> None:
        say(driver, "echo:" + decode_data(message).decode())

    def shutdown(self, driver: Any) -> None:
        say(driver, "shutdown")


class ReportingDriver(MesosExecutorDriver):
    def on_acknowledged(self, event: Any) -> None:
        super().on_acknowledged(event)
        u = uuid.UUID(bytes=decode_data(event["uuid"]))
        say(self, f"acked:{event['task_id']['value']}:{u.hex}")


def main() -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(threadName)s %(name)s %(message)s"
    )
    driver = ReportingDriver(EchoExecutor())
    status = driver.run()
    print(f"driver stopped: {status}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
