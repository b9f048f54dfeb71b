package nyala.spark.columnar;

import java.io.ByteArrayOutputStream;

/**
 * The few protobuf fields of {@code ScanRequestPB} and {@code ScanResponsePB} the reader needs,
 * encoded and decoded by hand (the planner builds the opening request with the real classes).
 *
 * <p>A resumed scan is the opening request with {@code new_scan_request.last_primary_key}
 * appended: protobuf merges a repeated embedded message into the earlier one, so the bytes
 * decode as the opening request that starts after that key.
 */
public final class ScanMessages {
  private ScanMessages() {}

  /** A continuation: {@code scanner_id}, {@code call_seq_id}, {@code batch_size_bytes}, {@code close_scanner}. */
  public static byte[] continueRequest(byte[] scannerId, int callSeqId, int batchSizeBytes, boolean close) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(scannerId.length + 16);
    bytesField(out, 2, scannerId);
    varintField(out, 3, callSeqId & 0xffffffffL);
    if (batchSizeBytes > 0) {
      varintField(out, 4, batchSizeBytes);
    }
    if (close) {
      varintField(out, 5, 1);
    }
    return out.toByteArray();
  }

  /** {@code open} resuming after {@code lastKey} (an ordered scan moving to another replica). */
  public static byte[] resumeRequest(byte[] open, byte[] lastKey) {
    ByteArrayOutputStream inner = new ByteArrayOutputStream(lastKey.length + 4);
    bytesField(inner, 10, lastKey);
    ByteArrayOutputStream out = new ByteArrayOutputStream(open.length + lastKey.length + 8);
    out.write(open, 0, open.length);
    bytesField(out, 1, inner.toByteArray());
    return out.toByteArray();
  }

  /** The fields of a {@code ScanResponsePB}. */
  static final class ScanResponse {
    byte[] scannerId = new byte[0];
    boolean hasMoreResults;
    long numRows;
    byte[] lastPrimaryKey = new byte[0];
  }

  static ScanResponse parseResponse(byte[] buf, int offset, int length) {
    ScanResponse response = new ScanResponse();
    int[] pos = {offset};
    int end = offset + length;
    while (pos[0] < end) {
      long key = readVarint(buf, pos);
      int field = (int) (key >>> 3);
      int wire = (int) (key & 7);
      if (wire == 0) {
        long value = readVarint(buf, pos);
        if (field == 2) {
          response.hasMoreResults = value != 0;
        } else if (field == 3) {
          response.numRows = value;
        }
      } else if (wire == 2) {
        int len = (int) readVarint(buf, pos);
        byte[] value = java.util.Arrays.copyOfRange(buf, pos[0], pos[0] + len);
        pos[0] += len;
        if (field == 1) {
          response.scannerId = value;
        } else if (field == 4) {
          response.lastPrimaryKey = value;
        }
      } else if (wire == 1) {
        pos[0] += 8;
      } else if (wire == 5) {
        pos[0] += 4;
      } else {
        throw new IllegalStateException("unexpected protobuf wire type " + wire + " in a ScanResponsePB");
      }
    }
    return response;
  }

  private static void bytesField(ByteArrayOutputStream out, int field, byte[] value) {
    writeVarint(out, ((long) field << 3) | 2);
    writeVarint(out, value.length);
    out.write(value, 0, value.length);
  }

  private static void varintField(ByteArrayOutputStream out, int field, long value) {
    writeVarint(out, (long) field << 3);
    writeVarint(out, value);
  }

  private static void writeVarint(ByteArrayOutputStream out, long value) {
    while ((value & ~0x7fL) != 0) {
      out.write((int) ((value & 0x7f) | 0x80));
      value >>>= 7;
    }
    out.write((int) value);
  }

  private static long readVarint(byte[] buf, int[] pos) {
    long result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      byte b = buf[pos[0]++];
      result |= (long) (b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        return result;
      }
    }
    throw new IllegalStateException("malformed varint in a ScanResponsePB");
  }
}
