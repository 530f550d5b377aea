"""A real pymesos 0.3.15 scheduler for the maintenance test: it launches one long task on its first
offer, declines every later offer for ``REFUSE`` seconds, and accepts every inverse offer it is
sent. It prints one JSON line per thing it sees, as pymesos decoded it:
``{"status": TaskStatus}``, ``{"offer": {"agent_id", "unavailability"?}}``,
``{"inverse_offer": InverseOffer}`` (then ``{"accepted": id}``).

Usage: pymesos_maintenance.py MASTER_HOST:PORT   (runs until it is killed, at most 60 s)
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from typing import Any

from pymesos import MesosSchedulerDriver, Scheduler

REFUSE = 0.3


def say(**kw: Any) -> None:
    print(json.dumps(kw), flush=True)


class Maintenance(Scheduler):
    def __init__(self) -> None:
        self.launched = False

    def resourceOffers(self, driver: Any, offers: Any) -> None:
        for offer in offers:
            seen = {"agent_id": offer["agent_id"]["value"]}
            if "unavailability" in offer:
                seen["unavailability"] = offer["unavailability"]
            say(offer=seen)
            if self.launched:
                driver.declineOffer([offer["id"]], filters={"refuse_seconds": REFUSE})
                continue
            self.launched = True
            task = {
                "name": "long", "task_id": {"value": "long"}, "agent_id": offer["agent_id"],
                "command": {"value": "exec sleep 60"},
                "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                              {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}}],
            }
            driver.launchTasks([offer["id"]], [task], filters={"refuse_seconds": REFUSE})

    def inverseOffers(self, driver: Any, offers: Any) -> None:
        for io in offers:
            say(inverse_offer=io)
            driver.acceptInverseOffers([io["id"]])
            say(accepted=io["id"]["value"])

    def statusUpdate(self, driver: Any, update: Any) -> None:
        say(status=update)


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    framework = {"user": "", "name": "pymesos-maintenance", "hostname": "127.0.0.1"}
    driver = MesosSchedulerDriver(Maintenance(), framework, sys.argv[1], use_addict=False)
    driver.start()
    threading.Event().wait(60)
    driver.stop()
    driver.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
