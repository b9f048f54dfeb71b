package nyala.spark.columnar;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.DecimalVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.ValueVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.dictionary.Dictionary;
import org.apache.arrow.vector.dictionary.DictionaryEncoder;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.types.pojo.DictionaryEncoding;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Scans one tablet with Nyala's Scan RPC and hands Spark each Arrow record batch as a
 * {@link ColumnarBatch} wrapping the Arrow vectors (no copy into rows).
 *
 * <p>The first call sends the planned opening request to a replica (the leader first under
 * LEADER_ONLY; a replica on this host first under CLOSEST_REPLICA); each later call continues
 * the scanner with {@code call_seq_id} one higher. When a replica fails (it dies, restarts,
 * loses leadership or its scanner expires), the reader moves to the next replica exactly as the
 * Python client does (nyala.client.tablet_scan): an ordered scan ({@code nyala.faultTolerantScan})
 * resumes just after the last primary key it returned, so no row repeats or goes missing; an
 * unordered scan starts over only if it has returned no rows yet, and fails otherwise.
 */
final class TabletScanReader implements PartitionReader<ColumnarBatch> {
  static final String SCAN_METHOD = "TabletServerService.Scan";
  private static final BufferAllocator ROOT = new RootAllocator(Long.MAX_VALUE);
  private static final int CONNECT_TIMEOUT_MS = 5000;

  private final NyalaInputPartition partition;
  private final StructType required;
  private final BufferAllocator allocator;
  private final List<Integer> order;
  /** The planned replicas, plus any replica a leader hint named since (from the known servers). */
  private final List<String> uuids;
  private final List<String> addresses;
  private final Set<Integer> failed = new HashSet<>();
  private Integer preferred;
  private int server = -1;
  private RpcConnection connection;
  /** TLS settings of the connections (null: plain TCP). */
  private final RpcTls tls;
  private byte[] scannerId;
  private int callSeqId;
  private byte[] lastKey;
  private long rows;
  private boolean done;
  /** A continuation is on the wire: the server reads ahead while Spark consumes the last answer. */
  private boolean continuing;
  private ArrowStreamReader stream;
  private final List<ValueVector> decoded = new ArrayList<>();
  private ColumnarBatch batch;

  TabletScanReader(NyalaInputPartition partition, StructType required, RpcTls tls) {
    this.partition = partition;
    this.tls = tls;
    this.required = required;
    this.allocator = ROOT.newChildAllocator("nyala-scan-" + partition.tabletId, 0, Long.MAX_VALUE);
    this.order = replicaOrder(partition);
    this.uuids = new ArrayList<>(java.util.Arrays.asList(partition.replicaUuids));
    this.addresses = new ArrayList<>(java.util.Arrays.asList(partition.replicaAddresses));
  }

  @Override
  public boolean next() throws IOException {
    releaseDecoded();
    while (true) {
      if (stream != null) {
        if (stream.loadNextBatch()) {
          batch = toBatch(stream.getVectorSchemaRoot());
          return true;
        }
        stream.close();
        stream = null;
      }
      if (done) {
        return false;
      }
      fetch();
    }
  }

  @Override
  public ColumnarBatch get() {
    return batch;
  }

  private ColumnarBatch toBatch(VectorSchemaRoot root) throws IOException {
    int n = root.getRowCount();
    StructField[] fields = required.fields();
    ColumnVector[] columns = new ColumnVector[fields.length];
    for (int i = 0; i < fields.length; i++) {
      FieldVector vector = root.getVector(fields[i].name());
      if (vector == null) {
        throw new IllegalStateException("tablet " + partition.tabletId + " returned no column " + fields[i].name());
      }
      ValueVector plain = vector;
      DictionaryEncoding encoding = vector.getField().getDictionary();
      if (encoding != null) {
        // Wrapped as it is, a dictionary column would read as its indices: decode it first.
        Map<Long, Dictionary> dictionaries = stream.getDictionaryVectors();
        plain = DictionaryEncoder.decode(vector, dictionaries.get(encoding.getId()));
        decoded.add(plain);
      }
      columns[i] = plain instanceof DecimalVector
          ? new DecimalColumnVector((DecimalVector) plain, fields[i].dataType())
          : new ArrowColumnVector(plain);
    }
    return new ColumnarBatch(columns, n);
  }

  /** One Scan call, with the moves to other replicas a failure calls for. */
  private void fetch() throws IOException {
    long deadline = System.currentTimeMillis() + partition.timeoutMs;
    long backoffMs = 50;
    IOException last = null;
    while (true) {
      long remaining = deadline - System.currentTimeMillis();
      if (remaining <= 0) {
        throw new IOException("scan of tablet " + partition.tabletId + " timed out after " + partition.timeoutMs
            + " ms" + (last == null ? "" : ": " + last.getMessage()), last);
      }
      boolean opening = scannerId == null;
      try {
        RpcConnection.Response response;
        long attempt = Math.min(remaining, Math.max(1000, partition.timeoutMs / 3));
        if (opening) {
          int chosen = chooseReplica();
          if (chosen < 0) {
            // Every replica failed: pause, then try them all again (a leader may be elected).
            Thread.sleep(Math.min(backoffMs, Math.max(1, remaining)));
            backoffMs = Math.min(backoffMs * 2, 1000);
            failed.clear();
            continue;
          }
          connect(chosen);
          byte[] request = partition.ordered && lastKey != null
              ? ScanMessages.resumeRequest(partition.openRequest, lastKey)
              : partition.openRequest;
          callSeqId = 0;
          response = connection.call(SCAN_METHOD, request, attempt);
        } else {
          if (!continuing) {
            connection.send(SCAN_METHOD, continueRequest(), attempt);
          }
          continuing = false;
          response = connection.receive();
        }
        consume(response);
        readAhead();
        return;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException("scan of tablet " + partition.tabletId + " interrupted", e);
      } catch (IOException e) {
        last = e;
        recover(e, opening);
      }
    }
  }

  private byte[] continueRequest() {
    return ScanMessages.continueRequest(scannerId, callSeqId, partition.batchSizeBytes, false);
  }

  /**
   * Asks for the next answer before Spark consumes this one, so the server scans and encodes
   * it meanwhile. A failure here is left to the next {@link #fetch}, which sends again and
   * recovers as from any failed call.
   */
  private void readAhead() {
    if (done || scannerId == null || connection == null) {
      return;
    }
    try {
      connection.send(SCAN_METHOD, continueRequest(), partition.timeoutMs);
      continuing = true;
    } catch (IOException e) {
      continuing = false;
      closeConnection();
    }
  }

  private void consume(RpcConnection.Response response) throws IOException {
    ScanMessages.ScanResponse scan =
        ScanMessages.parseResponse(response.frame, response.bodyOffset, response.bodyLength);
    callSeqId++;
    scannerId = scan.scannerId.length == 0 ? null : scan.scannerId;
    if (scan.lastPrimaryKey.length > 0) {
      lastKey = scan.lastPrimaryKey;
    }
    rows += scan.numRows;
    if (!scan.hasMoreResults || scannerId == null) {
      done = true;
      scannerId = null;
    }
    if (scan.numRows > 0 && response.sidecarOffset >= 0) {
      stream = new ArrowStreamReader(
          new ByteArrayInputStream(response.frame, response.sidecarOffset, response.sidecarLength), allocator);
    }
  }

  private void recover(IOException error, boolean opening) throws IOException {
    boolean replicaFailure = true;
    if (error instanceof RpcConnection.RpcError) {
      int code = ((RpcConnection.RpcError) error).code;
      replicaFailure = code == RpcConnection.NOT_FOUND || code == RpcConnection.ILLEGAL_STATE
          || code == RpcConnection.SERVICE_UNAVAILABLE || code == RpcConnection.TIMED_OUT
          || code == RpcConnection.NOT_THE_LEADER
          || (code == RpcConnection.INVALID_ARGUMENT && partition.ordered && !opening);
    }
    if (error instanceof RpcTls.TlsError) {
      replicaFailure = false; // every replica presents a certificate from the same CA: no retry helps
    }
    String where = "scan of tablet " + partition.tabletId + " on " + (connection == null ? "?" : connection.address);
    if (!replicaFailure) {
      throw new IOException(where + ": " + error.getMessage(), error);
    }
    boolean resumable = rows == 0 || (partition.ordered && lastKey != null);
    if (!resumable) {
      throw new IOException(where + " failed after " + rows + " rows and cannot resume (only ordered scans, "
          + "nyala.faultTolerantScan, resume on another replica): " + error.getMessage(), error);
    }
    if (server >= 0) {
      failed.add(server);
    }
    continuing = false;
    closeConnection();
    scannerId = null;
    if (error instanceof RpcConnection.RpcError) {
      int hinted = replicaIndex(((RpcConnection.RpcError) error).leaderHint);
      if (hinted >= 0 && !failed.contains(hinted)) {
        preferred = hinted; // a replica naming the leader is followed at once
      }
    }
  }

  /** The index of the replica {@code uuid}; a known server not planned as a replica is added. */
  private int replicaIndex(String uuid) {
    if (uuid == null || uuid.isEmpty()) {
      return -1;
    }
    int index = uuids.indexOf(uuid);
    if (index >= 0) {
      return index;
    }
    for (int i = 0; i < partition.serverUuids.length; i++) {
      if (partition.serverUuids[i].equals(uuid)) {
        // A replica added after planning (the master re-replicating a dead server's tablets).
        uuids.add(uuid);
        addresses.add(partition.serverAddresses[i]);
        order.add(uuids.size() - 1);
        return uuids.size() - 1;
      }
    }
    return -1;
  }

  private int chooseReplica() {
    if (preferred != null && !failed.contains(preferred)) {
      int chosen = preferred;
      preferred = null;
      return chosen;
    }
    for (int i : order) {
      if (!failed.contains(i) && !addresses.get(i).isEmpty()) {
        return i;
      }
    }
    return -1;
  }

  private void connect(int replica) throws IOException {
    closeConnection();
    server = replica;
    connection = new RpcConnection(addresses.get(replica), CONNECT_TIMEOUT_MS, tls);
  }

  /** LEADER_ONLY: the leader first. CLOSEST_REPLICA: replicas on this host first, in random order. */
  private static List<Integer> replicaOrder(NyalaInputPartition partition) {
    List<Integer> first = new ArrayList<>();
    List<Integer> rest = new ArrayList<>();
    for (int i = 0; i < partition.replicaUuids.length; i++) {
      boolean ahead = partition.leaderOnly
          ? partition.replicaUuids[i].equals(partition.leaderUuid)
          : isLocal(partition.replicaAddresses[i]);
      (ahead ? first : rest).add(i);
    }
    if (!partition.leaderOnly) {
      Collections.shuffle(first, ThreadLocalRandom.current());
      Collections.shuffle(rest, ThreadLocalRandom.current());
    }
    first.addAll(rest);
    return first;
  }

  private static boolean isLocal(String address) {
    int colon = address.lastIndexOf(':');
    String host = (colon < 0 ? address : address.substring(0, colon)).replace("[", "").replace("]", "");
    try {
      InetAddress ip = InetAddress.getByName(host);
      return ip.isLoopbackAddress() || ip.isAnyLocalAddress() || NetworkInterface.getByInetAddress(ip) != null;
    } catch (IOException e) {
      return false;
    }
  }

  private void releaseDecoded() {
    for (ValueVector vector : decoded) {
      vector.close();
    }
    decoded.clear();
  }

  private void closeConnection() {
    if (connection != null) {
      connection.close();
      connection = null;
    }
  }

  @Override
  public void close() throws IOException {
    releaseDecoded();
    try {
      if (stream != null) {
        stream.close();
        stream = null;
      }
      if (scannerId != null && connection != null) {
        // Release the server's scanner now (a LIMIT stops early); its TTL reaps it otherwise.
        try {
          if (continuing) {
            continuing = false;
            connection.readTimeout(1000);
            connection.receive(); // the answer read ahead: its rows are not wanted
            callSeqId++;
          }
          connection.call(SCAN_METHOD, ScanMessages.continueRequest(scannerId, callSeqId, 0, true), 1000);
        } catch (IOException ignored) {
          // best effort
        }
        scannerId = null;
      }
    } finally {
      closeConnection();
      allocator.close();
    }
  }
}
