"""SQL text for DuckDB: quoted identifiers, column types, and predicates as parameterised SQL.

Values never enter SQL text: every value is a ``?`` parameter.  Timestamps are stored as
DuckDB ``TIMESTAMP`` holding UTC; Arrow data and parameters are made naive (UTC) on the way
in and given back their zone on the way out, so the session time zone never matters.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from nyala.schema import ColumnSchema, DataType, KeyRange, Op, Predicate, Schema

__all__ = ["column_sql", "duck_table", "duck_value", "quote", "where_clause"]

_DUCK_TYPES = {
    DataType.BOOL: "BOOLEAN",
    DataType.INT8: "TINYINT",
    DataType.INT16: "SMALLINT",
    DataType.INT32: "INTEGER",
    DataType.INT64: "BIGINT",
    DataType.FLOAT: "FLOAT",
    DataType.DOUBLE: "DOUBLE",
    DataType.STRING: "VARCHAR",
    DataType.BINARY: "BLOB",
    DataType.DATE: "DATE",
    DataType.TIMESTAMP: "TIMESTAMP",
}
_NAIVE_TS = pa.timestamp("us")


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def duck_type(column: ColumnSchema) -> str:
    t = column.type
    if t.type is DataType.DECIMAL:
        return f"DECIMAL({t.precision}, {t.scale})"
    return _DUCK_TYPES[t.type]


def column_sql(column: ColumnSchema) -> str:
    return f"{quote(column.name)} {duck_type(column)}{'' if column.nullable else ' NOT NULL'}"


def create_table_sql(table: str, schema: Schema) -> str:
    """The DDL of a tablet's rows table.

    No PRIMARY KEY constraint: keys are unique because the store checks them (the MemRowSet,
    the ``DiskKeys`` index and probes, and the planner's joins), and DuckDB's ART index behind
    the constraint doubled the cost of every flush (1.3-1.5 against 0.6-0.7 us of CPU per
    100-byte row, measured) and held every key in memory.
    """
    cols = ", ".join(column_sql(c) for c in schema.columns)
    return f"CREATE TABLE {table} ({cols})"


def duck_table(table: pa.Table) -> pa.Table:
    """``table`` with zoned timestamps made naive UTC, as DuckDB stores them."""
    for i, field in enumerate(table.schema):
        if pa.types.is_timestamp(field.type) and field.type.tz is not None:
            table = table.set_column(i, field.name, table.column(i).cast(_NAIVE_TS))
    return table


def duck_value(value: Any) -> Any:
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(datetime.UTC).replace(tzinfo=None)
    return value


def where_clause(predicates: Sequence[Predicate], key_range: KeyRange | None, schema: Schema) -> tuple[str, list[Any]]:
    """``WHERE ...`` (or "") and its parameters, for bound predicates and a bound key range."""
    terms: list[str] = []
    params: list[Any] = []
    for p in predicates:
        term, values = _predicate_sql(p)
        terms.append(term)
        params += values
    if key_range is not None:
        keys = schema.key_names
        if key_range.lower is not None:
            _bound_sql(keys, key_range.lower, ">" if not key_range.lower_inclusive else ">=", terms, params)
        if key_range.upper is not None:
            _bound_sql(keys, key_range.upper, "<", terms, params)
    if not terms:
        return "", []
    return " WHERE " + " AND ".join(terms), params


def _predicate_sql(p: Predicate) -> tuple[str, list[Any]]:
    col = quote(p.column)
    if p.op is Op.IS_NULL:
        return f"{col} IS NULL", []
    if p.op is Op.IS_NOT_NULL:
        return f"{col} IS NOT NULL", []
    if p.op is Op.IN:
        if not p.values:
            return "FALSE", []
        # One list parameter: thousands of keys cost one bind, not thousands.
        return f"{col} = ANY(?)", [[duck_value(v) for v in p.values]]
    op = "<>" if p.op is Op.NE else p.op.value
    return f"{col} {op} ?", [duck_value(p.value)]


def _bound_sql(keys: Sequence[str], bound: Sequence[Any], last_op: str, terms: list[str], params: list[Any]) -> None:
    """Lexicographic ``(k1, k2, ...) op bound`` spelled out so DuckDB can use zone maps."""
    first_op = last_op[0] + "=" if len(keys) > 1 else last_op
    terms.append(f"{quote(keys[0])} {first_op} ?")
    params.append(duck_value(bound[0]))
    if len(keys) == 1:
        return
    strict = last_op[0]
    alternatives = []
    for i in range(len(keys)):
        eqs = [f"{quote(k)} = ?" for k in keys[:i]]
        op = last_op if i == len(keys) - 1 else strict
        alternatives.append("(" + " AND ".join([*eqs, f"{quote(keys[i])} {op} ?"]) + ")")
        params.extend(duck_value(v) for v in bound[: i + 1])
    terms.append("(" + " OR ".join(alternatives) + ")")
