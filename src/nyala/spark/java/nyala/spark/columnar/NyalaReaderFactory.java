package nyala.spark.columnar;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** Columnar readers only: Spark then plans {@code ColumnarToRow} above the scan, as for Parquet. */
final class NyalaReaderFactory implements PartitionReaderFactory {
  private static final long serialVersionUID = 1L;
  private final StructType required;
  /** TLS settings of every connection to the tablet servers (null: plain TCP). */
  private final RpcTls tls;

  NyalaReaderFactory(StructType required, RpcTls tls) {
    this.required = required;
    this.tls = tls;
  }

  @Override
  public boolean supportColumnarReads(InputPartition partition) {
    return true;
  }

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    throw new UnsupportedOperationException("the nyala source reads column batches only");
  }

  @Override
  public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
    if (partition instanceof NyalaGroupPartition group) {
      return new GroupScanReader(group, required, tls);
    }
    return new TabletScanReader((NyalaInputPartition) partition, required, tls);
  }
}
