"""Who may be offered what: framework activity per role in the sorters, and the one
eligibility chain a candidate (framework, role, agent, resources) must pass.

``ELIGIBILITY`` is the ordered tuple of every check (``Check``: a name and a small typed test
returning why not, or None). Each stage runs the part of it that applies to it (``DRF``,
``QUOTA``, ``DEMAND``, ``REVOCABLE``, ``STARVATION``, ``LEASE``: subsets in the same order) through
``why_not``. The two hot stages (DRF and quota) also have a compiled form, the same tests
inlined in their loops (``passes.py``), taken when ``AllocatorConfig.fast_paths`` is on; with it
off they run the chain. ``tests/property/allocator/test_chain_differential.py`` checks that both
decide exactly alike on generated clusters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import attrs

from master.allocator.constraints import agent_matches
from master.allocator.ledger import Ledger
from master.allocator.quantities import meets_minimum
from master.allocator.state import EMPTY, AgentState, FrameworkState
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


# --- the eligibility chain ------------------------------------------------------------------

Test = Callable[[Ledger, FrameworkState, str, AgentState, Resources], "str | None"]


@attrs.frozen
class Check:
    """One eligibility test: ``test(ledger, fw, role, agent, candidate)`` says why the framework
    may not be offered ``candidate`` on ``agent`` in ``role`` (None: it may). ``on_candidate``:
    the test reads the candidate resources (the others decide for the triple alone)."""

    name: str
    test: Test
    on_candidate: bool = False


def _agent_active(ledger: Ledger, fw: FrameworkState, role: str, agent: AgentState, c: Resources) -> str | None:
    return None if agent.active else "agent deactivated (unreachable or draining)"


def _framework_active(ledger: Ledger, fw: FrameworkState, role: str, agent: AgentState, c: Resources) -> str | None:
    return None if fw.active else "framework inactive (disconnected)"


def _role_offered(ledger: Ledger, fw: FrameworkState, role: str, agent: AgentState, c: Resources) -> str | None:
    return None if role in fw.offer_roles else f"framework not subscribed in role {role}"


def _role_not_suppressed(
    ledger: Ledger, fw: FrameworkState, role: str, agent: AgentState, c: Resources
) -> str | None:
    return f"role {role} suppressed (SUPPRESS); send REVIVE" if role in fw.suppressed else None


def _plain_drf(ledger: Ledger, fw: FrameworkState, role: str, agent: AgentState, c: Resources) -> str | None:
    return "framework declared demand (REQUEST): offered shaped units only" if fw.uses_demand else None


def _revocable_capable(ledger: Ledger, fw: FrameworkState, role: str, agent: AgentState, c: Resources) -> str | None:
    return None if fw.revocable_ok else "framework lacks the REVOCABLE_RESOURCES capability"


def _gpus(ledger: Ledger, fw: FrameworkState, role: str, agent: AgentState, c: Resources) -> str | None:
    return GPU_REASON if gpu_blocked(fw, agent) else None


def _constraints(ledger: Ledger, fw: FrameworkState, role: str, agent: AgentState, c: Resources) -> str | None:
    return CONSTRAINT_REASON if excluded(fw, role, agent.agent_id) else None


def _no_filter(ledger: Ledger, fw: FrameworkState, role: str, agent: AgentState, c: Resources) -> str | None:
    if ledger.filters.expires_at(fw.framework_id, role, agent.agent_id) is None:
        return None
    return "filtered on this agent (revocable resources go only where no filter stands)"


def _nonempty(ledger: Ledger, fw: FrameworkState, role: str, agent: AgentState, c: Resources) -> str | None:
    return None if c else "nothing left for the role here (reservations, quota limit, guarantees' headroom)"


def _not_declined(ledger: Ledger, fw: FrameworkState, role: str, agent: AgentState, c: Resources) -> str | None:
    return "a DECLINE filter covers these resources" if filtered(ledger, fw, role, agent, c) else None


def _minimum(ledger: Ledger, fw: FrameworkState, role: str, agent: AgentState, c: Resources) -> str | None:
    cache = agent.free_scalars
    scal = cache[1] if cache is not None and cache[0] is c else c.scalars()
    return None if meets_minimum(scal, minimum_for(ledger, fw, role)) else "below the minimum allocatable resources"


ELIGIBILITY: tuple[Check, ...] = (
    Check("agent_active", _agent_active),
    Check("framework_active", _framework_active),
    Check("role_offered", _role_offered),
    Check("role_not_suppressed", _role_not_suppressed),
    Check("plain_drf", _plain_drf),
    Check("revocable_capable", _revocable_capable),
    Check("gpu_capability", _gpus),
    Check("offer_constraints", _constraints),
    Check("no_filter", _no_filter),
    Check("nonempty", _nonempty, on_candidate=True),
    Check("not_declined", _not_declined, on_candidate=True),
    Check("minimum_allocatable", _minimum, on_candidate=True),
)


def chain(*names: str) -> tuple[Check, ...]:
    """The checks of ``ELIGIBILITY`` named, in the chain's order (an unknown name raises)."""
    known = {c.name for c in ELIGIBILITY}
    unknown = set(names) - known
    if unknown:
        raise ValueError(f"unknown eligibility checks {sorted(unknown)}")
    return tuple(c for c in ELIGIBILITY if c.name in names)


_TRIPLE = ("agent_active", "framework_active", "role_offered", "role_not_suppressed", "gpu_capability",
           "offer_constraints")
# plain DRF and the quota stage: what a role may get on the agent, shaped, to a framework without demand
DRF = chain(*_TRIPLE, "plain_drf", "nonempty", "not_declined", "minimum_allocatable")
DRF_UNSHAPED = chain(*_TRIPLE, "plain_drf", "nonempty", "not_declined")  # before quota limits shape it
QUOTA = DRF
# a demand's whole units (the shape is the minimum); the demand's role is the one it declared
DEMAND = chain("agent_active", "framework_active", "role_not_suppressed", "gpu_capability", "offer_constraints",
               "nonempty", "not_declined")
# revocable pools: only capable frameworks, and only where no filter of theirs stands
REVOCABLE = chain(*_TRIPLE, "revocable_capable", "no_filter", "nonempty", "minimum_allocatable")
# an offer held unused while a framework starves: could the starving one use it?
STARVATION = chain(*_TRIPLE, "plain_drf", "nonempty", "not_declined")
# a lease regrows with an ended task's resources
LEASE = chain("agent_active", "framework_active", "role_not_suppressed", "gpu_capability", "offer_constraints")
# an offer already held, after its holder's capabilities or constraints or its agent changed: its
# idle part is taken back when these fail (``handlers.py``); ``Allocator.why_not_offered`` asks
# the same checks about every agent
HELD_GPU = chain("gpu_capability")
HELD_CONSTRAINTS = chain("offer_constraints")


def why_not(
    checks: tuple[Check, ...],
    ledger: Ledger,
    fw: FrameworkState,
    role: str,
    agent: AgentState,
    candidate: Resources | None = None,
    triple: bool = True,
) -> str | None:
    """The reason of the first check in ``checks`` that fails, or None when all pass. Without a
    ``candidate`` only the checks of the triple run (those with ``on_candidate`` are skipped);
    ``triple=False`` runs only the candidate's (the triple passed them already)."""
    for check in checks:
        if check.on_candidate:
            if candidate is None:
                continue
            reason = check.test(ledger, fw, role, agent, candidate)
        elif triple:
            reason = check.test(ledger, fw, role, agent, EMPTY if candidate is None else candidate)
        else:
            continue
        if reason is not None:
            return reason
    return None
