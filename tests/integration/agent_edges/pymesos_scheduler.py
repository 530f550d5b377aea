"""A real pymesos 0.3.15 scheduler that runs one task under a pymesos CUSTOM executor.

Usage: pymesos_scheduler.py MASTER_HOST:PORT EXECUTOR_SCRIPT
Prints one JSON line per status update to stdout; exits 0 after TASK_FINISHED of the task and
the framework message the executor sends on registration, 1 on a terminal non-FINISHED state.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from typing import Any

from pymesos import MesosSchedulerDriver, Scheduler, decode_data

TASK = "finish-1"


class OneTask(Scheduler):
    def __init__(self, python: str, script: str) -> None:
        self.python = python
        self.script = script
        self.launched = False
        self.done = threading.Event()
        self.result = 1

    def resourceOffers(self, driver: Any, offers: Any) -> None:
        for offer in offers:
            if self.launched:
                driver.declineOffer(offer["id"])
                continue
            self.launched = True
            task = {
                "name": TASK,
                "task_id": {"value": TASK},
                "agent_id": offer["agent_id"],
                "resources": [
                    {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                    {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}},
                ],
                "executor": {
                    "executor_id": {"value": "pymesos-ex"},
                    "type": "CUSTOM",
                    "command": {
                        "value": self.python,
                        "shell": False,
                        "arguments": [self.python, self.script],
                    },
                    "resources": [
                        {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                        {"name": "mem", "type": "SCALAR", "scalar": {"value": 64}},
                    ],
                },
            }
            driver.launchTasks(offer["id"], [task])

    def statusUpdate(self, driver: Any, update: Any) -> None:
        print(json.dumps({"status": update}), flush=True)
        if update["task_id"]["value"] != TASK:
            return
        state = update["state"]
        if state == "TASK_FINISHED":
            self.result = 0
            self.done.set()
        elif state in ("TASK_FAILED", "TASK_KILLED", "TASK_LOST", "TASK_ERROR", "TASK_DROPPED"):
            self.done.set()

    def frameworkMessage(self, driver: Any, executor_id: Any, agent_id: Any, message: Any) -> None:
        print(json.dumps({"message": decode_data(message).decode()}), flush=True)


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    master, script = sys.argv[1], sys.argv[2]
    sched = OneTask(sys.executable, script)
    framework = {"user": "", "name": "pymesos-custom-executor", "hostname": "127.0.0.1"}
    driver = MesosSchedulerDriver(sched, framework, master, use_addict=False)
    driver.start()
    finished = sched.done.wait(60)
    driver.stop()
    driver.join()
    return sched.result if finished else 2


if __name__ == "__main__":
    sys.exit(main())
