"""Test helpers for pages of the web UI: read a page's tables back as text (pure)."""

from __future__ import annotations

from html.parser import HTMLParser

__pure__ = True


class Tables(HTMLParser):
    """Every ``<table>`` of a page as rows of cell texts (header row included), and the
    ``<dt>``/``<dd>`` pairs of its definition lists (``facts``)."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None
        self._facts: list[tuple[str, str]] = []
        self._term: list[str] | None = None
        self._value: list[str] | None = None
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "dt":
            self._term = []
        elif tag == "dd":
            self._value = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.tables:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "dt" and self._term is not None:
            self._facts.append(("".join(self._term).strip(), ""))
            self._term = None
        elif tag == "dd" and self._value is not None and self._facts:
            self._facts[-1] = (self._facts[-1][0], "".join(self._value).strip())
            self._value = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._term is not None:
            self._term.append(data)
        if self._value is not None:
            self._value.append(data)

    def facts(self) -> list[tuple[str, str]]:
        """Every definition list's (term, text) pairs, in page order."""
        return list(self._facts)

    def with_header(self, first: str) -> list[list[str]]:
        """The body rows of the table whose first header cell is ``first``."""
        (found,) = [t for t in self.tables if t and t[0] and t[0][0] == first]
        return found[1:]

    def tables_with_header(self, first: str) -> list[list[list[str]]]:
        """The body rows of every table whose first header cell is ``first``."""
        return [t[1:] for t in self.tables if t and t[0] and t[0][0] == first]
