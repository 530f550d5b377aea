"""The allocator's typed error for facts it cannot apply."""

from __future__ import annotations

__pure__ = True


class AllocatorError(ValueError):
    """An event the allocator cannot apply (unknown agent/framework where one is required,
    invalid role, weight or demand). The allocator state is unchanged."""
