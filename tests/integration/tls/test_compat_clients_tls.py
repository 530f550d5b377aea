"""Mesos clients against a TLS master. mesoshttp 0.4.2 speaks https unchanged (it posts with
``requests``; its ``verify`` attribute takes the CA file): a task launched through it finishes on
a real TLS agent. pymesos 0.3.15 has no TLS at all (raw ``socket``/``http.client.HTTPConnection``,
no scheme or CA option), so it is not run against a TLS master (see protocol/README.md, TLS)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from master.service import MasterService

from .conftest import Certs, agent_process, agent_tls_args

try:
    from mesoshttp.client import MesosClient
except ImportError as e:  # pragma: no cover - a missing client is a failure, never a skip
    raise ImportError("mesoshttp 0.4.2 is required: run scripts/install-compat-clients") from e

# mesoshttp calls the deprecated Logger.warn (a client quirk, not ours)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:The 'warn' method is deprecated:DeprecationWarning"),
]


class OneTask:
    def __init__(self) -> None:
        self.launched = False
        self.states: list[str] = []
        self.finished = threading.Event()
        self.errors: list[str] = []

    def offers(self, offers: list[Any]) -> None:
        for offer in offers:
            if self.launched:
                offer.decline()
                continue
            self.launched = True
            offer.accept([{
                "name": "hello", "task_id": {"value": "hello"}, "command": {"value": "echo hello"},
                "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                              {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}}],
            }])

    def update(self, update: Any) -> None:
        self.states.append(update["status"]["state"])
        if self.states[-1] == "TASK_FINISHED":
            self.finished.set()

    def error(self, message: str) -> None:
        self.errors.append(message)


async def test_mesoshttp_over_https_with_the_cluster_ca(master: MasterService, certs: Certs, tmp_path: Path) -> None:
    c = certs.cluster
    async with agent_process(master, tmp_path / "agent", *agent_tls_args(c)):
        client = MesosClient(mesos_urls=[master.url], frameworkName="mesoshttp-tls", frameworkUser="nobody",
                             max_reconnect=1)
        client.verify = str(c.ca)  # requests' verify: the CA bundle to trust
        sched = OneTask()
        client.on(MesosClient.OFFERS, sched.offers)
        client.on(MesosClient.UPDATE, sched.update)
        client.on(MesosClient.ERROR, sched.error)
        loop_thread = threading.Thread(target=client.register, name="mesoshttp-tls", daemon=True)
        loop_thread.start()
        try:
            assert await asyncio.to_thread(sched.finished.wait, 60), f"no TASK_FINISHED: {sched.states}"
        finally:
            client.tearDown()  # TEARDOWN goes out when the next heartbeat arrives
            await asyncio.to_thread(loop_thread.join, 20)
        assert not loop_thread.is_alive()
        assert sched.errors == [] and sched.states[-1] == "TASK_FINISHED"
        await master.wait_until(lambda: master.state.calls.get("TEARDOWN") == 1, 10)
