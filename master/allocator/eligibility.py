"""Who may be offered what: framework activity per role in the sorters, and the checks a
candidate (framework, role, agent) must pass."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from master.allocator.constraints import agent_matches
from master.allocator.ledger import Ledger
from master.allocator.state import AgentState, FrameworkState
from protocol.resources import Resources

__pure__ = True


def fully_filtered(ledger: Ledger, fw: FrameworkState, role: str) -> bool:
    n = len(ledger.agents)
    return n > 0 and ledger.filters.agents_filtered(fw.framework_id, role) >= n


def regular_eligible(fw: FrameworkState, role: str) -> bool:
    """May receive plain DRF offers in ``role`` (demand-declaring frameworks get shaped ones)."""
    return fw.active and role in fw.offer_roles and role not in fw.suppressed and not fw.uses_demand


def refresh_activity(ledger: Ledger, fw: FrameworkState) -> None:
    """Put the framework in (or take it out of) its roles' sorters' active lists."""
    for role in fw.roles:
        active = regular_eligible(fw, role) and not fully_filtered(ledger, fw, role)
        ledger.roles.set_active(role, fw.framework_id, active)
    if fw.framework_id in ledger.rev_sorter:
        if fw.active and fw.revocable_ok and any(r not in fw.suppressed for r in fw.offer_roles):
            ledger.rev_sorter.activate(fw.framework_id)
        else:
            ledger.rev_sorter.deactivate(fw.framework_id)


def refresh_all(ledger: Ledger) -> None:
    for fw in ledger.frameworks.values():
        refresh_activity(ledger, fw)
    ledger.activity_dirty = False
    ledger.activity_of.clear()


def refresh_some(ledger: Ledger) -> None:
    """Refresh only the frameworks whose filters changed (``ledger.activity_of``)."""
    frameworks = ledger.frameworks
    for fid in ledger.activity_of:
        fw = frameworks.get(fid)
        if fw is not None:
            refresh_activity(ledger, fw)
    ledger.activity_of.clear()


GPU_REASON = "agent has GPUs and the framework lacks the GPU_RESOURCES capability"


def gpu_blocked(fw: FrameworkState, agent: AgentState) -> bool:
    """Mesos: resources of an agent with GPUs are offered only to GPU_RESOURCES frameworks (one
    that cannot use the GPUs could otherwise hold the rest of the agent and starve GPU work).
    Every stage skips such a (framework, agent) pair; the hot loops inline this test."""
    return agent.has_gpus and not fw.gpu_ok


CONSTRAINT_REASON = "the agent does not satisfy the framework's offer constraints for the role"


def excluded(fw: FrameworkState, role: str, agent_id: str) -> bool:
    """Mesos' offer constraints: the agent satisfies none of the framework's groups for ``role``
    (``FrameworkState.excluded``, kept current by the handlers). Every stage skips such a
    (framework, role, agent); a cluster without constraints skips this test in its DRF fast path."""
    ex = fw.excluded
    if not ex:
        return False
    agents = ex.get(role)
    return agents is not None and agent_id in agents


def refresh_exclusions(ledger: Ledger, fw: FrameworkState, agents: Iterable[AgentState]) -> None:
    """Re-evaluate the framework's offer constraints on ``agents`` (all of them when its
    constraints change, one when an agent (re-)registers)."""
    for role, groups in fw.constraints.items():
        out = fw.excluded.setdefault(role, set())
        for agent in agents:
            if agent_matches(groups, agent.hostname, agent.attributes):
                out.discard(agent.agent_id)
            else:
                out.add(agent.agent_id)


def minimum_for(ledger: Ledger, fw: FrameworkState, role: str) -> Iterable[Mapping[str, float]]:
    """The minimum allocatable alternatives for the framework in ``role``: its own (Mesos'
    ``FrameworkInfo.offer_filters``, an empty one admitting anything) or the allocator's."""
    own = fw.min_allocatable
    if own:
        alternatives = own.get(role)
        if alternatives is not None:
            return alternatives
    return ledger.config.min_allocatable


def available_to(agent: AgentState, role: str) -> Resources:
    """Free resources of the agent this role may be offered (reservations of other roles out)."""
    return agent.free.allocatable_to(role) if agent.has_reserved else agent.free


def filtered(ledger: Ledger, fw: FrameworkState, role: str, agent: AgentState, candidate: Resources) -> bool:
    flt = ledger.filters.of(fw.framework_id, role)
    if not flt:
        return False
    f = flt.get(agent.agent_id)
    return f is not None and f.resources.contains(candidate)
