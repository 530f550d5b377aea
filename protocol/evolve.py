"""``evolve(inst, **changes)``: ``attrs.evolve`` compiled once per class and set of changed
fields.

``attrs.evolve`` walks the class's fields and builds a keyword dict on every call (~5 us for a
15-field ``TaskInfo``); the master does it per task launched (the agent id put into each
``TaskInfo``) and per status update it rewrites. Here a small function per (class, changed
names) passes the other fields straight through. The result is the same object ``attrs.evolve``
builds (same ``__init__``: validators and converters run as there); a name that is no init
argument of the class falls back to ``attrs.evolve`` (its error).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

__pure__ = True

__all__ = ["evolve"]

T = TypeVar("T")

_MAX = 1024  # compiled (class, names) pairs kept; the hot ones are a handful
_compiled: dict[tuple[type, tuple[str, ...]], Callable[[Any, dict[str, Any]], Any]] = {}


def evolve(inst: T, **changes: Any) -> T:
    """A copy of the attrs instance ``inst`` with ``changes`` applied (``attrs.evolve``)."""
    cls = inst.__class__
    key = (cls, tuple(changes))
    fn = _compiled.get(key)
    if fn is None:
        fn = _compile(cls, key[1])
        if len(_compiled) >= _MAX:
            _compiled.clear()
        _compiled[key] = fn
    out: T = fn(inst, changes)
    return out


def _fallback(inst: Any, changes: dict[str, Any]) -> Any:
    return attrs.evolve(inst, **changes)


def _compile(cls: type, names: tuple[str, ...]) -> Callable[[Any, dict[str, Any]], Any]:
    fields = attrs.fields(cls)
    aliases = {a.alias for a in fields if a.init}
    if not set(names) <= aliases:
        return _fallback
    args = []
    for a in fields:
        if not a.init:
            continue
        value = f"ch[{a.alias!r}]" if a.alias in names else f"o.{a.name}"
        args.append(f"{a.alias}={value}")
    ns: dict[str, Any] = {"CLS": cls}
    src = f"def evolve_{cls.__name__}(o, ch):\n    return CLS({', '.join(args)})\n"
    exec(compile(src, f"<evolve {cls.__qualname__} {','.join(names)}>", "exec"), ns)
    fn: Callable[[Any, dict[str, Any]], Any] = ns[f"evolve_{cls.__name__}"]
    return fn
