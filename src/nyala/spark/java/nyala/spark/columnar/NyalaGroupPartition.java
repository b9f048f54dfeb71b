package nyala.spark.columnar;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.connector.read.InputPartition;

/**
 * Several small tablets of one table read by one Spark task, one after another
 * ({@code nyala.combineSizeBytes}): a task's fixed cost outweighs the read of a tablet of a few
 * hundred rows. The planner groups only tablets whose rows it found to be few.
 */
final class NyalaGroupPartition implements InputPartition {
  private static final long serialVersionUID = 1L;

  final NyalaInputPartition[] tablets;

  NyalaGroupPartition(NyalaInputPartition[] tablets) {
    this.tablets = tablets;
  }

  /** Every host any of the tablets prefers, in order of first mention. */
  @Override
  public String[] preferredLocations() {
    List<String> hosts = new ArrayList<>();
    for (NyalaInputPartition tablet : tablets) {
      for (String host : tablet.preferredLocations()) {
        if (!hosts.contains(host)) {
          hosts.add(host);
        }
      }
    }
    return hosts.toArray(new String[0]);
  }
}
