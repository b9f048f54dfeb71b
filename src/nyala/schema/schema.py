"""Table schemas: typed columns with a primary key of leading non-null columns.

Every column has a stable integer id, assigned when the schema is first built and kept
across renames; a schema change is described by the old and new schema and compared by id
(as Kudu does), so "rename b to c" and "drop b, add c" stay distinguishable.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from nyala.errors import InvalidArgument

from .types import KEY_TYPES, ColumnType

__all__ = ["MAX_COLUMNS", "MAX_IDENTIFIER_LENGTH", "ColumnSchema", "Schema"]

MAX_COLUMNS = 300  # Kudu's --max_num_columns
# Column subsets whose Arrow schema a Schema remembers (writes that set different columns).
_ARROW_SCHEMAS_KEPT = 64
MAX_IDENTIFIER_LENGTH = 256  # Kudu's --max_identifier_length, in bytes
RESERVED_PREFIX = "__"  # row-operation batches use "__op"


@dataclasses.dataclass(frozen=True, slots=True)
class ColumnSchema:
    """One column: a name, a type, nullability and an optional default (``None``: no default)."""

    name: str
    type: ColumnType
    nullable: bool = True
    default: Any = None
    comment: str = ""
    id: int = -1  # -1 until the schema assigns one

    @classmethod
    def of(
        cls,
        name: str,
        type: str | ColumnType,
        *,
        nullable: bool = True,
        default: Any = None,
        comment: str = "",
    ) -> ColumnSchema:
        """Build a column from a type name such as ``"int64"`` or ``"decimal(10, 2)"``."""
        column_type = ColumnType.parse(type) if isinstance(type, str) else type
        return cls(name, column_type, nullable, default, comment)

    @property
    def arrow_type(self) -> pa.DataType:
        return self.type.to_arrow()

    def validated(self) -> ColumnSchema:
        """Check name and default; return the column with its default in canonical form."""
        _check_identifier(self.name)
        default = self.default
        if default is not None:
            default = self.type.check(default, f"default of column {self.name!r}")
        return dataclasses.replace(self, default=default)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "type": str(self.type),
            "nullable": self.nullable,
            "default": self.type.to_json(self.default),
            "comment": self.comment,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ColumnSchema:
        try:
            name = str(d["name"])
            column_type = ColumnType.parse(str(d["type"]))
            default = column_type.from_json(d.get("default"), f"default of column {name!r}")
            return cls(name, column_type, bool(d["nullable"]), default, str(d.get("comment", "")), int(d["id"]))
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidArgument(f"malformed column description {dict(d)!r}: {e}") from None


def _check_identifier(name: object) -> None:
    if not isinstance(name, str) or not name:
        raise InvalidArgument(f"column names must be non-empty strings, got {name!r}")
    if "\x00" in name:
        raise InvalidArgument(f"column name {name!r} contains a NUL character")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_IDENTIFIER_LENGTH:
        raise InvalidArgument(f"column name {name[:40]!r}... is longer than {MAX_IDENTIFIER_LENGTH} bytes")
    if name.startswith(RESERVED_PREFIX):
        raise InvalidArgument(f"column name {name!r}: names starting with {RESERVED_PREFIX!r} are reserved")


class Schema:
    """An immutable, validated list of columns whose first ``key_column_count`` form the primary key."""

    __slots__ = ("_arrow_schemas", "_by_name", "columns", "key_column_count", "next_column_id")

    def __init__(
        self, columns: Iterable[ColumnSchema], key_column_count: int, next_column_id: int | None = None
    ) -> None:
        """``next_column_id`` is the id the next added column gets (Kudu's next_column_id): it only
        grows, so an id is never reused, even after the column with the highest id is dropped;
        default: one past the highest id."""
        cols = [c.validated() for c in columns]
        if not cols:
            raise InvalidArgument("a schema needs at least one column")
        if len(cols) > MAX_COLUMNS:
            raise InvalidArgument(f"a schema may have at most {MAX_COLUMNS} columns, got {len(cols)}")
        if not 1 <= key_column_count <= len(cols):
            raise InvalidArgument("a schema needs a primary key of at least one column")
        _check_unique_names(cols)
        for col in cols[:key_column_count]:
            if col.nullable:
                raise InvalidArgument(f"primary key column {col.name!r} must not be nullable")
            if col.type.type not in KEY_TYPES:
                raise InvalidArgument(f"primary key column {col.name!r} cannot be of type {col.type}")
        self.columns: tuple[ColumnSchema, ...] = _assign_ids(cols)
        self.key_column_count = key_column_count
        highest = max(c.id for c in self.columns)
        if next_column_id is None:
            next_column_id = highest + 1
        elif next_column_id <= highest:
            raise InvalidArgument(f"next_column_id {next_column_id} must exceed the highest column id {highest}")
        self.next_column_id = next_column_id
        self._by_name = {c.name: i for i, c in enumerate(self.columns)}
        self._arrow_schemas: dict[tuple[str, ...], pa.Schema] = {}

    @classmethod
    def of(cls, columns: Sequence[ColumnSchema], primary_key: Sequence[str]) -> Schema:
        """Build a schema whose primary key is ``primary_key``: they must be the leading columns."""
        names = [c.name for c in columns]
        if list(primary_key) != names[: len(primary_key)]:
            raise InvalidArgument(
                f"primary key columns {list(primary_key)} must be the leading columns, in order; columns are {names}"
            )
        return cls(columns, len(primary_key))

    # --- lookups -------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Schema)
            and self.columns == other.columns
            and self.key_column_count == other.key_column_count
        )

    def __hash__(self) -> int:
        return hash((self.columns, self.key_column_count))

    def __getstate__(self) -> dict[str, Any]:
        # Without the remembered Arrow schemas: Spark pickles a schema into every task.
        names = ("columns", "key_column_count", "next_column_id")
        return {name: getattr(self, name) for name in names}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.columns = state["columns"]
        self.key_column_count = state["key_column_count"]
        self.next_column_id = state["next_column_id"]
        self._by_name = {c.name: i for i, c in enumerate(self.columns)}
        self._arrow_schemas = {}

    def __repr__(self) -> str:
        cols = ", ".join(f"{c.name} {c.type}{'' if c.nullable else ' not null'}" for c in self.columns)
        return f"Schema({cols}; primary key {self.key_names})"

    def __len__(self) -> int:
        return len(self.columns)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def key_columns(self) -> tuple[ColumnSchema, ...]:
        return self.columns[: self.key_column_count]

    @property
    def key_names(self) -> list[str]:
        return [c.name for c in self.key_columns]

    def has_column(self, name: str) -> bool:
        return name in self._by_name

    def index_of(self, name: str) -> int:
        try:
            return self._by_name[name]
        except KeyError:
            raise InvalidArgument(f"unknown column {name!r}; columns are {self.names}") from None

    def column(self, name: str) -> ColumnSchema:
        return self.columns[self.index_of(name)]

    def is_key(self, name: str) -> bool:
        return self.index_of(name) < self.key_column_count

    def check_key(self, key: Sequence[Any], what: str = "primary key") -> tuple[Any, ...]:
        """Validate a full primary key given as a sequence of values; return it canonical."""
        if len(key) != self.key_column_count:
            raise InvalidArgument(f"{what} needs {self.key_column_count} values ({self.key_names}), got {key!r}")
        out = []
        for col, value in zip(self.key_columns, key, strict=True):
            if value is None:
                raise InvalidArgument(f"{what}: key column {col.name!r} may not be null")
            out.append(col.type.check(value, f"{what}, column {col.name!r}"))
        return tuple(out)

    # --- Arrow ---------------------------------------------------------------------------

    def to_arrow(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.arrow_type, nullable=c.nullable) for c in self.columns])

    def arrow_schema_of(self, names: tuple[str, ...]) -> pa.Schema:
        """The Arrow schema (nullable fields) of a batch setting these columns, in this order;
        InvalidArgument for a name not in the schema.  Remembered: every written dict asks."""
        found = self._arrow_schemas.get(names)
        if found is None:
            for name in names:
                if name not in self._by_name:
                    raise InvalidArgument(f"unknown column {name!r}; the table's columns are {self.names}")
            found = pa.schema([pa.field(n, self.column(n).arrow_type) for n in names])
            if len(self._arrow_schemas) < _ARROW_SCHEMAS_KEPT:
                self._arrow_schemas[names] = found
        return found

    @classmethod
    def from_arrow(cls, arrow_schema: pa.Schema, primary_key: Sequence[str]) -> Schema:
        """Build a schema from Arrow fields; the key columns become non-null."""
        keys = set(primary_key)
        columns = [
            ColumnSchema(f.name, ColumnType.from_arrow(f.type), nullable=f.nullable and f.name not in keys)
            for f in arrow_schema
        ]
        missing = keys - {c.name for c in columns}
        if missing:
            raise InvalidArgument(f"primary key columns {sorted(missing)} are not in the Arrow schema")
        return cls.of(columns, primary_key)

    # --- serialised form -----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "columns": [c.to_dict() for c in self.columns],
            "key_column_count": self.key_column_count,
            "next_column_id": self.next_column_id,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Schema:
        try:
            columns = [ColumnSchema.from_dict(c) for c in d["columns"]]
            next_id = d.get("next_column_id")
            return cls(columns, int(d["key_column_count"]), None if next_id is None else int(next_id))
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidArgument(f"malformed schema description: {e}") from None

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes | str) -> Schema:
        try:
            d = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise InvalidArgument(f"schema is not valid JSON: {e}") from None
        if not isinstance(d, dict):
            raise InvalidArgument("schema JSON must be an object")
        return cls.from_dict(d)

    # --- alterations (each returns a new schema) ------------------------------------------

    def add_column(self, column: ColumnSchema) -> Schema:
        """Append a column.  A non-null column needs a default so existing rows get a value."""
        if not column.nullable and column.default is None:
            raise InvalidArgument(f"new non-null column {column.name!r} needs a default for existing rows")
        added = dataclasses.replace(column, id=self.next_column_id)
        return Schema([*self.columns, added], self.key_column_count, self.next_column_id + 1)

    def drop_column(self, name: str) -> Schema:
        index = self.index_of(name)
        if index < self.key_column_count:
            raise InvalidArgument(f"cannot drop primary key column {name!r}")
        return Schema(self.columns[:index] + self.columns[index + 1 :], self.key_column_count, self.next_column_id)

    def rename_column(self, old: str, new: str) -> Schema:
        index = self.index_of(old)
        renamed = dataclasses.replace(self.columns[index], name=new)
        columns = (*self.columns[:index], renamed, *self.columns[index + 1 :])
        return Schema(columns, self.key_column_count, self.next_column_id)


def _check_unique_names(cols: Sequence[ColumnSchema]) -> None:
    # Compared case-insensitively: DuckDB, which stores the rows, folds identifier case.
    seen: dict[str, str] = {}
    for col in cols:
        folded = col.name.lower()
        if folded in seen:
            raise InvalidArgument(
                f"duplicate column name {col.name!r} (names are case-insensitive; clashes with {seen[folded]!r})"
            )
        seen[folded] = col.name


def _assign_ids(cols: list[ColumnSchema]) -> tuple[ColumnSchema, ...]:
    given = [c.id for c in cols if c.id >= 0]
    if len(given) != len(set(given)):
        raise InvalidArgument(f"duplicate column ids in {[(c.name, c.id) for c in cols]}")
    next_id = max(given, default=-1) + 1
    out = []
    for col in cols:
        if col.id < 0:
            col = dataclasses.replace(col, id=next_id)
            next_id += 1
        out.append(col)
    return tuple(out)
