"""master/offer_constraints.py: SUBSCRIBE's and UPDATE_FRAMEWORK's ``offer_constraints`` (Mesos
JSON) turned into the allocator's, and each reason a call is refused, in Mesos' words."""

from __future__ import annotations

from typing import Any

import pytest

from master.allocator.constraints import AttributeConstraint, ConstraintError, Predicate, Pseudo
from master.offer_constraints import offer_constraints
from protocol import codec
from protocol.mesos.scheduler import OfferConstraints


def oc(raw: dict[str, Any]) -> OfferConstraints:
    return codec.from_builtins(OfferConstraints, raw)


def groups(role: str, *gs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role_constraints": {role: {"groups": [{"attribute_constraints": g} for g in gs]}}}


def test_none_and_empty_mean_no_constraints() -> None:
    assert offer_constraints(None, ["a"]) == {}
    assert offer_constraints(oc({}), ["a"]) == {}


def test_every_selector_and_predicate() -> None:
    raw = groups(
        "web",
        [{"selector": {"attribute_name": "rack"}, "predicate": {"text_equals": {"value": "r1"}}},
         {"selector": {"pseudoattribute_type": "HOSTNAME"}, "predicate": {"text_matches": {"regex": "h[0-9]"}}}],
        [{"selector": {"pseudoattribute_type": "ZONE"}, "predicate": {"not_exists": {}}}],
        [{"selector": {"attribute_name": "a"}, "predicate": {"exists": {}}},
         {"selector": {"pseudoattribute_type": "REGION"}, "predicate": {"text_not_equals": {"value": "eu"}}},
         {"selector": {"attribute_name": "b"}, "predicate": {"text_not_matches": {"regex": "x.*"}}}],
    )
    got = offer_constraints(oc(raw), ["web", "db"])
    A = AttributeConstraint
    assert got == {"web": (
        (A(Predicate.TEXT_EQUALS, "rack", None, "r1"), A(Predicate.TEXT_MATCHES, None, Pseudo.HOSTNAME, "h[0-9]")),
        (A(Predicate.NOT_EXISTS, None, Pseudo.ZONE, ""),),
        (A(Predicate.EXISTS, "a", None, ""), A(Predicate.TEXT_NOT_EQUALS, None, Pseudo.REGION, "eu"),
         A(Predicate.TEXT_NOT_MATCHES, "b", None, "x.*")),
    )}


EXISTS = {"exists": {}}
REFUSED = [
    (groups("db", [{"selector": {"attribute_name": "a"}, "predicate": EXISTS}]),
     "Offer constraints specify `role_constraints` for a role 'db' not contained in the set of roles"),
    ({"role_constraints": {"web": {}}},
     "Offer constraints are not valid: 'OfferConstraints::role_constraints' has an empty "
     "'RoleConstraints::groups' for role web"),
    (groups("web", []),
     "Offer constraints are not valid: 'OfferConstraints::RoleConstraints::groups' for role web contains an "
     "empty RoleConstraints::Group"),
    (groups("web", [{"predicate": EXISTS}]),
     "Offer constraints are not valid: A role web has an invalid 'AttributeConstraint': Exactly one of "
     "'AttributeConstraint::Selector::name' or 'AttributeConstraint::Selector::pseudoattribute_type' must be set"),
    (groups("web", [{"selector": {"attribute_name": "a", "pseudoattribute_type": "ZONE"}, "predicate": EXISTS}]),
     "Offer constraints are not valid: A role web has an invalid 'AttributeConstraint': Exactly one of "
     "'AttributeConstraint::Selector::name' or 'AttributeConstraint::Selector::pseudoattribute_type' must be set"),
    (groups("web", [{"selector": {"pseudoattribute_type": "UNKNOWN"}, "predicate": EXISTS}]),
     "Offer constraints are not valid: A role web has an invalid 'AttributeConstraint': Unknown pseudoattribute type"),
    (groups("web", [{"selector": {"attribute_name": "a"}}]),
     "Offer constraints are not valid: A role web has an invalid 'AttributeConstraint': Unknown predicate type"),
    (groups("web", [{"selector": {"attribute_name": "a"}, "predicate": {"exists": {}, "not_exists": {}}}]),
     "Offer constraints are not valid: A role web has an invalid 'AttributeConstraint': Exactly one predicate "
     "must be set"),
    (groups("web", [{"selector": {"attribute_name": "a"}, "predicate": {"text_matches": {"regex": "("}}}]),
     "Offer constraints are not valid: A role web has an invalid 'AttributeConstraint': Failed to construct "
     "regex from pattern '(': missing ): ("),
]


@pytest.mark.parametrize(("raw", "why"), REFUSED)
def test_refused_with_mesos_reason(raw: dict[str, Any], why: str) -> None:
    with pytest.raises(ConstraintError) as e:
        offer_constraints(oc(raw), ["web"])
    assert str(e.value) == why


def test_offer_filters_become_minimum_alternatives_by_role() -> None:
    from master.offer_constraints import min_allocatable
    from protocol.mesos import FrameworkInfo

    def info(filters: dict[str, Any]) -> FrameworkInfo:
        return codec.from_builtins(FrameworkInfo, {"user": "u", "name": "n", "offer_filters": filters})

    got = min_allocatable(info({
        "web": {"min_allocatable_resources": {"quantities": [
            {"quantities": {"cpus": {"value": 2}, "mem": {"value": 64}}}, {"quantities": {"gpus": {"value": 1}}}]}},
        "batch": {"min_allocatable_resources": {}},  # no alternatives: any amount
        "other": {},  # nothing set: the master's minimum
    }).offer_filters)
    assert got == {"web": ({"cpus": 2.0, "mem": 64.0}, {"gpus": 1.0}), "batch": ()}
    with pytest.raises(ValueError, match=r"^Resource quantities must contain at least one quantity$"):
        min_allocatable(info({"web": {"min_allocatable_resources": {"quantities": [{}]}}}).offer_filters)
    with pytest.raises(ValueError, match=r"^Invalid resource quantity for 'cpus': Negative values not supported$"):
        min_allocatable(info({"web": {"min_allocatable_resources": {"quantities": [
            {"quantities": {"cpus": {"value": -1}}}]}}}).offer_filters)
