"""The ``nyala`` data source: options in, schema from the table, reader and writer out."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter
from pyspark.sql.types import StructType

from nyala.errors import InvalidArgument
from nyala.schema import Schema

from ._clients import client_for
from .options import NyalaOptions, parse_options
from .reader import NyalaReader, check_read_schema
from .typemap import spark_schema
from .writer import NyalaWriter

__all__ = ["NyalaDataSource"]


class NyalaDataSource(DataSource):
    """``spark.read.format("nyala").option("nyala.table", ...).load()`` and ``df.write.format("nyala")``."""

    @classmethod
    def name(cls) -> str:
        return "nyala"

    def _options(self) -> NyalaOptions:
        return parse_options(self.options)

    def _table_schema(self, options: NyalaOptions) -> Schema:
        client = client_for(options.master, options.operation_timeout_ms)
        return client.open_table(options.table).schema

    def schema(self) -> StructType:
        return spark_schema(self._table_schema(self._options()))

    def reader(self, schema: StructType) -> DataSourceReader:
        options = self._options()
        table_schema = self._table_schema(options)
        check_read_schema(schema, table_schema, options.table)
        return NyalaReader(options, schema, table_schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = self._options()
        if overwrite:
            raise InvalidArgument(
                "Nyala does not support mode('overwrite') or INSERT OVERWRITE (a truncate could not be atomic "
                "and would lose the table's rows on failure); use mode('append') with nyala.operation, or "
                "delete the rows or the table first"
            )
        return NyalaWriter(options, schema, self._table_schema(options))
