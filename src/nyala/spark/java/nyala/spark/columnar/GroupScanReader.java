package nyala.spark.columnar;

import java.io.IOException;

import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** Reads the tablets of a {@link NyalaGroupPartition} one after another, each with its own scan. */
final class GroupScanReader implements PartitionReader<ColumnarBatch> {
  private final NyalaGroupPartition group;
  private final StructType required;
  private final RpcTls tls;
  private int next;
  private TabletScanReader current;

  GroupScanReader(NyalaGroupPartition group, StructType required, RpcTls tls) {
    this.group = group;
    this.required = required;
    this.tls = tls;
  }

  @Override
  public boolean next() throws IOException {
    while (true) {
      if (current == null) {
        if (next == group.tablets.length) {
          return false;
        }
        current = new TabletScanReader(group.tablets[next++], required, tls);
      }
      if (current.next()) {
        return true;
      }
      TabletScanReader finished = current;
      current = null;
      finished.close();
    }
  }

  @Override
  public ColumnarBatch get() {
    return current.get();
  }

  @Override
  public void close() throws IOException {
    if (current != null) {
      TabletScanReader open = current;
      current = null;
      open.close();
    }
  }
}
