package nyala.spark.columnar;

import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One tablet (or key range of one) to scan: the first Scan request, ready to send, and the
 * replicas that may answer it, in the planner's order (the leader first).
 */
final class NyalaInputPartition implements InputPartition {
  private static final long serialVersionUID = 1L;

  final String tabletId;
  /** A serialized {@code ScanRequestPB} that opens the scanner (projection, predicates, bounds). */
  final byte[] openRequest;
  final String[] replicaUuids;
  final String[] replicaAddresses;
  final String leaderUuid;
  final boolean leaderOnly;
  final boolean ordered;
  final int batchSizeBytes;
  final long timeoutMs;
  /** Every live tablet server at planning: a leader hint may name a replica added since. */
  final String[] serverUuids;
  final String[] serverAddresses;

  NyalaInputPartition(String tabletId, byte[] openRequest, String[] replicaUuids, String[] replicaAddresses,
      String leaderUuid, boolean leaderOnly, boolean ordered, int batchSizeBytes, long timeoutMs,
      String[] serverUuids, String[] serverAddresses) {
    this.tabletId = tabletId;
    this.openRequest = openRequest;
    this.replicaUuids = replicaUuids;
    this.replicaAddresses = replicaAddresses;
    this.leaderUuid = leaderUuid;
    this.leaderOnly = leaderOnly;
    this.ordered = ordered;
    this.batchSizeBytes = batchSizeBytes;
    this.timeoutMs = timeoutMs;
    this.serverUuids = serverUuids;
    this.serverAddresses = serverAddresses;
  }

  /** The hosts of the replicas that may answer: Spark places the task near one of them. */
  @Override
  public String[] preferredLocations() {
    java.util.List<String> hosts = new java.util.ArrayList<>();
    for (int i = 0; i < replicaAddresses.length; i++) {
      if (leaderOnly && !replicaUuids[i].equals(leaderUuid)) {
        continue;
      }
      String address = replicaAddresses[i];
      int colon = address.lastIndexOf(':');
      String host = colon < 0 ? address : address.substring(0, colon);
      if (!host.isEmpty() && !hosts.contains(host)) {
        hosts.add(host);
      }
    }
    return hosts.toArray(new String[0]);
  }
}
