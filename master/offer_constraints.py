"""SUBSCRIBE's and UPDATE_FRAMEWORK's ``offer_constraints`` and ``FrameworkInfo.offer_filters``
checked and turned into the allocator's (pure; the allocator applies them:
``master/allocator/constraints.py``, ``eligibility.minimum_for``).

A constraint the allocator could not evaluate refuses the call with Mesos' words: a role that is
not one of the framework's, a role without groups, an empty group, a selector or predicate not
set, an unknown pseudoattribute, a regular expression RE2 rejects or finds too complex.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from master.allocator.constraints import (
    AttributeConstraint,
    ConstraintError,
    Predicate,
    Pseudo,
    RoleConstraints,
    check_groups,
)
from protocol.mesos.common import OfferFilters
from protocol.mesos.scheduler import AttributeConstraint as MesosConstraint
from protocol.mesos.scheduler import OfferConstraints, PseudoattributeType

__pure__ = True


def offer_constraints(oc: OfferConstraints | None, roles: Iterable[str]) -> dict[str, RoleConstraints]:
    """The allocator's constraints by role, or ``ConstraintError`` with the reason the call is
    refused. No constraints (absent, or no role) is an empty dict."""
    if oc is None or not oc.role_constraints:
        return {}
    valid = set(roles)
    for role in sorted(oc.role_constraints):
        if role not in valid:
            raise ConstraintError(
                f"Offer constraints specify `role_constraints` for a role '{role}' not contained in the set of roles")
    out: dict[str, RoleConstraints] = {}
    for role, rc in sorted(oc.role_constraints.items()):
        try:
            groups = tuple(tuple(_constraint(c) for c in g.attribute_constraints) for g in rc.groups)
            check_groups(role, groups)
        except ConstraintError as e:
            raise ConstraintError(f"Offer constraints are not valid: {_in_role(role, str(e))}") from None
        out[role] = groups
    return out


def min_allocatable(offer_filters: Mapping[str, OfferFilters]) -> dict[str, tuple[dict[str, float], ...]]:
    """``FrameworkInfo.offer_filters`` as the allocator's minimum allocatable alternatives by role
    (a role whose filters set no ``min_allocatable_resources`` keeps the master's minimum), or
    ``ValueError`` with Mesos' reason."""
    out: dict[str, tuple[dict[str, float], ...]] = {}
    for role, filters in sorted(offer_filters.items()):
        mar = filters.min_allocatable_resources
        if mar is None:
            continue
        alternatives: list[dict[str, float]] = []
        for q in mar.quantities:
            if not q.quantities:
                raise ValueError("Resource quantities must contain at least one quantity")
            alt: dict[str, float] = {}
            for name, scalar in sorted(q.quantities.items()):
                v = scalar.value
                why = ("NaN" if math.isnan(v) else "Infinity" if math.isinf(v) else "Negative values" if v < 0 else None)
                if why is not None:
                    raise ValueError(f"Invalid resource quantity for '{name}': {why} not supported")
                alt[name] = v
            alternatives.append(alt)
        out[role] = tuple(alternatives)
    return out


def _in_role(role: str, reason: str) -> str:
    if reason.startswith("'OfferConstraints::"):
        return reason
    return f"A role {role} has an invalid 'AttributeConstraint': {reason}"


def _constraint(c: MesosConstraint) -> AttributeConstraint:
    sel = c.selector
    attribute: str | None = None
    pseudo: Pseudo | None = None
    if sel is not None and sel.pseudoattribute_type is not None and sel.attribute_name is None:
        if sel.pseudoattribute_type is PseudoattributeType.UNKNOWN:
            raise ConstraintError("Unknown pseudoattribute type")
        pseudo = Pseudo(sel.pseudoattribute_type.value)
    elif sel is not None and sel.attribute_name is not None and sel.pseudoattribute_type is None:
        attribute = sel.attribute_name
    else:
        raise ConstraintError(
            "Exactly one of 'AttributeConstraint::Selector::name' or "
            "'AttributeConstraint::Selector::pseudoattribute_type' must be set")
    p = c.predicate
    chosen: list[tuple[Predicate, str]] = []
    if p is not None:
        if p.exists is not None:
            chosen.append((Predicate.EXISTS, ""))
        if p.not_exists is not None:
            chosen.append((Predicate.NOT_EXISTS, ""))
        if p.text_equals is not None:
            chosen.append((Predicate.TEXT_EQUALS, p.text_equals.value or ""))
        if p.text_not_equals is not None:
            chosen.append((Predicate.TEXT_NOT_EQUALS, p.text_not_equals.value or ""))
        if p.text_matches is not None:
            chosen.append((Predicate.TEXT_MATCHES, p.text_matches.regex or ""))
        if p.text_not_matches is not None:
            chosen.append((Predicate.TEXT_NOT_MATCHES, p.text_not_matches.regex or ""))
    if len(chosen) != 1:
        raise ConstraintError("Unknown predicate type" if not chosen else "Exactly one predicate must be set")
    kind, text = chosen[0]
    return AttributeConstraint.make(kind, attribute=attribute, pseudo=pseudo, text=text)
