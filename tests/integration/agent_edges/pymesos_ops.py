"""A real pymesos 0.3.15 scheduler that accepts its first offer with the operations of a JSON
spec and waits for the tasks it names to end.

Usage: pymesos_ops.py MASTER_HOST:PORT SPEC.json
SPEC: {"operations": [Mesos v1 Offer.Operation, ...], "wait": [task id, ...]}. The text
"AGENT_ID" anywhere in the operations is replaced with the offer's agent id, and resources
are taken as written. Prints one JSON line per status update (pymesos decodes them) and exits 0
when every task in "wait" has a terminal state, 2 after 60 s.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from typing import Any

from pymesos import MesosSchedulerDriver, Scheduler

TERMINAL = {"TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_LOST", "TASK_ERROR", "TASK_DROPPED", "TASK_GONE"}


class Ops(Scheduler):
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.launched = False
        self.waiting = set(spec["wait"])
        self.done = threading.Event()

    def resourceOffers(self, driver: Any, offers: Any) -> None:
        for offer in offers:
            if self.launched:
                driver.declineOffer(offer["id"])
                continue
            self.launched = True
            text = json.dumps(self.spec["operations"]).replace("AGENT_ID", offer["agent_id"]["value"])
            driver.acceptOffers([offer["id"]], json.loads(text))

    def statusUpdate(self, driver: Any, update: Any) -> None:
        print(json.dumps({"status": update}), flush=True)
        if update["state"] in TERMINAL:
            self.waiting.discard(update["task_id"]["value"])
            if not self.waiting:
                self.done.set()


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    master, spec_path = sys.argv[1], sys.argv[2]
    with open(spec_path) as f:
        spec = json.load(f)
    sched = Ops(spec)
    framework = {"user": "", "name": "pymesos-ops", "hostname": "127.0.0.1", "checkpoint": True}
    driver = MesosSchedulerDriver(sched, framework, master, use_addict=False)
    driver.start()
    finished = sched.done.wait(60)
    driver.stop()
    driver.join()
    return 0 if finished else 2


if __name__ == "__main__":
    sys.exit(main())
