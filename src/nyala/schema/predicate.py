"""Scan predicates and primary-key ranges.

A predicate names one column: a comparison with a value, an IN list, IS NULL or IS NOT NULL.
Predicates are combined with AND.  :meth:`Predicate.bind` checks one against a schema and
puts its values in canonical form; only bound predicates are evaluated, pushed into storage
or used for partition pruning.  Comparisons follow SQL: a NULL cell matches nothing but
IS NULL.  The serialised form is a JSON-safe dict, decoded against the table schema.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from nyala.errors import InvalidArgument

from .schema import Schema
from .types import ColumnType, DataType

__all__ = ["KeyRange", "Op", "Predicate"]


class Op(enum.StrEnum):
    EQ = "="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    IN = "in"
    IS_NULL = "is null"
    IS_NOT_NULL = "is not null"


COMPARISONS = frozenset({Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE})
MAX_IN_LIST = 100_000


@dataclasses.dataclass(frozen=True, slots=True)
class Predicate:
    """``column op value``, ``column IN values``, ``column IS [NOT] NULL``."""

    column: str
    op: Op
    value: Any = None
    values: tuple[Any, ...] = ()

    @classmethod
    def compare(cls, column: str, op: str | Op, value: Any) -> Predicate:
        op = Op(op)
        if op not in COMPARISONS:
            raise InvalidArgument(f"{op!r} is not a comparison operator")
        return cls(column, op, value)

    @classmethod
    def in_list(cls, column: str, values: Sequence[Any]) -> Predicate:
        return cls(column, Op.IN, values=tuple(values))

    @classmethod
    def is_null(cls, column: str) -> Predicate:
        return cls(column, Op.IS_NULL)

    @classmethod
    def is_not_null(cls, column: str) -> Predicate:
        return cls(column, Op.IS_NOT_NULL)

    def __str__(self) -> str:
        if self.op is Op.IN:
            return f"{self.column} IN {list(self.values)!r}"
        if self.op in (Op.IS_NULL, Op.IS_NOT_NULL):
            return f"{self.column} {self.op.value.upper()}"
        return f"{self.column} {self.op.value} {self.value!r}"

    def bind(self, schema: Schema) -> Predicate:
        """Check the column and values against ``schema``; return a canonical predicate."""
        col = schema.column(self.column)
        what = f"predicate on column {col.name!r}"
        if self.op in COMPARISONS:
            if self.value is None:
                raise InvalidArgument(f"{what}: comparing with NULL matches nothing; use IS NULL")
            if col.type.type is DataType.BOOL and self.op not in (Op.EQ, Op.NE):
                raise InvalidArgument(f"{what}: booleans support only = and !=")
            return Predicate(col.name, self.op, col.type.check(self.value, what))
        if self.op is Op.IN:
            if len(self.values) > MAX_IN_LIST:
                raise InvalidArgument(f"{what}: IN list has {len(self.values)} values, more than {MAX_IN_LIST}")
            if any(v is None for v in self.values):
                raise InvalidArgument(f"{what}: IN lists may not contain NULL")
            return Predicate(col.name, Op.IN, values=_checked_set(col.type, self.values, what))
        if self.value is not None or self.values:
            raise InvalidArgument(f"{what}: {self.op.value.upper()} takes no value")
        return Predicate(col.name, self.op)

    def matches(self, cell: Any) -> bool:
        """Evaluate on one canonical cell value (None is NULL)."""
        if self.op is Op.IS_NULL:
            return cell is None
        if cell is None:
            return False
        if self.op is Op.IS_NOT_NULL:
            return True
        if self.op is Op.IN:
            return cell in self.values
        if isinstance(cell, float) and math.isnan(cell):
            # DuckDB orders NaN above every number and equal to itself; follow it.
            return _nan_compare(self.op, self.value)
        if isinstance(self.value, float) and math.isnan(self.value):
            return self.op in (Op.NE, Op.LT, Op.LE)
        return bool(_COMPARE[self.op](cell, self.value))

    def to_dict(self, schema: Schema) -> dict[str, Any]:
        t = schema.column(self.column).type
        d: dict[str, Any] = {"column": self.column, "op": self.op.value}
        if self.op in COMPARISONS:
            d["value"] = t.to_json(self.value)
        elif self.op is Op.IN:
            d["values"] = [t.to_json(v) for v in self.values]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], schema: Schema) -> Predicate:
        try:
            column, op = str(d["column"]), Op(d["op"])
        except (KeyError, ValueError) as e:
            raise InvalidArgument(f"malformed predicate {dict(d)!r}: {e}") from None
        t = schema.column(column).type
        what = f"predicate on column {column!r}"
        value = t.from_json(d.get("value"), what)
        values = tuple(t.from_json(v, what) for v in d.get("values", ()))
        return cls(column, op, value, values).bind(schema)


def _checked_set(t: ColumnType, values: tuple[Any, ...], what: str) -> tuple[Any, ...]:
    """The distinct values, checked and sorted; in Arrow for large lists of simple types."""
    if len(values) > 64 and (t.is_integer or t.type in (DataType.STRING, DataType.BINARY)):
        if t.is_integer and any(type(v) is not int for v in values):
            raise InvalidArgument(f"{what}: IN list values must be ints")
        try:
            array = pa.array(values, t.to_arrow())  # range- and type-checks in C
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, UnicodeEncodeError) as e:
            raise InvalidArgument(f"{what}: IN list has a value that is not a valid {t}: {e}") from None
        return tuple(pc.unique(array).sort().to_pylist())
    return tuple(sorted({t.check(v, what) for v in values}))


def _nan_compare(op: Op, value: Any) -> bool:
    value_is_nan = isinstance(value, float) and math.isnan(value)
    if value_is_nan:
        return op in (Op.EQ, Op.LE, Op.GE)
    return op in (Op.NE, Op.GT, Op.GE)


_COMPARE = {
    Op.EQ: lambda a, b: a == b,
    Op.NE: lambda a, b: a != b,
    Op.LT: lambda a, b: a < b,
    Op.LE: lambda a, b: a <= b,
    Op.GT: lambda a, b: a > b,
    Op.GE: lambda a, b: a >= b,
}


@dataclasses.dataclass(frozen=True, slots=True)
class KeyRange:
    """Primary-key bounds: ``lower`` inclusive, ``upper`` exclusive; ``None`` is unbounded.

    Each bound is a full primary key (one value per key column).  ``lower_inclusive=False``
    resumes a scan just after the last key seen.
    """

    lower: tuple[Any, ...] | None = None
    upper: tuple[Any, ...] | None = None
    lower_inclusive: bool = True

    def bind(self, schema: Schema) -> KeyRange:
        lower = None if self.lower is None else schema.check_key(self.lower, "key range lower bound")
        upper = None if self.upper is None else schema.check_key(self.upper, "key range upper bound")
        return KeyRange(lower, upper, self.lower_inclusive)

    def contains(self, key: tuple[Any, ...]) -> bool:
        if self.lower is not None and (key < self.lower or (key == self.lower and not self.lower_inclusive)):
            return False
        return self.upper is None or key < self.upper

    def to_dict(self, schema: Schema) -> dict[str, Any]:
        types = [c.type for c in schema.key_columns]
        return {
            "lower": None if self.lower is None else [t.to_json(v) for t, v in zip(types, self.lower, strict=True)],
            "upper": None if self.upper is None else [t.to_json(v) for t, v in zip(types, self.upper, strict=True)],
            "lower_inclusive": self.lower_inclusive,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], schema: Schema) -> KeyRange:
        cols = schema.key_columns

        def read(values: Any, what: str) -> tuple[Any, ...] | None:
            if values is None:
                return None
            if not isinstance(values, list) or len(values) != len(cols):
                raise InvalidArgument(f"{what} must list {len(cols)} key values, got {values!r}")
            return tuple(c.type.from_json(v, f"{what}, column {c.name!r}") for c, v in zip(cols, values, strict=True))

        lower = read(d.get("lower"), "key range lower bound")
        upper = read(d.get("upper"), "key range upper bound")
        return cls(lower, upper, bool(d.get("lower_inclusive", True))).bind(schema)
