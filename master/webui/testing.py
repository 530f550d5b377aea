"""Test helpers for pages of the web UI: read a page's tables back as text (pure)."""

from __future__ import annotations

from html.parser import HTMLParser

__pure__ = True


class Tables(HTMLParser):
    """Every ``<table>`` of a page as rows of cell texts (header row included)."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.tables:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def with_header(self, first: str) -> list[list[str]]:
        """The body rows of the table whose first header cell is ``first``."""
        (found,) = [t for t in self.tables if t and t[0] and t[0][0] == first]
        return found[1:]

    def tables_with_header(self, first: str) -> list[list[list[str]]]:
        """The body rows of every table whose first header cell is ``first``."""
        return [t[1:] for t in self.tables if t and t[0] and t[0][0] == first]
