"""Spark SQL types to Nyala column types and back, and the Arrow schema Spark expects.

Nyala's types are Kudu's, so the mapping is kudu-spark's: bool, int8-int64, float, double,
decimal(p, s), string, binary, date and timestamp (microseconds, UTC) map one to one onto
BooleanType, ByteType ... LongType, FloatType, DoubleType, DecimalType, StringType,
BinaryType, DateType and TimestampType.  Spark types with no Nyala counterpart (arrays,
maps, structs, intervals, TimestampNTZType, VARCHAR/CHAR collations aside) are refused with
the column's name.

Spark checks the first Arrow batch a reader returns against ``to_arrow_schema(schema,
timezone="UTC")`` exactly (types, ``timestamp[us, tz=UTC]``, nullability, order), so every
batch is conformed to :func:`spark_arrow_schema` before it is handed over.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from nyala.errors import InvalidArgument
from nyala.schema import ColumnSchema, ColumnType, Schema
from nyala.schema import DataType as NyalaType

__all__ = ["conform_batch", "nyala_columns", "nyala_type", "spark_arrow_schema", "spark_schema", "spark_type"]

_SPARK_OF: dict[NyalaType, DataType] = {
    NyalaType.BOOL: BooleanType(),
    NyalaType.INT8: ByteType(),
    NyalaType.INT16: ShortType(),
    NyalaType.INT32: IntegerType(),
    NyalaType.INT64: LongType(),
    NyalaType.FLOAT: FloatType(),
    NyalaType.DOUBLE: DoubleType(),
    NyalaType.STRING: StringType(),
    NyalaType.BINARY: BinaryType(),
    NyalaType.DATE: DateType(),
    NyalaType.TIMESTAMP: TimestampType(),
}


def spark_type(column_type: ColumnType) -> DataType:
    """The Spark type of a Nyala column type."""
    if column_type.type is NyalaType.DECIMAL:
        return DecimalType(column_type.precision, column_type.scale)
    return _SPARK_OF[column_type.type]


def nyala_type(data_type: DataType, column: str) -> ColumnType:
    """The Nyala column type of a Spark type; InvalidArgument names the column otherwise."""
    if isinstance(data_type, DecimalType):
        return ColumnType(NyalaType.DECIMAL, data_type.precision, data_type.scale)
    if isinstance(data_type, StringType):  # also VARCHAR/CHAR and collated strings
        return ColumnType(NyalaType.STRING)
    for nyala, spark in _SPARK_OF.items():
        if type(data_type) is type(spark):
            return ColumnType(nyala)
    ntz = data_type.typeName() == "timestamp_ntz"
    hint = " (Nyala timestamps are UTC instants: cast it to TIMESTAMP)" if ntz else ""
    raise InvalidArgument(f"column {column!r}: Spark type {data_type.simpleString()} has no Nyala type{hint}")


def spark_schema(schema: Schema, columns: list[str] | None = None) -> StructType:
    """The Spark schema of a table (or of some of its columns), nullability included."""
    chosen = [schema.column(c) for c in columns] if columns is not None else list(schema.columns)
    return StructType([StructField(c.name, spark_type(c.type), c.nullable) for c in chosen])


def nyala_columns(struct: StructType, keys: list[str], not_null: Sequence[str] = ()) -> list[ColumnSchema]:
    """Nyala columns for a Spark schema; key columns and the ``not_null`` ones become non-null.

    ``not_null`` exists because Spark marks every column it reads from Parquet (and most other
    files) nullable, whatever the data: without it a table created from such a DataFrame could
    not have a NOT NULL column besides its key.
    """
    names = set(struct.fieldNames())
    unknown = [c for c in not_null if c not in names]
    if unknown:
        raise InvalidArgument(
            f"not_null names columns {unknown} that the schema does not have (columns: {sorted(names)})"
        )
    required = set(keys) | set(not_null)
    return [
        ColumnSchema.of(f.name, nyala_type(f.dataType, f.name), nullable=f.nullable and f.name not in required)
        for f in struct.fields
    ]


def spark_arrow_schema(struct: StructType) -> pa.Schema:
    """Exactly the Arrow schema Spark checks a reader's batches against."""
    return to_arrow_schema(struct, timezone="UTC")


def conform_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` with ``target``'s field types and nullability (columns already in order)."""
    if batch.schema.equals(target):
        return batch
    arrays = [
        column if column.type == field.type else column.cast(field.type)
        for column, field in zip(batch.columns, target, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=target)
