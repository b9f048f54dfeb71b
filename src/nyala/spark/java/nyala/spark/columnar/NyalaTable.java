package nyala.spark.columnar;

import java.util.EnumSet;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * One Nyala table as Spark sees it: columnar batch reads, writes through the Python source.
 *
 * <p>Spark keeps this object for as long as the DataFrame or view lives, so it holds nothing
 * of a query: every query gets a fresh {@link NyalaScanBuilder}, and its filters are pushed and
 * its tablets planned afresh (unlike PySpark's reuse of a Python source's planned read).
 */
final class NyalaTable implements SupportsRead, SupportsWrite {
  /** The Python data source that writes (registered by the module {@code pyspark_nyala_python}). */
  static final String PYTHON_SOURCE = "nyala_python";

  private final StructType schema;
  private final Transform[] partitioning;
  private final Map<String, String> properties;
  private Table pythonTable;

  NyalaTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    this.schema = schema;
    this.partitioning = partitioning;
    this.properties = new HashMap<>(properties);
  }

  @Override
  public String name() {
    String table = new CaseInsensitiveStringMap(properties).get("nyala.table");
    return "nyala." + (table == null ? new CaseInsensitiveStringMap(properties).getOrDefault("path", "?") : table);
  }

  @Override
  @SuppressWarnings("deprecation")
  public StructType schema() {
    return schema;
  }

  @Override
  public Set<TableCapability> capabilities() {
    Set<TableCapability> capabilities = EnumSet.of(TableCapability.BATCH_READ);
    for (TableCapability c : python().capabilities()) {
      if (c != TableCapability.MICRO_BATCH_READ && c != TableCapability.CONTINUOUS_READ) {
        capabilities.add(c);
      }
    }
    return capabilities;
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    Map<String, String> merged = new HashMap<>(properties);
    merged.putAll(options.asCaseSensitiveMap());
    return new NyalaScanBuilder(schema, new CaseInsensitiveStringMap(merged));
  }

  /** Writes go to the Python source's writer, exactly as {@code format("nyala_python")} would. */
  @Override
  public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
    return ((SupportsWrite) python()).newWriteBuilder(info);
  }

  private synchronized Table python() {
    if (pythonTable == null) {
      PythonDataSourceV2 provider = new PythonDataSourceV2();
      provider.setShortName(PYTHON_SOURCE);
      pythonTable = provider.getTable(schema, partitioning, properties);
    }
    return pythonTable;
  }
}
