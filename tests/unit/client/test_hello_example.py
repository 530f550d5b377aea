"""The README's example framework runs to completion against the fake master."""

from __future__ import annotations

from frameworks.client.examples.hello import run
from frameworks.client.fake import FakeMaster
from protocol.mesos import CallType


async def test_hello_runs_all_tasks_on_one_reused_offer() -> None:
    fm = FakeMaster()
    fm.add_agent("cpus:0.3;mem:512")  # room for 3 tasks at a time
    assert await run(fm.transport(), 12, fm, within=30) == 0
    assert len(fm.tasks) == 12
    accepts = fm.calls_of(CallType.ACCEPT)
    offer_ids = {o.value for c in accepts if c.accept for o in c.accept.offer_ids}
    assert len(offer_ids) == 1  # every launch reused the same lease
    assert fm.calls_of(CallType.TEARDOWN)
