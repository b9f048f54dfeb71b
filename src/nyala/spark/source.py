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
            # Spark's own refusal of a write without .mode(...) suggests Append or Overwrite;
            # this message is where a user who tried Overwrite learns which one works.
            raise InvalidArgument(
                "write to Nyala with .mode('append'): every write applies nyala.operation (upsert by default; "
                "insert, update, delete and their _ignore forms) to the rows of the DataFrame. Nyala does not "
                "support mode('overwrite') or INSERT OVERWRITE: replacing the table's rows could not be atomic "
                "and a failure would leave it half emptied; delete the rows (delete_rows) or the table first"
            )
        return NyalaWriter(options, schema, self._table_schema(options))
