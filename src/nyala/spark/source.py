"""The ``nyala`` data source: options in, schema from the table, reader and writer out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter
from pyspark.sql.types import StructType

from nyala.errors import InvalidArgument

if TYPE_CHECKING:
    from nyala.schema import Schema

    from .options import NyalaOptions

# The client, reader and writer are imported by the methods that use them: PySpark's source
# lookup, a Python process of its own at the start of a session, imports this module only
# to find the class.

__all__ = ["NyalaDataSource", "NyalaPythonDataSource"]


class NyalaDataSource(DataSource):
    """``spark.read.format("nyala").option("nyala.table", ...).load()`` and ``df.write.format("nyala")``."""

    @classmethod
    def name(cls) -> str:
        return "nyala"

    def _options(self) -> NyalaOptions:
        from .options import parse_options

        return parse_options(self.options)

    def _table_schema(self, options: NyalaOptions) -> Schema:
        from ._clients import client_for

        client = client_for(options.master, options.operation_timeout_ms, options.tls)
        return client.open_table(options.table).schema

    def schema(self) -> StructType:
        from .typemap import spark_schema

        return spark_schema(self._table_schema(self._options()))

    def reader(self, schema: StructType) -> DataSourceReader:
        from .reader import NyalaReader, check_read_schema

        options = self._options()
        table_schema = self._table_schema(options)
        check_read_schema(schema, table_schema, options.table)
        return NyalaReader(options, schema, table_schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .writer import NyalaWriter

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


class NyalaPythonDataSource(NyalaDataSource):
    """The same source under the name ``nyala_python``: always the Python source.

    With the columnar jar on the classpath, ``nyala`` names the JVM source (Spark looks up JVM
    sources first); it hands its writes to this one, and ``format("nyala_python")`` reads
    through the Python path on purpose (docs/spark.md, "Two read paths").
    """

    @classmethod
    def name(cls) -> str:
        return "nyala_python"
