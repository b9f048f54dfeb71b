package nyala.spark.columnar;

import java.util.Arrays;
import java.util.stream.Collectors;

import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** The planned read of one query: one input partition per scan token (tablet or key range). */
final class NyalaScan implements Scan, Batch {
  private final StructType tableSchema;
  private final StructType required;
  private final Filter[] pushed;
  private final CaseInsensitiveStringMap options;
  private InputPartition[] partitions; // Spark asks twice per query: plan once

  NyalaScan(StructType tableSchema, StructType required, Filter[] pushed, CaseInsensitiveStringMap options) {
    this.tableSchema = tableSchema;
    this.required = required;
    this.pushed = pushed;
    this.options = options;
  }

  @Override
  public StructType readSchema() {
    return required;
  }

  @Override
  public String description() {
    String filters = Arrays.stream(pushed).map(Filter::toString).collect(Collectors.joining(", "));
    return "NyalaScan(" + options.get("nyala.table") + ", pushed=[" + filters + "])";
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  @Override
  public synchronized InputPartition[] planInputPartitions() {
    if (partitions == null) {
      partitions = Planner.get().plan(options, tableSchema, required, pushed);
    }
    return partitions;
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new NyalaReaderFactory(required, RpcTls.fromOptions(options));
  }
}
