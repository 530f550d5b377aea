"""HTML primitives shared by the master's web UI (``master/webui/html.py``) and the framework
services' pages (``frameworks/client/webui.py``), pure: every value is escaped unless it is already
``Html`` (markup built here or from safe parts), and URLs are built with ``quote``/``urlencode``
and then escaped as attribute values.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from urllib.parse import quote, urlencode

__pure__ = True


class Html(str):
    """Markup that is already safe (escaped or built from safe parts)."""

    __slots__ = ()


def esc(value: object) -> Html:
    if isinstance(value, Html):
        return value
    return Html(html.escape("" if value is None else str(value), quote=True))


def join(parts: Iterable[object], sep: str = "") -> Html:
    return Html(sep.join(esc(p) for p in parts))


def tag(name: str, *children: object, **attrs: object) -> Html:
    """``<name attrs>children</name>``; attribute ``cls`` is written ``class``, a ``None`` or
    ``False`` attribute is left out, ``True`` is written bare."""
    out = [f"<{name}"]
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        attr = "class" if key == "cls" else key.rstrip("_").replace("_", "-")
        out.append(f" {attr}" if value is True else f' {attr}="{esc(value)}"')
    out.append(">")
    out.extend(esc(c) for c in children)
    out.append(f"</{name}>")
    return Html("".join(out))


def path(*segments: str, query: Mapping[str, object] | None = None) -> str:
    """A site-relative URL from raw segments (each percent-encoded, ``/`` included) and a query."""
    url = "/" + "/".join(quote(s, safe="") for s in segments)
    q = {k: str(v) for k, v in (query or {}).items() if v is not None and v != ""}
    return url + ("?" + urlencode(q) if q else "")


def link(href: str, text: object) -> Html:
    return tag("a", text, href=href)
