"""The slice of the allocator the master core uses (``master.allocator``'s public API).

``MasterState`` talks to the allocator only through this protocol, so its tests can also run
against the real allocator (``make_allocator``) and the shell owns nothing allocator-specific.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from master.allocator import decisions as ad
from master.allocator import events as ae
from master.allocator.views import AgentView

__pure__ = True


class AllocatorPort(Protocol):
    def handle(self, event: ae.Event, now: float) -> Sequence[ad.Decision]: ...

    def accept(self, event: ae.OffersAccepted, now: float) -> ad.AcceptResult: ...

    def allocate(self, now: float) -> Sequence[ad.Decision]: ...

    def next_deadline(self, now: float) -> float | None: ...

    def offer(self, offer_id: str) -> ad.Offer | None: ...

    def outstanding_offers(self) -> Sequence[ad.Offer]: ...

    def agent_view(self, agent_id: str) -> AgentView | None: ...
