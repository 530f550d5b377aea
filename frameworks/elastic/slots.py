"""Offers counted in worker slots, and the entries a revocable worker takes (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from frameworks.client.placement import pick
from frameworks.elastic import policy
from frameworks.elastic.effects import OfferSlot
from protocol.resources import Resources

__pure__ = True


def _fits(avail: Resources, shape: Resources) -> int:
    n: int | None = None
    for name, need in shape.scalars().items():
        if need <= 0:
            continue
        k = int(avail.scalar(name) // need)
        n = k if n is None else min(n, k)
    return max(0, n or 0)


def count_slots(offers: Iterable[OfferSlot], shape: Resources, role: str | None = None) -> policy.Capacity:
    """Worker slots of ``shape`` in the offers, regular and revocable (per offer, whole workers)."""
    reg = rev = 0
    for o in offers:
        avail = o.available.allocatable_to(role) if role not in (None, "*") else o.available
        regular = _fits(avail.non_revocable().flatten(), shape)
        reg += regular
        # a revocable worker may mix revocable entries with regular ones (revocable cpus, regular
        # mem): the slots revocable resources add on top of the regular ones
        rev += _fits(avail.flatten(), shape) - regular if avail.revocable() else 0
    return policy.Capacity(reg, rev)


def pick_revocable(avail: Resources, shape: Resources, role: str | None) -> Resources | None:
    """Entries for a worker on revocable resources: the whole shape from revocable entries if it
    fits, else as much as possible from revocable entries and the rest from regular ones (at least
    one revocable entry, or None)."""
    whole = pick(avail, shape, role, allow_revocable=True, only_revocable=True)
    if whole is not None:
        return whole
    rev = avail.revocable()
    if not rev:
        return None
    rev_part: dict[str, float] = {}
    reg_part: dict[str, float] = {}
    for name, need in shape.flatten().scalars().items():
        take = min(need, rev.scalar(name))
        if take > 0:
            rev_part[name] = take
        if need - take > 1e-9:
            reg_part[name] = need - take
    if not rev_part:
        return None
    chosen_rev = pick(avail, _flat(rev_part), role, allow_revocable=True, only_revocable=True)
    if chosen_rev is None:
        return None
    if not reg_part:
        return chosen_rev
    chosen_reg = pick(avail - chosen_rev, _flat(reg_part), role, allow_revocable=False)
    return None if chosen_reg is None else chosen_rev + chosen_reg


def _flat(amounts: Mapping[str, float]) -> Resources:
    return Resources.sum(Resources.scalar_entry(k, v) for k, v in sorted(amounts.items()))


def reference_shape(shapes: Iterable[Resources]) -> Resources:
    """The component-wise largest shape: a slot of it fits a worker of any of ``shapes``."""
    best: dict[str, float] = {}
    for s in shapes:
        for k, v in s.flatten().scalars().items():
            best[k] = max(best.get(k, 0.0), v)
    if not best:
        return Resources.of(cpus=1, mem=1)
    return Resources.sum(Resources.scalar_entry(k, v) for k, v in sorted(best.items()) if v > 0)
