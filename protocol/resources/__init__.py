"""Resources: the immutable, exact resource algebra every Agora component shares.

Model
-----
A ``Resources`` value is a mapping from an *entry key* to a *quantity*:

- The key (:class:`ResourceKey`) is ``(name, reservations, revocable)``. ``reservations`` is the
  Mesos reservation stack (:class:`Reservation`: role, static/dynamic, principal, labels); the
  last element is the effective role, an empty stack means unreserved (role ``"*"``).
- The quantity depends on the kind of resource:
  scalars (``cpus``, ``mem``, ``disk``, ``gpus``, any custom name) are stored as **integer
  thousandths** (Mesos rounds scalars to 3 decimal places), so sums and differences are exact:
  ``Resources.of(cpus=0.1) * 3 == Resources.of(cpus=0.3)``;
  ranges (``ports``) are normalized tuples of inclusive ``(begin, end)`` pairs, sorted, merged
  and coalesced; sets (``zones:{a,b}``) are frozensets of strings.
- Only finite, non-negative quantities exist. Bad input (NaN, inf, negative, > 1e15, wrong type)
  raises :class:`ResourceError` naming the resource. Zero-valued entries vanish, so an empty
  ``Resources`` is falsy and equality is structural.

Arithmetic is per entry key: ``+`` adds scalars and unites ranges/sets; ``-`` **saturates**: it
subtracts what is there and never goes negative (ranges/sets subtract set-wise). ``a.contains(b)``
(``b <= a``) holds iff every entry of ``b`` fits in the entry of ``a`` with the same key, which is
exactly when ``(a - b) + b == a``. Reserved resources never satisfy an unreserved demand (and vice
versa): filter first with :meth:`Resources.allocatable_to`, :meth:`Resources.unreserved`, ...

Mesos interop: :meth:`Resources.from_mesos` / :meth:`Resources.to_mesos` convert the
``protocol.mesos_common.Resource`` list (both the ``reservations`` stack and the legacy ``role`` +
``reservation`` form are read); :meth:`Resources.parse` reads the Mesos resource string
(``cpus:4;mem:4096;ports:[31000-32000];cpus(ml):2;zones:{a,b}``) and ``str(r)`` writes one back
(dynamic reservations and revocable entries use Mesos' own stringification,
``cpus(reservations: [(DYNAMIC,eng,alice)]){REV}:2``). Persistent volumes, shared resources and
resource providers are not modelled and are refused with a ResourceError.

The representation is a plain dict from an interned key string (the key's Mesos string form, e.g.
``cpus(ml){REV}``) to the quantity, plus a flag telling whether every quantity is a scalar, so the
allocator's hot paths (``+``, ``-``, ``contains`` on scalar-only values) are a few dict operations.

The package is split by concern; import from ``protocol.resources`` (this module re-exports every
public name), not from its submodules: ``values`` (``ResourceError``, ``Reservation``,
``ResourceKey``, roles, scalar, range and set quantities), ``text`` (the Mesos resource
string), ``conversion`` (``Resource`` messages in), ``algebra`` (the ``Resources`` type) and
``attributes``.
"""

from __future__ import annotations

from protocol.resources.algebra import (
    Resources,
)
from protocol.resources.attributes import (
    attributes_from_mesos,
    attributes_to_mesos,
    parse_attributes,
)
from protocol.resources.values import (
    MAX_SCALAR,
    UNRESERVED_ROLE,
    RangesValue,
    Reservation,
    ResourceError,
    ResourceKey,
    Value,
    check_role,
    is_subrole,
    role_ancestors,
)

__pure__ = True

__all__ = [
    "MAX_SCALAR",
    "UNRESERVED_ROLE",
    "RangesValue",
    "Reservation",
    "ResourceError",
    "ResourceKey",
    "Resources",
    "Value",
    "attributes_from_mesos",
    "attributes_to_mesos",
    "check_role",
    "is_subrole",
    "parse_attributes",
    "role_ancestors",
]

