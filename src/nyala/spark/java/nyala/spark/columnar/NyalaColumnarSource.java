package nyala.spark.columnar;

import java.util.Map;

import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The columnar {@code nyala} source: reads Nyala tables as Arrow column batches in the JVM.
 *
 * <p>Registered under the short name {@code nyala}, so with this jar on the classpath it wins
 * over the Python data source of the same name (Spark looks up JVM sources first). Reads are
 * planned per query by Spark through {@link NyalaScanBuilder}; writes are handed to the Python
 * data source {@code nyala_python} (see {@link NyalaTable#newWriteBuilder}), so
 * {@code df.write.format("nyala")} keeps working with the jar loaded.
 */
public final class NyalaColumnarSource implements TableProvider, DataSourceRegister {
  public static final String SHORT_NAME = "nyala";

  @Override
  public String shortName() {
    return SHORT_NAME;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return Planner.get().schema(options);
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new NyalaTable(schema, partitioning, properties);
  }

  /** A schema given with {@code .schema(...)} is the projection, checked against the table on planning. */
  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }
}
