"""DDL that moves a tablet's ``rows`` table from one schema to the next."""

from __future__ import annotations

import dataclasses
from typing import Any

from nyala.errors import InvalidArgument
from nyala.schema import Schema

from .sql import column_sql, duck_value, quote

__all__ = ["alter_statements"]


def alter_statements(table: str, old: Schema, new: Schema) -> list[tuple[str, list[Any]]]:
    """DDL turning ``old`` into ``new``: columns are matched by id, keys may not change."""
    if [(c.id, c.name, c.type) for c in old.key_columns] != [(c.id, c.name, c.type) for c in new.key_columns]:
        raise InvalidArgument("primary key columns cannot be altered")
    old_by_id = {c.id: c for c in old.columns}
    new_by_id = {c.id: c for c in new.columns}
    out: list[tuple[str, list[Any]]] = []
    for cid, col in old_by_id.items():
        if cid not in new_by_id:
            out.append((f"ALTER TABLE {table} DROP COLUMN {quote(col.name)}", []))
        elif (new_by_id[cid].type, new_by_id[cid].nullable) != (col.type, col.nullable):
            raise InvalidArgument(f"column {col.name!r}: changing the type or nullability is not supported")
    renamed = [
        (old_by_id[cid], col) for cid, col in new_by_id.items() if cid in old_by_id and old_by_id[cid].name != col.name
    ]
    # Two steps, so swapping two names never collides.
    for before, _ in renamed:
        out.append((f"ALTER TABLE {table} RENAME COLUMN {quote(before.name)} TO {quote(f'__rename_{before.id}')}", []))
    for before, after in renamed:
        out.append((f"ALTER TABLE {table} RENAME COLUMN {quote(f'__rename_{before.id}')} TO {quote(after.name)}", []))
    for cid, col in new_by_id.items():
        if cid not in old_by_id:
            if not col.nullable and col.default is None:
                raise InvalidArgument(f"new non-null column {col.name!r} needs a default")
            plain = dataclasses.replace(col, nullable=True)  # Nyala checks NOT NULL on write
            out.append((f"ALTER TABLE {table} ADD COLUMN {column_sql(plain)}", []))
            if col.default is not None:
                out.append((f"UPDATE {table} SET {quote(col.name)} = ?", [duck_value(col.default)]))
    return out
