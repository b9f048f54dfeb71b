"""Column types: Kudu's names, their Arrow types, and checking of Python values against them.

Python values follow Arrow's ``to_pylist`` conventions so that values read from a batch
compare equal to values given by a user: ``bool``, ``int``, ``float``, ``decimal.Decimal``,
``str``, ``bytes``, ``datetime.date`` and timezone-aware ``datetime.datetime`` in UTC.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime
import decimal
import enum
import math
import struct
from typing import Any

import pyarrow as pa

from nyala.errors import InvalidArgument

__all__ = ["EPOCH", "KEY_TYPES", "MAX_DECIMAL_PRECISION", "UTC", "ColumnType", "DataType"]

UTC = datetime.UTC
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)
MAX_DECIMAL_PRECISION = 38


class DataType(enum.StrEnum):
    """Kudu's type names, as users write them."""

    BOOL = "bool"
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT = "float"
    DOUBLE = "double"
    DECIMAL = "decimal"
    STRING = "string"
    BINARY = "binary"
    DATE = "date"
    TIMESTAMP = "timestamp"


INT_BITS = {DataType.INT8: 8, DataType.INT16: 16, DataType.INT32: 32, DataType.INT64: 64}

# Kudu refuses BOOL, FLOAT and DOUBLE key columns: floats have no useful equality and a
# two-valued key makes little sense.  Nyala follows.
KEY_TYPES = frozenset(DataType) - {DataType.BOOL, DataType.FLOAT, DataType.DOUBLE}

_ARROW_OF_SIMPLE: dict[DataType, pa.DataType] = {
    DataType.BOOL: pa.bool_(),
    DataType.INT8: pa.int8(),
    DataType.INT16: pa.int16(),
    DataType.INT32: pa.int32(),
    DataType.INT64: pa.int64(),
    DataType.FLOAT: pa.float32(),
    DataType.DOUBLE: pa.float64(),
    DataType.STRING: pa.string(),
    DataType.BINARY: pa.binary(),
    DataType.DATE: pa.date32(),
    DataType.TIMESTAMP: pa.timestamp("us", tz="UTC"),
}


@dataclasses.dataclass(frozen=True, slots=True)
class ColumnType:
    """A data type with its parameters (precision and scale for decimals only)."""

    type: DataType
    precision: int = 0
    scale: int = 0

    def __post_init__(self) -> None:
        if self.type is DataType.DECIMAL:
            if not 1 <= self.precision <= MAX_DECIMAL_PRECISION:
                raise InvalidArgument(
                    f"decimal precision must be between 1 and {MAX_DECIMAL_PRECISION}, got {self.precision}"
                )
            if not 0 <= self.scale <= self.precision:
                raise InvalidArgument(f"decimal scale must be between 0 and {self.precision}, got {self.scale}")
        elif self.precision or self.scale:
            raise InvalidArgument(f"only decimal takes a precision and scale, not {self.type}")

    @classmethod
    def parse(cls, text: str) -> ColumnType:
        """Read ``"int64"``, ``"decimal(10, 2)"`` and the like."""
        name = text.strip().lower()
        if name.startswith("decimal"):
            args = name[len("decimal") :].strip()
            if not (args.startswith("(") and args.endswith(")")):
                raise InvalidArgument(f"decimal needs (precision, scale): {text!r}")
            parts = [p.strip() for p in args[1:-1].split(",")]
            try:
                precision, scale = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
            except (ValueError, IndexError):
                raise InvalidArgument(f"bad decimal parameters in {text!r}") from None
            return cls(DataType.DECIMAL, precision, scale)
        try:
            return cls(DataType(name))
        except ValueError:
            known = ", ".join(t.value for t in DataType)
            raise InvalidArgument(f"unknown type {text!r}; known types: {known}") from None

    def __str__(self) -> str:
        if self.type is DataType.DECIMAL:
            return f"decimal({self.precision}, {self.scale})"
        return self.type.value

    def to_arrow(self) -> pa.DataType:
        if self.type is DataType.DECIMAL:
            return pa.decimal128(self.precision, self.scale)
        return _ARROW_OF_SIMPLE[self.type]

    @classmethod
    def from_arrow(cls, arrow_type: pa.DataType) -> ColumnType:
        if pa.types.is_decimal(arrow_type) and arrow_type.precision <= MAX_DECIMAL_PRECISION:
            return cls(DataType.DECIMAL, arrow_type.precision, arrow_type.scale)
        if pa.types.is_large_string(arrow_type) or pa.types.is_string_view(arrow_type):
            return cls(DataType.STRING)
        if pa.types.is_large_binary(arrow_type) or pa.types.is_binary_view(arrow_type):
            return cls(DataType.BINARY)
        if pa.types.is_timestamp(arrow_type):
            # Any unit or zone maps to Nyala's one timestamp: microseconds in UTC.
            return cls(DataType.TIMESTAMP)
        for data_type, candidate in _ARROW_OF_SIMPLE.items():
            if candidate == arrow_type:
                return cls(data_type)
        raise InvalidArgument(f"Arrow type {arrow_type} has no Nyala column type")

    @property
    def is_integer(self) -> bool:
        return self.type in INT_BITS

    def check(self, value: Any, what: str) -> Any:
        """Return ``value`` in its canonical Python form, or raise InvalidArgument naming ``what``."""
        try:
            return _CHECKERS[self.type](self, value)
        except (TypeError, ValueError, decimal.InvalidOperation, OverflowError) as e:
            raise InvalidArgument(f"{what}: {value!r} is not a valid {self}: {e}") from None

    def to_json(self, value: Any) -> Any:
        """A JSON-safe form of a canonical value (None stays None)."""
        if value is None:
            return None
        if self.type in (DataType.FLOAT, DataType.DOUBLE):
            return value if math.isfinite(value) else repr(value)
        if self.type is DataType.DECIMAL:
            return str(value)
        if self.type is DataType.BINARY:
            return base64.b64encode(value).decode("ascii")
        if self.type is DataType.DATE:
            return value.isoformat()
        if self.type is DataType.TIMESTAMP:
            return timestamp_to_micros(value)
        return value

    def from_json(self, value: Any, what: str) -> Any:
        if value is None:
            return None
        try:
            if self.type in (DataType.FLOAT, DataType.DOUBLE):
                value = float(value)
            elif self.type is DataType.DECIMAL:
                value = decimal.Decimal(value)
            elif self.type is DataType.BINARY:
                value = base64.b64decode(value, validate=True)
            elif self.type is DataType.DATE:
                value = datetime.date.fromisoformat(value)
            elif self.type is DataType.TIMESTAMP:
                value = micros_to_timestamp(int(value))
        except (TypeError, ValueError, decimal.InvalidOperation, binascii.Error) as e:
            raise InvalidArgument(f"{what}: cannot read {value!r} as {self}: {e}") from None
        return self.check(value, what)


def timestamp_to_micros(value: datetime.datetime) -> int:
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def micros_to_timestamp(micros: int) -> datetime.datetime:
    return EPOCH + datetime.timedelta(microseconds=micros)


def _check_bool(_t: ColumnType, v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError("expected a bool")
    return v


def _check_int(t: ColumnType, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("expected an int")
    bits = INT_BITS[t.type]
    if not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
        raise ValueError(f"out of range for {bits}-bit integer")
    return v


def _check_float(t: ColumnType, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise TypeError("expected a float")
    v = float(v)
    if t.type is DataType.FLOAT and math.isfinite(v) and abs(v) > 3.4028234663852886e38:
        raise ValueError("out of range for a 32-bit float")
    if t.type is DataType.FLOAT:
        v = struct.unpack("<f", struct.pack("<f", v))[0]  # what a 32-bit column stores
    return float(v)


def _check_decimal(t: ColumnType, v: Any) -> decimal.Decimal:
    if isinstance(v, bool) or not isinstance(v, int | decimal.Decimal):
        raise TypeError("expected a decimal.Decimal or an int")
    d = decimal.Decimal(v)
    if not d.is_finite():
        raise ValueError("decimals must be finite")
    q = d.quantize(decimal.Decimal(1).scaleb(-t.scale), context=decimal.Context(prec=100))
    if q != d:
        raise ValueError(f"has more than {t.scale} digits after the point")
    if len(q.as_tuple().digits) > t.precision and q != 0:
        raise ValueError(f"has more than {t.precision} digits")
    return q


def _check_string(_t: ColumnType, v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError("expected a str")
    v.encode("utf-8")  # rejects lone surrogates, which Arrow and DuckDB cannot store
    return v


def _check_binary(_t: ColumnType, v: Any) -> bytes:
    if not isinstance(v, bytes | bytearray | memoryview):
        raise TypeError("expected bytes")
    return bytes(v)


def _check_date(_t: ColumnType, v: Any) -> datetime.date:
    if isinstance(v, datetime.datetime) or not isinstance(v, datetime.date):
        raise TypeError("expected a datetime.date")
    return v


def _check_timestamp(_t: ColumnType, v: Any) -> datetime.datetime:
    if not isinstance(v, datetime.datetime):
        raise TypeError("expected a datetime.datetime")
    if v.tzinfo is None:
        raise ValueError("timestamps must carry a time zone (they are stored in UTC)")
    return v.astimezone(UTC)


_CHECKERS = {
    DataType.BOOL: _check_bool,
    DataType.INT8: _check_int,
    DataType.INT16: _check_int,
    DataType.INT32: _check_int,
    DataType.INT64: _check_int,
    DataType.FLOAT: _check_float,
    DataType.DOUBLE: _check_float,
    DataType.DECIMAL: _check_decimal,
    DataType.STRING: _check_string,
    DataType.BINARY: _check_binary,
    DataType.DATE: _check_date,
    DataType.TIMESTAMP: _check_timestamp,
}
