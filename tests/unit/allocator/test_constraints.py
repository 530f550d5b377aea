"""master/allocator/constraints.py: each predicate on a text value, a missing attribute and a
non-text attribute (Mesos' OfferConstraintsFilter table), pseudoattributes, groups, and the
regular expressions RE2 refuses."""

from __future__ import annotations

import pytest

from master.allocator.constraints import (
    MAX_PROGRAM_SIZE,
    AttributeConstraint,
    ConstraintError,
    Predicate,
    Pseudo,
    agent_matches,
    check_groups,
    compile_regex,
)

P = Predicate
ATTRS: dict[str, str | float] = {"rack": "r1", "slots": 4.0, "ports": "[1-3]", "disks": "{a,b}"}
HOST = "node-7.example.com"

# predicate, its text -> (on "r1", on a missing attribute, on each non-text attribute)
TABLE = [
    (P.EXISTS, "", (True, False, True)),
    (P.NOT_EXISTS, "", (False, True, False)),
    (P.TEXT_EQUALS, "r1", (True, False, True)),
    (P.TEXT_EQUALS, "r2", (False, False, True)),
    (P.TEXT_NOT_EQUALS, "r1", (False, True, True)),
    (P.TEXT_NOT_EQUALS, "r2", (True, True, True)),
    (P.TEXT_MATCHES, "r[0-9]", (True, False, True)),
    (P.TEXT_MATCHES, "r", (False, False, True)),  # the whole value must match
    (P.TEXT_NOT_MATCHES, "r[0-9]", (False, True, True)),
    (P.TEXT_NOT_MATCHES, "x.*", (True, True, True)),
]


@pytest.mark.parametrize(("predicate", "text", "want"), TABLE)
def test_predicates_on_text_missing_and_non_text_attributes(predicate: Predicate, text: str,
                                                           want: tuple[bool, bool, bool]) -> None:
    def holds(name: str) -> bool:
        return AttributeConstraint.make(predicate, attribute=name, text=text).holds(HOST, ATTRS)

    on_text, on_missing, on_other = want
    assert holds("rack") is on_text
    assert holds("zone") is on_missing
    assert [holds(n) for n in ("slots", "ports", "disks")] == [on_other] * 3


def test_pseudoattributes() -> None:
    def holds(pseudo: Pseudo, predicate: Predicate, text: str = "") -> bool:
        return AttributeConstraint.make(predicate, pseudo=pseudo, text=text).holds(HOST, ATTRS)

    assert holds(Pseudo.HOSTNAME, P.TEXT_MATCHES, r"node-[0-9]+\.example\.com")
    assert not holds(Pseudo.HOSTNAME, P.TEXT_EQUALS, "node-7")
    assert holds(Pseudo.HOSTNAME, P.EXISTS)
    # agents carry no fault domain: region and zone are missing
    assert [holds(p, P.EXISTS) for p in (Pseudo.REGION, Pseudo.ZONE)] == [False, False]
    assert [holds(p, P.TEXT_NOT_EQUALS, "eu") for p in (Pseudo.REGION, Pseudo.ZONE)] == [True, True]


def test_an_agent_matches_when_it_satisfies_every_constraint_of_one_group() -> None:
    r1 = AttributeConstraint.make(P.TEXT_EQUALS, attribute="rack", text="r1")
    r2 = AttributeConstraint.make(P.TEXT_EQUALS, attribute="rack", text="r2")
    gpu = AttributeConstraint.make(P.EXISTS, attribute="gpu")
    assert agent_matches(((r1,),), HOST, ATTRS)
    assert not agent_matches(((r1, gpu),), HOST, ATTRS)
    assert agent_matches(((r1, gpu), (r2,), (r1,)), HOST, ATTRS)
    assert not agent_matches(((r2,), (gpu,)), HOST, ATTRS)


def test_a_selector_names_exactly_one_thing() -> None:
    for attribute, pseudo in ((None, None), ("rack", Pseudo.ZONE)):
        with pytest.raises(ConstraintError, match=r"^Exactly one of 'AttributeConstraint::Selector::name' or "):
            AttributeConstraint.make(P.EXISTS, attribute=attribute, pseudo=pseudo)


def test_regular_expressions_are_re2_with_mesos_limits() -> None:
    with pytest.raises(ConstraintError) as e:
        compile_regex("r(1")
    assert str(e.value) == "Failed to construct regex from pattern 'r(1': missing ): r(1"
    with pytest.raises(ConstraintError) as e:
        compile_regex(r"(a)\1")  # no backreferences in RE2
    assert str(e.value) == "Failed to construct regex from pattern '(a)\\1': invalid escape sequence: \\1"
    with pytest.raises(ConstraintError) as e:
        compile_regex("[a-z]{1,60}")
    assert str(e.value) == (f"Regex '[a-z]{{1,60}}' is too complex: program size of 123 is larger than maximum of "
                            f"{MAX_PROGRAM_SIZE} allowed")
    # linear time: a pattern that backtracking engines take exponential time on
    bad = AttributeConstraint.make(P.TEXT_MATCHES, attribute="x", text="(a+)+b")
    assert not bad.holds(HOST, {"x": "a" * 5000})


def test_empty_groups_are_refused() -> None:
    with pytest.raises(ConstraintError) as e:
        check_groups("web", ())
    assert str(e.value) == "'OfferConstraints::role_constraints' has an empty 'RoleConstraints::groups' for role web"
    with pytest.raises(ConstraintError) as e:
        check_groups("web", ((AttributeConstraint.make(P.EXISTS, attribute="a"),), ()))
    assert str(e.value) == ("'OfferConstraints::RoleConstraints::groups' for role web contains an empty "
                            "RoleConstraints::Group")
