"""Placement over cached offers: which offer, and exactly which resource entries, a task gets.

A task asks for a flat shape (``Resources.of(cpus=1, mem=256)``; roles/revocability of the shape
are ignored) plus attribute constraints. ``pick`` turns the shape into concrete entries of one
offer — reserved-to-our-role first, then unreserved, then (only when allowed) revocable — so the
TaskInfo names resources the master will accept. ``first_fit``/``best_fit`` choose the offer;
``place_all`` places several tasks tentatively (all or nothing when ``gang=True``), the way a
Volcano statement is committed whole or discarded.

Pure: no I/O.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs

from frameworks.client.offers import CachedOffer
from protocol.resources import ResourceKey, Resources

__pure__ = True


class PlacementError(ValueError):
    """A malformed constraint or shape."""


class Op(enum.Enum):
    EQ = "=="
    NE = "!="
    LIKE = "~="  # regular expression, full match
    UNLIKE = "!~"
    EXISTS = "exists"
    ABSENT = "absent"


@attrs.frozen
class Constraint:
    """An attribute constraint: ``rack==r1``, ``zone!=b``, ``host~=node-[12]``, ``gpu exists``."""

    attribute: str
    op: Op
    value: str | None = None

    def check(self, attributes: Mapping[str, str | float], hostname: str = "") -> bool:
        have: str | float | None = attributes.get(self.attribute)
        if have is None and self.attribute == "hostname":
            have = hostname
        if self.op is Op.EXISTS:
            return have is not None
        if self.op is Op.ABSENT:
            return have is None
        if have is None:
            return self.op in (Op.NE, Op.UNLIKE)
        text = attribute_text(have)
        want = self.value or ""
        if self.op is Op.EQ:
            return text == want or _num_eq(have, want)
        if self.op is Op.NE:
            return not (text == want or _num_eq(have, want))
        matched = re.fullmatch(want, text) is not None
        return matched if self.op is Op.LIKE else not matched

    @classmethod
    def parse(cls, text: str) -> Constraint:
        """``attr==v``, ``attr!=v``, ``attr~=regex``, ``attr!~regex``, ``attr exists``, ``attr absent``."""
        s = text.strip()
        for word, op in (("exists", Op.EXISTS), ("absent", Op.ABSENT)):
            if s.endswith(" " + word):
                name = s[: -len(word) - 1].strip()
                if name:
                    return cls(name, op)
        for token, op in (("==", Op.EQ), ("!=", Op.NE), ("~=", Op.LIKE), ("!~", Op.UNLIKE)):
            if token in s:
                name, _, value = s.partition(token)
                name = name.strip()
                if not name:
                    break
                if op in (Op.LIKE, Op.UNLIKE):
                    try:
                        re.compile(value.strip())
                    except re.error as exc:
                        raise PlacementError(f"bad regular expression in constraint {text!r}: {exc}") from exc
                return cls(name, op, value.strip())
        raise PlacementError(
            f"bad constraint {text!r}; expected attr==v, attr!=v, attr~=regex, attr!~regex, attr exists|absent"
        )


def attribute_text(v: object) -> str:
    """An attribute value as users write it: the scalar ``host_index:1`` is ``1``, not ``1.0``
    (``0.5`` stays ``0.5``); text as it is."""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _num_eq(have: str | float, want: str) -> bool:
    """Numbers compare as numbers: ``1``, ``1.0`` and ``1e0`` are the same scalar. A text
    attribute that reads as a number (batch offers carry their attributes as text) counts too."""
    try:
        return float(want) == float(have)
    except (TypeError, ValueError):
        return False


def attribute_equals(have: str | float | None, want: str) -> bool:
    """``attr==want`` for an agent attribute value (``None``: the agent has no such attribute)."""
    if have is None:
        return False
    return attribute_text(have) == want or _num_eq(have, want)


def satisfies(offer: CachedOffer, constraints: Iterable[Constraint]) -> bool:
    return all(c.check(offer.attributes, offer.hostname) for c in constraints)


# --- choosing entries -------------------------------------------------------------------------


def _entry_rank(key: ResourceKey, role: str | None) -> tuple[int, int]:
    """Lower is preferred: non-revocable before revocable; within, reserved to our role before
    unreserved (use what only we can use first)."""
    reserved_to_us = role is not None and key.role == role and bool(key.reservations)
    return (1 if key.revocable else 0, 0 if reserved_to_us else 1)


def pick(
    available: Resources,
    shape: Resources,
    role: str | None = None,
    allow_revocable: bool = False,
    only_revocable: bool = False,
) -> Resources | None:
    """Concrete entries of ``available`` that cover the flat ``shape``, or None if they don't fit.

    ``role``: entries reserved to another role are never used; entries reserved to ``role`` (or
    any entry when ``role`` is None) may be. Revocable entries are used only with
    ``allow_revocable`` (and exclusively with ``only_revocable``).
    """
    if role is not None:
        available = available.allocatable_to(role)
    if only_revocable:
        available = available.revocable()
    elif not allow_revocable:
        available = available.non_revocable()
    need = shape.flatten()
    out: list[Resources] = []
    entries = sorted(available.entries(), key=lambda kv: _entry_rank(kv[0], role))
    for key, value in need.entries():
        name = key.name
        if type(value) is int:
            remaining = value
            for k, have in entries:
                if k.name != name or type(have) is not int or remaining <= 0:
                    continue
                use = min(have, remaining)
                out.append(
                    Resources.scalar_entry(
                        name, use / 1000, reservations=k.reservations, revocable=k.revocable
                    )
                )
                remaining -= use
            if remaining > 0:
                return None
        else:
            # ranges/sets: one entry must contain the whole requested value
            for k, have in entries:
                if k.name != name or type(have) is int:
                    continue
                cand = _single_keyed(k, value)
                if _single_keyed(k, have).contains(cand):
                    out.append(cand)
                    break
            else:
                return None
    return Resources.sum(out)


def _single_keyed(key: ResourceKey, value: object) -> Resources:
    if isinstance(value, frozenset):
        return Resources.set_entry(key.name, value, reservations=key.reservations, revocable=key.revocable)
    if isinstance(value, tuple):
        return Resources.ranges_entry(key.name, value, reservations=key.reservations, revocable=key.revocable)
    assert isinstance(value, int)
    return Resources.scalar_entry(key.name, value / 1000, reservations=key.reservations, revocable=key.revocable)


def pick_ports(available: Resources, count: int, role: str | None = None) -> Resources | None:
    """``count`` ports (the lowest free ones) from one ports entry of ``available``."""
    if count <= 0:
        return Resources.empty()
    if role is not None:
        available = available.allocatable_to(role)
    for key, value in sorted(available.non_revocable().entries(), key=lambda kv: _entry_rank(kv[0], role)):
        if key.name != "ports" or not isinstance(value, tuple):
            continue
        chosen: list[tuple[int, int]] = []
        left = count
        for b, e in value:
            take = min(left, e - b + 1)
            chosen.append((b, b + take - 1))
            left -= take
            if left == 0:
                return Resources.ranges_entry(
                    "ports", chosen, reservations=key.reservations, revocable=key.revocable
                )
    return None


# --- choosing offers -----------------------------------------------------------------------------


@attrs.frozen
class Ask:
    """One task's request: a flat shape, constraints and whether revocable resources may be used."""

    shape: Resources
    constraints: tuple[Constraint, ...] = ()
    role: str | None = None
    allow_revocable: bool = False
    ports: int = 0


@attrs.frozen
class Placement:
    offer_id: str
    agent_id: str
    hostname: str
    resources: Resources

    @property
    def revocable(self) -> bool:
        return bool(self.resources.revocable())


def _candidates(
    offers: Iterable[CachedOffer], ask: Ask, free: Mapping[str, Resources]
) -> list[tuple[CachedOffer, Resources, bool]]:
    """(offer, chosen entries, uses revocable) for each offer the ask fits, non-revocable first."""
    out: list[tuple[CachedOffer, Resources, bool]] = []
    for o in offers:
        if not satisfies(o, ask.constraints):
            continue
        avail = free.get(o.offer_id, o.available)
        chosen = pick(avail, ask.shape, ask.role, allow_revocable=False)
        revocable = False
        if chosen is None and ask.allow_revocable:
            chosen = pick(avail, ask.shape, ask.role, allow_revocable=True)
            revocable = True
        if chosen is None:
            continue
        if ask.ports:
            ports = pick_ports(avail - chosen, ask.ports, ask.role)
            if ports is None:
                continue
            chosen = chosen + ports
        out.append((o, chosen, revocable))
    return out


def _leftover_score(avail: Resources, chosen: Resources) -> float:
    """How much would be left (smaller is a tighter fit); cpus dominate, then mem/1024."""
    left = avail - chosen
    return left.scalar("cpus") + left.scalar("gpus") * 8 + left.scalar("mem") / 1024.0


Strategy = Callable[[Sequence[CachedOffer], Ask, Mapping[str, Resources]], Placement | None]


def first_fit(
    offers: Sequence[CachedOffer], ask: Ask, free: Mapping[str, Resources] | None = None
) -> Placement | None:
    """The first offer (in the given order) the ask fits, non-revocable before revocable."""
    cands = _candidates(offers, ask, free or {})
    if not cands:
        return None
    cands.sort(key=lambda c: c[2])  # stable: keeps offer order within each class
    o, chosen, _ = cands[0]
    return Placement(o.offer_id, o.agent_id, o.hostname, chosen)


def best_fit(
    offers: Sequence[CachedOffer], ask: Ask, free: Mapping[str, Resources] | None = None
) -> Placement | None:
    """The offer leaving the least behind (packs tasks, keeps big offers whole for big asks)."""
    free = free or {}
    cands = _candidates(offers, ask, free)
    if not cands:
        return None
    o, chosen, _ = min(
        cands,
        key=lambda c: (c[2], _leftover_score(free.get(c[0].offer_id, c[0].available), c[1]), c[0].offer_id),
    )
    return Placement(o.offer_id, o.agent_id, o.hostname, chosen)


STRATEGIES: dict[str, Strategy] = {"first_fit": first_fit, "best_fit": best_fit}


def place_all(
    offers: Sequence[CachedOffer],
    asks: Sequence[Ask],
    strategy: Strategy = first_fit,
    gang: bool = False,
    spread: bool = False,
) -> list[Placement]:
    """Place ``asks`` in order against a tentative copy of the offers' free resources.

    Returns one placement per placed ask (in ask order). With ``gang=True`` it is all or nothing:
    an empty list unless every ask fits. With ``spread=True`` each ask prefers an agent not used
    yet by this call.
    """
    free: dict[str, Resources] = {o.offer_id: o.available for o in offers}
    used_agents: set[str] = set()
    out: list[Placement] = []
    for ask in asks:
        pool = list(offers)
        if spread:
            pool.sort(key=lambda o: o.agent_id in used_agents)
        p = strategy(pool, ask, free)
        if p is None:
            if gang:
                return []
            continue
        free[p.offer_id] = free[p.offer_id] - p.resources
        used_agents.add(p.agent_id)
        out.append(p)
    return out
