"""The role tree: hierarchical weighted DRF over roles, then DRF among a role's frameworks.

A role path ``eng/ml`` is a node under ``eng``. Every node keeps the scalar allocation of its
whole subtree (allocated + offered, non-revocable), a sorter over its children plus ``"."`` (the
virtual leaf of the frameworks registered at the node itself, as in Mesos), a sorter over its
own frameworks, its weight and its quota (guarantee and limit, scalar quantities).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from master.allocator.errors import AllocatorError
from master.allocator.sorter import DRFSorter, Scalars, SorterFactory, Totals

__pure__ = True

SELF = "."


class RoleError(AllocatorError):
    """A role name that is not valid (empty component, ``.``/``..``, whitespace)."""


def check_role(role: str) -> str:
    if role == "*":
        return role
    if not role or role.startswith("/") or role.endswith("/"):
        raise RoleError(f"invalid role {role!r}")
    for part in role.split("/"):
        if part in ("", ".", "..", "*") or part.startswith("-") or any(c.isspace() for c in part):
            raise RoleError(f"invalid role {role!r}")
    return role


def ancestors(role: str) -> list[str]:
    """``eng/ml/x`` -> ``["eng", "eng/ml", "eng/ml/x"]`` (root first)."""
    if role == "*":
        return ["*"]
    parts = role.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


class RoleNode:
    __slots__ = (
        "alloc",
        "children",
        "fanout",
        "frameworks",
        "guarantee",
        "limit",
        "name",
        "nested",
        "parent",
        "short",
        "weight",
    )

    def __init__(
        self,
        name: str,
        short: str,
        parent: RoleNode | None,
        totals: Totals,
        role_sorter: SorterFactory = DRFSorter,
        framework_sorter: SorterFactory = DRFSorter,
    ) -> None:
        self.name = name
        self.short = short
        self.parent = parent
        self.weight = 1.0
        self.alloc: Scalars = {}
        self.children = role_sorter(totals)
        self.fanout = 0  # clients of ``children``
        if parent is not None:  # the root holds no frameworks of its own
            self.children.add(SELF)
            self.fanout = 1
        self.frameworks = framework_sorter(totals)
        self.guarantee: Scalars = {}
        self.limit: Scalars | None = None
        self.nested = False  # has child roles (then its "." entry counts its own frameworks)

    def deficit(self) -> Scalars:
        """What the guarantee still lacks (positive quantities only)."""
        out: Scalars = {}
        alloc = self.alloc
        for name, value in self.guarantee.items():
            missing = value - alloc.get(name, 0.0)
            if missing > 1e-9:
                out[name] = missing
        return out


class RoleTree:
    """The roles and their sorters: ``role_sorter`` orders the children of each node,
    ``framework_sorter`` the frameworks of a role (both DRF unless configured otherwise)."""

    def __init__(
        self, totals: Totals, role_sorter: SorterFactory = DRFSorter, framework_sorter: SorterFactory = DRFSorter
    ) -> None:
        self.totals = totals
        self.role_sorter = role_sorter
        self.framework_sorter = framework_sorter
        self.root = RoleNode("", "", None, totals, role_sorter, framework_sorter)
        self.nodes: dict[str, RoleNode] = {}
        self.quota_roles: set[str] = set()
        self.limited_roles: set[str] = set()

    def node(self, role: str) -> RoleNode:
        node = self.nodes.get(role)
        if node is not None:
            return node
        parent = self.root
        for path in ancestors(check_role(role)):
            existing = self.nodes.get(path)
            if existing is None:
                short = path.rsplit("/", 1)[-1]
                existing = RoleNode(path, short, parent, self.totals, self.role_sorter, self.framework_sorter)
                self.nodes[path] = existing
                if parent is not self.root and not parent.nested:
                    # first child role: the "." entry starts counting the node's own frameworks
                    parent.children.update(SELF, parent.alloc)
                    parent.nested = True
                parent.children.add(short, alloc=existing.alloc)  # shares the node's dict
                parent.fanout += 1
            parent = existing
        return parent

    def add_framework(self, role: str, framework_id: str) -> None:
        self.node(role).frameworks.add(framework_id)

    def remove_framework(self, role: str, framework_id: str) -> None:
        node = self.nodes.get(role)
        if node is not None:
            node.frameworks.remove(framework_id)

    def set_active(self, role: str, framework_id: str, active: bool) -> None:
        node = self.nodes.get(role)
        if node is None:
            return
        if active:
            node.frameworks.activate(framework_id)
        else:
            node.frameworks.deactivate(framework_id)

    def update(self, role: str, framework_id: str, scalars: Mapping[str, float], sign: float = 1.0) -> None:
        """Add/remove an allocation of a framework in a role, repositioning every sorter on the
        path from the role to the root."""
        if not scalars:
            return
        leaf = self.nodes.get(role) or self.node(role)
        # the framework's allocation and the role's (``leaf.alloc``)
        leaf.frameworks.update(framework_id, scalars, sign, leaf.alloc)
        if leaf.nested:  # with no child roles the "." entry is not kept up to date
            leaf.children.update(SELF, scalars, sign)
        self._propagate(leaf, scalars, sign)

    def grow(self, role: str, framework_id: str, quantities: Mapping[str, float]) -> None:
        """``update(role, framework_id, quantities, +1)`` for non-negative quantities (an offer
        made, a task started: the hot path)."""
        if not quantities:
            return
        leaf = self.nodes.get(role) or self.node(role)
        leaf.frameworks.grow(framework_id, quantities, leaf.alloc)  # and the role's, same loop
        if leaf.nested:
            leaf.children.update(SELF, quantities, 1.0)
        parent = leaf.parent
        if parent is not self.root or parent.fanout > 1:  # (a lone top-level role: nothing above)
            self._propagate(leaf, quantities, 1.0)

    def _propagate(self, leaf: RoleNode, scalars: Mapping[str, float], sign: float) -> None:
        """Reposition ``leaf`` in its parent's sorter and update every ancestor's allocation."""
        node = leaf
        root = self.root
        while True:
            parent = node.parent
            assert parent is not None  # only the root has none
            if parent.fanout > 1:  # (alone, the order does not change)
                # the parent's sorter shares ``node.alloc``: only the position may change
                parent.children.moved(node.short, scalars, sign)
            if parent is root:
                return
            node = parent
            alloc = node.alloc
            get = alloc.get
            for key, value in scalars.items():
                new = get(key, 0.0) + sign * value
                if new > 1e-9:
                    alloc[key] = new
                else:
                    alloc.pop(key, None)

    def set_weight(self, role: str, weight: float) -> None:
        node = self.node(role)
        node.weight = weight
        if node.parent is not None:
            node.parent.children.set_weight(node.short, weight)

    def set_quota(self, role: str, guarantee: Scalars, limit: Scalars | None) -> None:
        node = self.node(role)
        node.guarantee = dict(guarantee)
        node.limit = dict(limit) if limit is not None else None
        if guarantee:
            self.quota_roles.add(role)
        else:
            self.quota_roles.discard(role)
        if limit is not None:
            self.limited_roles.add(role)
        else:
            self.limited_roles.discard(role)

    def iter_frameworks(self, node: RoleNode | None = None) -> Iterator[tuple[str, str]]:
        """(role, framework_id) of active frameworks in hierarchical DRF order.

        Iterates the sorters' live lists: stop iterating after any allocation update (the
        order has changed) and start again."""
        node = node if node is not None else self.root
        for key in node.children.first_keys():
            short = key[2]
            if short == SELF:
                if node is not self.root:
                    role = node.name
                    for fkey in node.frameworks.first_keys():
                        yield role, fkey[2]
            else:
                child = self.nodes[short if node is self.root else f"{node.name}/{short}"]
                yield from self.iter_frameworks(child)

    def single_leaf(self) -> RoleNode | None:
        """The only role, when the tree is one role without sub-roles (the common case)."""
        if len(self.nodes) != 1:
            return None
        return next(iter(self.nodes.values()))

    def headroom_limit(self, role: str) -> Scalars | None:
        """The tightest remaining room under the limits of the role and its ancestors."""
        if not self.limited_roles:
            return None
        room: Scalars | None = None
        for path in ancestors(role):
            node = self.nodes.get(path)
            if node is None or node.limit is None:
                continue
            for name, value in node.limit.items():
                left = value - node.alloc.get(name, 0.0)
                if room is None:
                    room = {}
                if name not in room or left < room[name]:
                    room[name] = left
        return room

    def share(self, role: str) -> float:
        node = self.nodes.get(role)
        if node is None:
            return 0.0
        share = self.totals.share(node.alloc)
        return share / node.weight if node.weight > 0 else float("inf")

    def unmet_guarantees(self) -> Scalars:
        """What the quota guarantees still lack in the cluster, per resource name.

        A guarantee covers its role's whole subtree (as in Mesos: ``eng`` guaranteed 10 cpus
        with ``eng/ml`` guaranteed 4 needs 10, not 14): a role lacks the larger of its own
        deficit and the sum of what its nearest guaranteed sub-roles lack; unrelated roles add.
        """
        quota = self.quota_roles
        if not quota:
            return {}
        out: Scalars = {}
        below: dict[str, Scalars] = {}  # role -> what its nearest guaranteed sub-roles lack
        for role in sorted(quota, key=lambda r: (-r.count("/"), r)):  # deepest first
            need = self.nodes[role].deficit()
            for name, value in below.pop(role, {}).items():
                if value > need.get(name, 0.0):
                    need[name] = value
            if not need:
                continue
            into = out
            for path in reversed(ancestors(role)[:-1]):  # the nearest guaranteed ancestor
                if path in quota:
                    into = below.setdefault(path, {})
                    break
            for name, value in need.items():
                into[name] = into.get(name, 0.0) + value
        return out
