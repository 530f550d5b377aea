"""The offer book of the master's pure core (``MasterState.offer_book``): it drives the allocator
(``master.allocator``, synchronously) and turns its decisions into what frameworks and agents are
sent: OFFERS (batched per fact: a lease updated several times within one fact is sent once, in
its latest form; one made and rescinded within it is never sent), RESCIND and agent REVOKE.

The offers themselves (which are outstanding, single use) are the allocator's book; this one
holds only what sending them needs: the batch of the fact being handled and two small memos
(offered resources in Mesos form, agent URLs), bounded.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from master.alloc_port import AllocatorPort
from master.allocator import decisions as ad
from master.allocator import events as ae
from master.allocator.allocator import AllocatorError
from master.events import Effect
from master.records import AgentRec, FrameworkRec
from protocol import agent_channel as ac
from protocol import mesos, mesos_common
from protocol.agent_channel import AGENT_HTTPS
from protocol.resources import Resources

__pure__ = True

_MEMO_MAX = 4096  # entries in each of the book's memos before they are cleared
OFFERS_PER_EVENT = 500  # offers in one OFFERS event (bounded record size)


class OfferHost(Protocol):
    """What the offer book needs of the core: the allocator, the frameworks and agents offers are
    made to and on, each agent's unavailability (its offers carry it), the quota and weight
    records, and the core's two ways to send."""

    alloc: AllocatorPort
    frameworks: dict[str, FrameworkRec]
    agents: dict[str, AgentRec]
    agent_unavailability: dict[str, mesos.Unavailability]
    quotas: dict[str, tuple[Resources, Resources | None]]
    weights: dict[str, float]
    allocator_errors: list[str]

    def _send(self, fw: FrameworkRec, event: mesos.Event, fx: list[Effect]) -> None: ...
    def _to_agent(self, agent_id: str, body: ac.Body, fx: list[Effect]) -> bool: ...


class OfferBook:
    """The allocator's driver and the offers' sender, over an ``OfferHost``."""

    __slots__ = ("_agent_urls", "_mesos_res", "batch", "core", "created")

    def __init__(self, core: OfferHost) -> None:
        self.core = core
        # while one fact is handled: per framework, the offers to send at its end, by id (a lease
        # updated several times is sent once, latest form); None outside ``MasterState.handle``
        self.batch: dict[str, dict[str, ad.Offer]] | None = None
        self.created: set[str] = set()  # offers of that batch not sent before
        # offers re-send the same few resource sets over and over (a lease shrinking and growing
        # by one task's worth): their Mesos form is built once (bounded memo, values immutable)
        self._mesos_res: dict[tuple[Resources, str], tuple[mesos_common.Resource, ...]] = {}
        self._agent_urls: dict[tuple[str, int, str], mesos.URL] = {}

    def alloc_event(self, ev: ae.Event, now: float, fx: list[Effect]) -> None:
        """Hand the allocator one fact and act on its decisions."""
        core = self.core
        try:
            decisions = core.alloc.handle(ev, now)
        except AllocatorError as e:
            # the allocator refused a fact (e.g. a role it rejects); its state is unchanged
            core.allocator_errors.append(f"{type(ev).__name__}: {e}")
            del core.allocator_errors[:-20]
            return
        self.decisions(decisions, now, fx)

    def decisions(self, decisions: Iterable[ad.Decision], now: float, fx: list[Effect]) -> None:
        core = self.core
        batch = self.batch
        own = batch is None
        if batch is None:
            batch = self.batch = {}
        frameworks = core.frameworks
        try:
            for d in decisions:
                match d:
                    case ad.OfferCreated() | ad.OfferUpdated():
                        fw = frameworks.get(d.offer.framework_id)
                        if fw is None or not fw.connected:
                            continue
                        # (an agent with GPUs is never offered to a framework without
                        # GPU_RESOURCES: the allocator skips that pair, see ``gpu_blocked``)
                        oid = d.offer.offer_id
                        pending = batch.get(fw.framework_id)
                        if pending is None:
                            pending = batch[fw.framework_id] = {}
                        else:
                            pending.pop(oid, None)  # updated again: the latest, moved to the end
                        pending[oid] = d.offer  # its Mesos form is built once, when sent
                        if isinstance(d, ad.OfferCreated):
                            self.created.add(oid)
                    case ad.OfferRescinded():
                        fw = frameworks.get(d.framework_id)
                        if fw is not None and fw.connected:
                            pending = batch.get(fw.framework_id)
                            if pending and d.offer_id in pending:
                                del pending[d.offer_id]
                                if d.offer_id in self.created:
                                    # made in this same batch and rescinded at once: never sent
                                    self.created.discard(d.offer_id)
                                    continue
                            core._send(fw, mesos.Event.make_rescind(mesos.OfferID(d.offer_id)), fx)
                    case ad.Revoke():
                        core._to_agent(
                            d.agent_id,
                            ac.Revoke(
                                framework_id=mesos.FrameworkID(d.framework_id),
                                task_ids=tuple(mesos.TaskID(t) for t in d.task_ids),
                                grace_seconds=d.grace_seconds,
                                reason=d.reason,
                            ),
                            fx,
                        )
        finally:
            if own:
                self.batch = None
        if own:
            self.flush(batch, fx)

    def flush(self, batch: dict[str, dict[str, ad.Offer]], fx: list[Effect]) -> None:
        """Send the offers a batch made or updated: OFFERS events per framework, at most
        ``OFFERS_PER_EVENT`` offers each (one event for 10,000 agents would be ~6 MB, past what a
        client decodes in one record)."""
        self.created.clear()
        core = self.core
        for fid, pending in batch.items():
            fw = core.frameworks.get(fid)
            if not pending or fw is None:
                continue
            offers = [self.mesos_offer(o, fw) for o in pending.values()]
            for i in range(0, len(offers), OFFERS_PER_EVENT):
                core._send(fw, mesos.Event.make_offers(tuple(offers[i : i + OFFERS_PER_EVENT])), fx)

    def offer_resources(self, resources: Resources, role: str) -> tuple[mesos_common.Resource, ...]:
        key = (resources, role)
        out = self._mesos_res.get(key)
        if out is None:
            if len(self._mesos_res) >= _MEMO_MAX:
                self._mesos_res.clear()
            out = self._mesos_res[key] = resources.to_mesos(allocation_role=role)
        return out

    def agent_url(self, ag: AgentRec) -> mesos.URL:
        key = (ag.hostname, ag.port, "https" if AGENT_HTTPS in ag.capabilities else "http")
        url = self._agent_urls.get(key)
        if url is None:
            if len(self._agent_urls) >= _MEMO_MAX:
                self._agent_urls.clear()
            url = self._agent_urls[key] = mesos.URL(
                scheme=key[2], address=mesos.Address(port=ag.port, hostname=ag.hostname), path="/slave(1)"
            )
        return url

    def mesos_offer(self, o: ad.Offer, fw: FrameworkRec) -> mesos.Offer:
        core = self.core
        ag = core.agents.get(o.agent_id)
        executor_ids = (
            tuple(mesos.ExecutorID(eid) for (aid, eid) in fw.executors if aid == o.agent_id) if fw.executors else ()
        )
        url = self.agent_url(ag) if ag is not None else None
        return mesos.Offer(
            id=mesos.OfferID(o.offer_id),
            framework_id=mesos.FrameworkID(o.framework_id),
            agent_id=mesos.AgentID(o.agent_id),
            hostname=o.hostname,
            url=url,
            resources=self.offer_resources(o.resources, o.role),
            attributes=ag.attributes if ag is not None else (),
            executor_ids=executor_ids,
            # an agent on a machine DRAINING for maintenance: when it will be unavailable
            unavailability=core.agent_unavailability.get(o.agent_id) if core.agent_unavailability else None,
            allocation_info=mesos.AllocationInfo(role=o.role),
        )

    def set_quota(
        self, role: str, guarantee: Resources, limit: Resources | None, now: float, fx: list[Effect] | None = None
    ) -> None:
        self.core.quotas[role] = (guarantee, limit)
        self.alloc_event(ae.QuotaSet(role=role, guarantee=guarantee, limit=limit), now, fx if fx is not None else [])

    def set_weight(self, role: str, weight: float, now: float, fx: list[Effect] | None = None) -> None:
        self.core.weights[role] = weight
        self.alloc_event(ae.WeightSet(role=role, weight=weight), now, fx if fx is not None else [])
