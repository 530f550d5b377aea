"""hello — a complete framework: run N ``echo`` tasks, then tear down.

    python -m frameworks.client.examples.hello --master 127.0.0.1:5050 -n 10
    python -m frameworks.client.examples.hello --fake -n 10      # no cluster: the in-process fake master

It asks for REUSABLE_OFFERS, so one offer is a lease it keeps: every finished task's resources
flow back into the same offer and the next task launches on it at once.
"""

from __future__ import annotations

import asyncio
import sys

import click

from frameworks.client.demand import demand
from frameworks.client.driver import Scheduler, SchedulerDriver
from frameworks.client.fake import FakeMaster
from frameworks.client.placement import Ask, place_all
from frameworks.client.transport import HttpTransport, Transport
from protocol.codec import JSON, MSGPACK
from protocol.mesos import Capability, CapabilityType, CommandInfo, FrameworkInfo, Offer, TaskInfo, TaskStatus
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState, is_terminal

TASK = Resources.of(cpus=0.1, mem=32)


class Hello(Scheduler):
    def __init__(self, total: int) -> None:
        self.total = total
        self.launched = 0
        self.finished = 0
        self.failed = 0
        self.done = asyncio.Event()

    async def subscribed(self, driver: SchedulerDriver, framework_id: str, master_info: object) -> None:
        print(f"subscribed as {framework_id}")
        left = self.total - self.launched
        await driver.request([demand(TASK, left)] if left > 0 else [])

    async def offers(self, driver: SchedulerDriver, offers: list[Offer]) -> None:
        await self.launch_more(driver)

    async def launch_more(self, driver: SchedulerDriver) -> None:
        """Place the remaining tasks on the cached offers (tentatively, all at once), then send
        one ACCEPT per offer; ``launch`` claims the resources in the offer cache."""
        placements = place_all(list(driver.offers), [Ask(TASK)] * (self.total - self.launched))
        by_offer: dict[str, list[TaskInfo]] = {}
        for p in placements:
            i = self.launched
            self.launched += 1
            by_offer.setdefault(p.offer_id, []).append(
                TaskInfo(
                    name=f"hello-{i}",
                    task_id=TaskID(f"hello-{i}"),
                    resources=p.resources.to_mesos(),
                    command=CommandInfo(shell=True, value=f"echo hello from task {i}"),
                )
            )
        for offer_id, infos in by_offer.items():
            await driver.launch(offer_id, infos)
        if self.launched >= self.total and not driver.offers.reusable and len(driver.offers):
            await driver.decline(driver.offers.offer_ids())  # classic offers we will not use

    async def update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        if not is_terminal(status.state):
            return
        if status.state is TaskState.TASK_FINISHED:
            self.finished += 1
        else:
            self.failed += 1
            print(f"{status.task_id.value}: {status.state.name} {status.message or ''}")
        if self.finished + self.failed >= self.total:
            self.done.set()
        else:
            await self.launch_more(driver)


async def run(transport: Transport, n: int, fake: FakeMaster | None = None, within: float = 120.0) -> int:
    info = FrameworkInfo(
        user="nobody",
        name="hello",
        capabilities=(Capability(type=CapabilityType.REUSABLE_OFFERS),),
    )
    hello = Hello(n)
    async with SchedulerDriver(info, transport, hello) as driver:
        if fake is not None:
            # the fake master runs nothing: finish every task as soon as it runs
            async def finisher() -> None:
                while not hello.done.is_set():
                    for t in fake.running():
                        fake.finish_task(t.task_id)
                    await fake.wait_for(lambda: fake.running() or hello.done.is_set())

            fin = asyncio.ensure_future(finisher())
        try:
            async with asyncio.timeout(within):
                await hello.done.wait()
        finally:
            if fake is not None:
                fin.cancel()
        await driver.teardown()
    print(f"{hello.finished} finished, {hello.failed} failed")
    return 0 if hello.failed == 0 else 1


@click.command()
@click.option("--master", default="127.0.0.1:5050", show_default=True)
@click.option("-n", "count", default=10, show_default=True, help="Number of echo tasks.")
@click.option("--json", "use_json", is_flag=True, help="Speak JSON instead of msgpack.")
@click.option("--fake", is_flag=True, help="Use the in-process fake master (no cluster needed).")
def main(master: str, count: int, use_json: bool, fake: bool) -> None:
    async def go() -> int:
        if fake:
            fm = FakeMaster()
            fm.add_agent("cpus:1;mem:512")
            return await run(fm.transport(), count, fm)
        return await run(HttpTransport(master, JSON if use_json else MSGPACK), count)

    sys.exit(asyncio.run(go()))


if __name__ == "__main__":
    main()
