"""Offer constraints (pure): Mesos 1.11's ``FrameworkInfo``-level ``offer_constraints`` as the
allocator evaluates them.

A framework may give, per role, a list of *groups*, each a list of attribute constraints. An
agent is offered to the framework in that role only if it satisfies every constraint of at least
one group (an OR of ANDs); a role without constraints takes every agent. A constraint selects a
named agent attribute, or a pseudoattribute (``HOSTNAME``, ``REGION``, ``ZONE``; an agent without
a fault domain has no region or zone), and applies a predicate to it, as Mesos'
``OfferConstraintsFilter`` does:

==================  ============  ===================  ================================
predicate           missing       text value ``v``     non-text attribute (scalar, ranges, set)
==================  ============  ===================  ================================
exists              no            yes                  yes
not_exists          yes           no                   no
text_equals x       no            ``v == x``           yes
text_not_equals x   yes           ``v != x``           yes
text_matches r      no            ``r`` matches all    yes
text_not_matches r  yes           ``r`` does not       yes
==================  ============  ===================  ================================

Regular expressions are RE2 (``google-re2``), matched against the whole value, as Mesos does:
linear-time matching and RE2's syntax (no backreferences or lookaround), with the program size
limited (``MAX_PROGRAM_SIZE``) so that one framework cannot make every allocation pass slow.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs

__pure__ = True

# Mesos' master defaults: --offer_constraints_re2_max_mem 4KB, --offer_constraints_re2_max_program_size 100
MAX_MEM = 4096
MAX_PROGRAM_SIZE = 100

_re2: Any = None  # the ``re2`` module and its options, imported when a first pattern is compiled
_RE2_OPTIONS: Any = None


class ConstraintError(ValueError):
    """An offer constraint that cannot be evaluated (the call carrying it is refused)."""


class Pseudo(enum.Enum):
    HOSTNAME = "HOSTNAME"
    REGION = "REGION"
    ZONE = "ZONE"


class Predicate(enum.Enum):
    EXISTS = "exists"
    NOT_EXISTS = "not_exists"
    TEXT_EQUALS = "text_equals"
    TEXT_NOT_EQUALS = "text_not_equals"
    TEXT_MATCHES = "text_matches"
    TEXT_NOT_MATCHES = "text_not_matches"


# the answer for an agent that lacks the selected (pseudo)attribute
_MISSING = {
    Predicate.EXISTS: False,
    Predicate.NOT_EXISTS: True,
    Predicate.TEXT_EQUALS: False,
    Predicate.TEXT_NOT_EQUALS: True,
    Predicate.TEXT_MATCHES: False,
    Predicate.TEXT_NOT_MATCHES: True,
}


def compile_regex(pattern: str) -> Any:
    """The RE2 program for ``pattern`` or ``ConstraintError`` (Mesos' wording)."""
    global _re2, _RE2_OPTIONS
    if _re2 is None:
        import re2

        options = re2.Options()
        options.max_mem = MAX_MEM
        options.log_errors = False
        _re2, _RE2_OPTIONS = re2, options
    try:
        program = _re2.compile(pattern, _RE2_OPTIONS)
    except _re2.error as e:
        reason = e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
        raise ConstraintError(f"Failed to construct regex from pattern '{pattern}': {reason}") from None
    size = program.programsize
    if size > MAX_PROGRAM_SIZE:
        raise ConstraintError(
            f"Regex '{pattern}' is too complex: program size of {size} is larger than maximum of "
            f"{MAX_PROGRAM_SIZE} allowed"
        )
    return program


@attrs.frozen
class AttributeConstraint:
    """One constraint: ``attribute`` (a named attribute) or ``pseudo``, and the predicate with its
    ``text`` (the value for ``text_equals``/``text_not_equals``, the pattern for the matches)."""

    predicate: Predicate
    attribute: str | None = None
    pseudo: Pseudo | None = None
    text: str = ""
    _regex: Any = attrs.field(default=None, eq=False, repr=False, alias="_regex")

    @classmethod
    def make(cls, predicate: Predicate, *, attribute: str | None = None, pseudo: Pseudo | None = None,
             text: str = "") -> AttributeConstraint:
        """A checked constraint (``ConstraintError`` when it cannot be evaluated)."""
        if (attribute is None) == (pseudo is None):
            raise ConstraintError(
                "Exactly one of 'AttributeConstraint::Selector::name' or "
                "'AttributeConstraint::Selector::pseudoattribute_type' must be set")
        regex = None
        if predicate in (Predicate.TEXT_MATCHES, Predicate.TEXT_NOT_MATCHES):
            regex = compile_regex(text)
        return cls(predicate, attribute, pseudo, text, regex)

    def holds(self, hostname: str, attributes: Mapping[str, str | float]) -> bool:
        p = self.predicate
        if self.pseudo is not None:
            if self.pseudo is not Pseudo.HOSTNAME:
                return _MISSING[p]  # agents carry no fault domain here: no region, no zone
            value: str | float = hostname
        else:
            assert self.attribute is not None
            got = attributes.get(self.attribute)
            if got is None:
                return _MISSING[p]
            value = got
            if not _is_text(value):
                return p is not Predicate.NOT_EXISTS  # a non-text attribute passes the text tests
        assert isinstance(value, str)
        if p is Predicate.EXISTS:
            return True
        if p is Predicate.NOT_EXISTS:
            return False
        if p is Predicate.TEXT_EQUALS:
            return value == self.text
        if p is Predicate.TEXT_NOT_EQUALS:
            return value != self.text
        matched = self._regex.fullmatch(value) is not None
        return matched if p is Predicate.TEXT_MATCHES else not matched


def _is_text(value: str | float) -> bool:
    """Agent attributes are numbers (SCALAR), ``[a-b,...]`` (RANGES), ``{x,y}`` (SET) or text
    (``protocol.resources.attributes``)."""
    if not isinstance(value, str):
        return False
    return not ((value.startswith("[") and value.endswith("]")) or (value.startswith("{") and value.endswith("}")))


# a role's constraints: its groups; an agent must satisfy every constraint of one of them
RoleConstraints = tuple[tuple[AttributeConstraint, ...], ...]


def agent_matches(groups: RoleConstraints, hostname: str, attributes: Mapping[str, str | float]) -> bool:
    """Whether an agent satisfies at least one group (all of its constraints)."""
    return any(all(c.holds(hostname, attributes) for c in group) for group in groups)


def check_groups(role: str, groups: RoleConstraints) -> None:
    """Mesos refuses a role with no group and a group with no constraint."""
    if not groups:
        raise ConstraintError(f"'OfferConstraints::role_constraints' has an empty 'RoleConstraints::groups' for role {role}")
    for group in groups:
        if not group:
            raise ConstraintError(
                f"'OfferConstraints::RoleConstraints::groups' for role {role} contains an empty RoleConstraints::Group")
