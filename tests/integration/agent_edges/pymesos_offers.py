"""A real pymesos 0.3.15 scheduler that reports its offers, for the oversubscription test.

Usage: pymesos_offers.py MASTER_HOST:PORT NAME [--revocable]
Prints one JSON line per offer ({"offer": {...}}) and per status update ({"status": {...}}).
Without --revocable it declines every offer (short refusal) and runs until stdin closes.
With --revocable (the REVOCABLE_RESOURCES capability) it launches one task on 1 revocable cpu from
the first offer that has revocable cpus, kills it once RUNNING and exits 0 after TASK_KILLED.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from typing import Any

from pymesos import MesosSchedulerDriver, Scheduler


def revocable_cpus(offer: Any) -> float:
    return sum(
        r["scalar"]["value"] for r in offer.get("resources", []) if r["name"] == "cpus" and "revocable" in r
    )


class Reporter(Scheduler):
    def __init__(self, launch: bool) -> None:
        self.launch = launch
        self.launched = False
        self.done = threading.Event()

    def resourceOffers(self, driver: Any, offers: Any) -> None:
        for offer in offers:
            print(json.dumps({"offer": offer}), flush=True)
            if self.launch and not self.launched and revocable_cpus(offer) >= 1:
                self.launched = True
                task = {
                    "name": "on-slack",
                    "task_id": {"value": "on-slack"},
                    "agent_id": offer["agent_id"],
                    "resources": [
                        {"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}, "revocable": {}}
                    ],
                    "command": {"value": "sleep 30"},
                }
                driver.launchTasks(offer["id"], [task], filters={"refuse_seconds": 1})
            else:
                driver.declineOffer(offer["id"], filters={"refuse_seconds": 0.2})

    def statusUpdate(self, driver: Any, update: Any) -> None:
        print(json.dumps({"status": update}), flush=True)
        if update["state"] == "TASK_RUNNING":
            driver.killTask(update["task_id"])
        elif update["state"] in ("TASK_KILLED", "TASK_FAILED", "TASK_ERROR", "TASK_LOST", "TASK_FINISHED"):
            self.done.set()


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    master, name = sys.argv[1], sys.argv[2]
    launch = "--revocable" in sys.argv[3:]
    framework: dict[str, Any] = {"user": "agora", "name": name, "hostname": "127.0.0.1"}
    if launch:
        framework["capabilities"] = [{"type": "REVOCABLE_RESOURCES"}]
    sched = Reporter(launch)
    driver = MesosSchedulerDriver(sched, framework, master, use_addict=False)
    driver.start()
    if launch:
        ok = sched.done.wait(60)
    else:
        sys.stdin.read()  # until the test closes our stdin
        ok = True
    driver.stop()
    driver.join()
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
