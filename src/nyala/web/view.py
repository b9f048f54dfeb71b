"""What a page says, independent of how it is shown: sections of fields, tables and text.

Each section has a ``name`` that is its key in the page's JSON form; tables become lists of
objects keyed by column name.  Cells are plain values, or a :class:`Link` (HTML shows an
anchor, JSON its text) or a :class:`Badge` (a state shown in colour, JSON its text).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

__all__ = ["Badge", "Cell", "Fields", "Link", "Page", "Section", "Table", "Text", "json_value", "paged"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Link:
    text: str
    href: str


@dataclass(frozen=True, slots=True)
class Badge:
    """A state: ``level`` picks its colour (good, warn, bad, or plain)."""

    text: str
    level: Literal["good", "warn", "bad", "plain"] = "plain"


Cell = str | int | float | bool | None | Link | Badge | list[str]


def json_value(cell: Cell) -> object:
    if isinstance(cell, Link | Badge):
        return cell.text
    return cell


@dataclass
class Fields:
    """Named values shown as a two-column table."""

    name: str
    items: dict[str, Cell]
    title: str = ""

    def to_json(self) -> dict[str, object]:
        return {self.name: {k: json_value(v) for k, v in self.items.items()}}


@dataclass
class Table:
    """Rows under named columns; ``total`` is the row count before paging (None: not paged)."""

    name: str
    columns: Sequence[str]
    rows: Sequence[Sequence[Cell]]
    title: str = ""
    total: int | None = None
    offset: int = 0
    limit: int = 0

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            self.name: [{c: json_value(v) for c, v in zip(self.columns, row, strict=True)} for row in self.rows]
        }
        if self.total is not None:
            out[f"{self.name}_page"] = {"offset": self.offset, "limit": self.limit, "total": self.total}
        return out


@dataclass
class Text:
    """Preformatted text (a log's tail)."""

    name: str
    text: str
    title: str = ""

    def to_json(self) -> dict[str, object]:
        return {self.name: self.text.splitlines()}


Section = Fields | Table | Text


@dataclass
class Page:
    """A title, sections, and the HTTP status to answer with (503 from an unready /healthz)."""

    title: str
    sections: list[Section] = field(default_factory=list)
    status: int = 200

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for section in self.sections:
            out.update(section.to_json())
        return out


def paged(
    name: str,
    columns: Sequence[str],
    items: Sequence[T],
    row: Callable[[T], Sequence[Cell]],
    offset: int,
    limit: int,
    title: str = "",
) -> Table:
    """One page of a long table: only the rows shown are built, whatever the item count."""
    rows = [row(item) for item in items[offset : offset + limit]]
    return Table(name, columns, rows, title, len(items), offset, limit)
