"""What the batch core declares to the master as its standing demand (pure): one entry per job
with placeable pending tasks (a gang's whole), and when a change is worth a new ``REQUEST``.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from frameworks.batch.planner import JobView
from frameworks.client.demand import Demand

__pure__ = True


def demands(views: Sequence[JobView]) -> tuple[tuple[str, Demand], ...]:
    out = []
    for v in views:
        if v.blocked is not None or not v.pending:
            continue
        gang = v.spec.gang > 0 and not v.gang_started
        demand = Demand(
            shape=v.spec.resources(),
            count=len(v.pending),
            gang_id=f"job-{v.job_id}" if gang else None,
            gang_min=min(v.spec.gang_size, len(v.pending)) if gang else None,
            revocable_ok=v.spec.preemptible,
            priority=v.spec.priority,
            role=v.spec.queue,
            # each unit with room for the most any of its tasks takes (a gang's rank 0: one more)
            ports=v.spec.ports_for(v.pending[0]),
        )
        out.append((f"job-{v.job_id}", demand))
    return tuple(out)


def worth_declaring(declared: Sequence[tuple[str, Demand]], demand: Sequence[tuple[str, Demand]]) -> bool:
    """Whether ``demand`` must replace the ``declared`` one at the master.

    Any change, except that an array's count going down is declared only once it has halved:
    the declared count never falls below what is pending and stays within twice of it, and a job
    array of N tasks makes O(log N) REQUEST calls instead of one per scheduling round. Gang
    demands are declared exactly (their ``gang_min`` follows the count).
    """
    if len(declared) != len(demand):
        return True
    for (old_key, old), (key, new) in zip(declared, demand, strict=True):
        if old_key != key:
            return True
        if old == new:
            continue
        if old.gang_id is not None or new.gang_id is not None:
            return True
        if attrs.evolve(old, count=new.count) != new:
            return True
        if new.count > old.count or 2 * new.count <= old.count:
            return True
    return False
