"""Allocator configuration (all times in seconds)."""

from __future__ import annotations

import attrs

from master.allocator.sorter import DRFSorter, SorterFactory
from master.allocator.victims import LowestPriorityLargestFirst, VictimPolicy

__pure__ = True


def _default_min_allocatable() -> tuple[dict[str, float], ...]:
    return ({"cpus": 0.01}, {"mem": 32.0})


@attrs.frozen
class AllocatorConfig:
    """Knobs of the allocator.

    - ``offer_id_prefix``: offer ids are ``f"{prefix}-O{n}"``.
    - ``default_refuse_seconds``: filter length for DECLINE/ACCEPT without filters (Mesos: 5 s).
    - ``offer_idle_timeout``: a lease's unused part returns to the pool after this long.
    - ``offer_timeout``: classic offers are rescinded after this long (None = never).
    - ``offer_hold_bound``: while another framework starves, an offer (or a lease's idle part)
      unused this long is taken back for it (``starvation.py``; None = never).
    - ``min_allocatable``: alternatives; an offer is made only if it holds at least all
      quantities of one of them (Mesos ``--min_allocatable_resources``, default cpus:0.01|mem:32).
    - ``fairness_excluded``: resource names ignored by DRF shares (e.g. gpus).
    - ``revocable_names``: scalar names that can be oversubscribed.
    - ``revocation_grace_seconds``: grace given to evicted revocable tasks.
    - ``sweep_interval``: a full pass over every agent at least this often (safety net).
    - ``batch_window``: how long the shell may coalesce events before calling ``allocate``.
    - ``role_sorter``, ``framework_sorter``: factories (given the shared ``sorter.Totals``) of
      the ``sorter.Sorter`` ordering a node's child roles, and a role's frameworks (and the
      revocable stage's frameworks); weighted DRF by default, as Mesos' ``--role_sorter`` /
      ``--framework_sorter``. ``sorter.AgeSorter`` serves first come, first served.
    - ``victims``: which revocable tasks are revoked when their backing shrinks
      (``victims.VictimPolicy``; lowest priority first, larger first by default).
    - ``fast_paths``: run the one-role DRF stage as its tight loop (``passes._regular_one_role``);
      False runs the general loop instead. Both decide exactly alike (the differential test
      ``tests/property/allocator/test_fast_path_differential.py``); only the speed differs.
    """

    offer_id_prefix: str = "agora"
    default_refuse_seconds: float = 5.0
    offer_idle_timeout: float = 30.0
    offer_timeout: float | None = None
    offer_hold_bound: float | None = 3.0
    min_allocatable: tuple[dict[str, float], ...] = attrs.field(factory=_default_min_allocatable)
    fairness_excluded: frozenset[str] = frozenset({"gpus"})
    revocable_names: tuple[str, ...] = ("cpus", "mem", "disk", "gpus")
    revocation_grace_seconds: float = 10.0
    sweep_interval: float = 60.0
    batch_window: float = 0.005
    idle_rescind_for_fairness: bool = True
    role_sorter: SorterFactory = DRFSorter
    framework_sorter: SorterFactory = DRFSorter
    victims: VictimPolicy = attrs.field(factory=LowestPriorityLargestFirst)
    fast_paths: bool = True
