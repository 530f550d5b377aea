"""A real avmesos 0.4.2 scheduler (AVENTER's Mesos HTTP library, a separate process).

Usage: avmesos_scheduler.py MASTER_URL MODE
MODE "health": launch one task with a COMMAND health check that fails after a while, print each
status update as a JSON line, exit 0 once the task is terminal.
MODE "hold": launch a long task, print "RUNNING" once it runs, keep the framework until stdin
closes, then tear it down.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from typing import Any

from avmesos.client import MesosClient

TERMINAL = {"TASK_KILLED", "TASK_FAILED", "TASK_FINISHED", "TASK_ERROR", "TASK_LOST", "TASK_DROPPED"}
RES = [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
       {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}}]


class App:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.launched = False
        self.done = threading.Event()
        self.running = threading.Event()

    def offers(self, offers: Any) -> None:
        for o in offers:
            if self.launched:
                o.decline()
                continue
            self.launched = True
            if self.mode == "health":
                task = {"name": "avm", "task_id": {"value": "avm"}, "resources": RES,
                        # healthy until a check has seen it so (the check leaves 'seen'), then not
                        "command": {"value": "touch ok; while [ ! -f seen ]; do sleep 0.05; done; rm ok; exec sleep 60"},
                        "health_check": {"type": "COMMAND", "command": {"value": "test -f ok && touch seen"},
                                         "delay_seconds": 0,
                                         "interval_seconds": 0.1, "grace_period_seconds": 30,
                                         "consecutive_failures": 2}}
            else:
                task = {"name": "held", "task_id": {"value": "held"}, "resources": RES,
                        "command": {"value": "echo held-output; exec sleep 600"}}
            o.accept([task])

    def update(self, update: Any) -> None:
        s = update["status"]  # (avmesos acknowledges it before calling back)
        print(json.dumps({k: s.get(k) for k in ("task_id", "state", "healthy", "reason", "message")}), flush=True)
        if s["state"] == "TASK_RUNNING" and self.mode == "hold":
            print("RUNNING", flush=True)
            self.running.set()
        if s["state"] in TERMINAL:
            self.done.set()


def main() -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    url, mode = sys.argv[1], sys.argv[2]
    app = App(mode)
    client = MesosClient(mesos_urls=[url], frameworkName=f"avmesos-{mode}", frameworkUser="")
    client.on(MesosClient.OFFERS, app.offers)
    client.on(MesosClient.UPDATE, app.update)
    threading.Thread(target=client.register, daemon=True).start()
    if mode == "health":
        ok = app.done.wait(60)
    else:
        ok = app.running.wait(60)
        sys.stdin.read()  # until the test closes it
    client.tearDown()
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
