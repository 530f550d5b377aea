from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from frameworks.client.driver import Scheduler, SchedulerDriver
from frameworks.client.fake import FakeMaster
from protocol.backoff import Backoff
from protocol.mesos import Capability, CapabilityType, FrameworkInfo


def framework_info(name: str = "test", *caps: CapabilityType) -> FrameworkInfo:
    return FrameworkInfo(
        user="tester", name=name, roles=("*",), capabilities=tuple(Capability(type=c) for c in caps)
    )


@pytest.fixture
def master() -> FakeMaster:
    return FakeMaster()


DriverFactory = Callable[..., SchedulerDriver]


@pytest.fixture
async def make_driver(master: FakeMaster) -> AsyncIterator[DriverFactory]:
    drivers: list[SchedulerDriver] = []

    def make(*caps: CapabilityType, scheduler: Scheduler | None = None, name: str = "test", **kw: object) -> SchedulerDriver:
        d = SchedulerDriver(
            framework_info(name, *caps),
            master.transport(),
            scheduler,
            backoff=Backoff(initial=0.001, maximum=0.01),
            **kw,  # type: ignore[arg-type]
        )
        drivers.append(d)
        return d

    yield make
    for d in drivers:
        await d.stop()
