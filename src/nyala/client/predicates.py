"""Scan predicates as users write them, checked against a table's schema.

A predicate is a :class:`nyala.schema.Predicate` or a tuple in the style of pyarrow's
filters: ``("price", ">=", 10)``, ``("id", "in", [1, 2, 3])``, ``("note", "is null")``,
``("note", "is not null")``.  Several predicates are combined with AND.  Each is bound to the
schema (column exists, value has the column's type) before anything is sent, so a mistake
raises InvalidArgument at the call that made it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

from nyala.errors import InvalidArgument
from nyala.schema import Op, Predicate, Schema

__all__ = ["PredicateLike", "bind_predicates", "bind_projection", "predicate"]

PredicateLike: TypeAlias = Predicate | tuple[Any, ...]

_OPS = {op.value: op for op in Op} | {"==": Op.EQ, "<>": Op.NE}


def predicate(column: str, op: str, value: Any = None) -> Predicate:
    """One unbound predicate: ``predicate("price", ">=", 10)``, ``predicate("id", "in", [1, 2])``."""
    name = op.strip().lower()
    parsed = _OPS.get(name)
    if parsed is None:
        known = ", ".join(sorted(o.value for o in Op))
        raise InvalidArgument(f"unknown predicate operator {op!r}; known: {known}")
    if parsed is Op.IN:
        if isinstance(value, str | bytes) or not isinstance(value, Iterable):
            raise InvalidArgument(f"predicate {column} IN needs a list of values, got {value!r}")
        return Predicate.in_list(column, list(value))
    if parsed in (Op.IS_NULL, Op.IS_NOT_NULL):
        if value is not None:
            raise InvalidArgument(f"predicate {column} {parsed.value.upper()} takes no value")
        return Predicate(column, parsed)
    return Predicate.compare(column, parsed, value)


def bind_predicates(schema: Schema, predicates: Iterable[PredicateLike]) -> tuple[Predicate, ...]:
    """Check every predicate against ``schema``; return them canonical."""
    out = []
    for p in predicates:
        if isinstance(p, Predicate):
            out.append(p.bind(schema))
        elif isinstance(p, tuple) and len(p) in (2, 3) and isinstance(p[0], str) and isinstance(p[1], str):
            out.append(predicate(p[0], p[1], p[2] if len(p) == 3 else None).bind(schema))
        else:
            raise InvalidArgument(
                f"a predicate is a nyala.schema.Predicate or a (column, op[, value]) tuple, not {p!r}"
            )
    return tuple(out)


def bind_projection(schema: Schema, columns: Sequence[str] | None) -> tuple[str, ...] | None:
    """Check projected column names (None: every column)."""
    if columns is None:
        return None
    if isinstance(columns, str):
        columns = [columns]
    names = tuple(columns)
    for name in names:
        schema.index_of(name)  # InvalidArgument naming the unknown column
    if len(set(names)) != len(names):
        raise InvalidArgument(f"projected columns repeat a name: {list(names)}")
    return names
