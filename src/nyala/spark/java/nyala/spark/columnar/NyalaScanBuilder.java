package nyala.spark.columnar;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * One query's read: the filters Nyala evaluates and the columns Spark needs.
 *
 * <p>Which filters become Nyala predicates is decided by the planner (the same translation as
 * the Python source's, {@code nyala.spark.filters}); the rest are handed back to Spark.
 */
final class NyalaScanBuilder implements ScanBuilder, SupportsPushDownFilters, SupportsPushDownRequiredColumns {
  private final StructType tableSchema;
  private final CaseInsensitiveStringMap options;
  private StructType required;
  private Filter[] pushed = new Filter[0];

  NyalaScanBuilder(StructType tableSchema, CaseInsensitiveStringMap options) {
    this.tableSchema = tableSchema;
    this.options = options;
    this.required = tableSchema;
  }

  @Override
  public Filter[] pushFilters(Filter[] filters) {
    boolean[] accepted = Planner.get().push(options, tableSchema, filters);
    List<Filter> kept = new ArrayList<>();
    List<Filter> rejected = new ArrayList<>();
    for (int i = 0; i < filters.length; i++) {
      (accepted[i] ? kept : rejected).add(filters[i]);
    }
    pushed = kept.toArray(new Filter[0]);
    return rejected.toArray(new Filter[0]);
  }

  @Override
  public Filter[] pushedFilters() {
    return pushed;
  }

  @Override
  public void pruneColumns(StructType requiredSchema) {
    required = requiredSchema;
  }

  @Override
  public Scan build() {
    return new NyalaScan(tableSchema, required, pushed, options);
  }
}
