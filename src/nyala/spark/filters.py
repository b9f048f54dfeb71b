"""Spark's pushed filters to Nyala predicates.

Spark hands ``pushFilters`` the conjuncts of a query's WHERE clause that compare a plain
column with literals.  The ones Nyala evaluates exactly become predicates (kudu-spark's set
plus two free ones): ``=``, ``<``, ``<=``, ``>``, ``>=``, ``IN``, ``IS NULL``, ``IS NOT NULL``,
``<=>`` with a value, and ``LIKE 'prefix%'`` (StringStartsWith) as ``>= prefix AND <
next(prefix)``.  A filter is pushed only if its predicate binds to the table's schema (the
literal fits the column's type); everything else — ``NOT``, ``<>``, suffix and infix LIKE,
nested columns, a NULL inside IN, literals of another type — is handed back for Spark to
evaluate, so pushing never changes a result.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    StringStartsWith,
)

from nyala.errors import InvalidArgument
from nyala.schema import Op, Predicate, Schema

__all__ = ["next_prefix", "to_predicates"]

_COMPARISONS: dict[type[Filter], Op] = {
    EqualTo: Op.EQ,
    EqualNullSafe: Op.EQ,
    GreaterThan: Op.GT,
    GreaterThanOrEqual: Op.GE,
    LessThan: Op.LT,
    LessThanOrEqual: Op.LE,
}

_MAX_CODE_POINT = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)


def to_predicates(spark_filter: Filter, schema: Schema) -> list[Predicate] | None:
    """The bound predicates equivalent to ``spark_filter``, or None when it cannot be pushed."""
    attribute: tuple[str, ...] = tuple(getattr(spark_filter, "attribute", ()))
    if len(attribute) != 1:
        return None  # a nested field
    column = attribute[0]
    try:
        return [p.bind(schema) for p in _unbound(spark_filter, column)]
    except InvalidArgument:
        return None  # unknown column, or a literal that does not fit the column: Spark filters


def _unbound(spark_filter: Filter, column: str) -> list[Predicate]:
    kind = type(spark_filter)
    if kind in _COMPARISONS:
        value = getattr(spark_filter, "value", None)
        if value is None:
            raise InvalidArgument("comparison with NULL")  # `x <=> NULL` arrives as IsNull instead
        return [Predicate.compare(column, _COMPARISONS[kind], value)]
    if isinstance(spark_filter, In):
        values = list(spark_filter.value)
        if any(v is None for v in values):
            raise InvalidArgument("NULL in an IN list")
        return [Predicate.in_list(column, values)]
    if isinstance(spark_filter, IsNull):
        return [Predicate.is_null(column)]
    if isinstance(spark_filter, IsNotNull):
        return [Predicate.is_not_null(column)]
    if isinstance(spark_filter, StringStartsWith):
        prefix = spark_filter.value
        if not isinstance(prefix, str):
            raise InvalidArgument("a prefix that is not a string")
        lower = [Predicate.compare(column, Op.GE, prefix)]
        upper = next_prefix(prefix)
        return lower if upper is None else [*lower, Predicate.compare(column, Op.LT, upper)]
    raise InvalidArgument(f"{kind.__name__} is not pushed")


def next_prefix(prefix: str) -> str | None:
    """The smallest string greater than every string starting with ``prefix`` (None: no such string).

    Strings compare by code point (UTF-8 byte order), so it is the prefix with its last
    character incremented, dropping trailing characters that cannot be incremented.
    """
    chars = list(prefix)
    while chars:
        code = ord(chars[-1]) + 1
        if code in _SURROGATES:
            code = _SURROGATES.stop  # not encodable in UTF-8; the next valid code point
        if code <= _MAX_CODE_POINT:
            chars[-1] = chr(code)
            return "".join(chars)
        chars.pop()
    return None


def push(filters: Sequence[Filter], schema: Schema) -> tuple[list[Predicate], list[Filter]]:
    """Split ``filters`` into the predicates Nyala applies and the filters Spark must still apply."""
    pushed: list[Predicate] = []
    rejected: list[Filter] = []
    for spark_filter in filters:
        predicates = to_predicates(spark_filter, schema)
        if predicates is None:
            rejected.append(spark_filter)
        else:
            pushed.extend(predicates)
    return pushed, rejected
