package nyala.spark.columnar;

import java.io.BufferedInputStream;
import java.io.Closeable;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * A blocking client of Nyala's RPC framing (docs/rpc.md), one call at a time on one socket.
 *
 * <p>A frame is {@code u32 frame_len, u32 header_len}, the header, the protobuf body and the
 * sidecars, each sidecar starting at a multiple of 64 bytes from the header's start. The whole
 * response frame is read into one array; sidecar 0 of a Scan answer is the Arrow IPC stream. On a
 * cluster whose RPC is TLS the socket is a TLS session ({@link RpcTls}) and the framing is the same.
 */
final class RpcConnection implements Closeable {
  static final byte[] PREAMBLE = {'N', 'Y', 'R', 'P', 'C', 0, 0, 1};
  static final int MAX_FRAME_BYTES = 64 * 1024 * 1024;
  private static final int SIDECAR_ALIGNMENT = 64;
  private static final byte KIND_REQUEST = 1;
  private static final byte KIND_RESPONSE = 2;

  /** Status codes of {@code proto/nyala/rpc.proto}. */
  static final int OK = 0;
  static final int NOT_FOUND = 1;
  static final int INVALID_ARGUMENT = 3;
  static final int ILLEGAL_STATE = 4;
  static final int SERVICE_UNAVAILABLE = 5;
  static final int TIMED_OUT = 6;
  static final int NOT_THE_LEADER = 7;

  final String address;
  private final Socket socket;
  private final DataInputStream in;
  private final OutputStream out;
  private long nextCallId = 1;
  /**
   * Every response is read into this one array, grown as needed: a scan answer of several MiB
   * allocated afresh each time is a "humongous" object to the JVM's G1 collector. A response
   * is therefore valid only until the next {@link #receive}.
   */
  private byte[] buffer = new byte[0];

  /** A response: its status, body and sidecar 0 (offset and length within {@code frame}). */
  static final class Response {
    int code;
    String message;
    String leaderHint;
    byte[] frame;
    int bodyOffset;
    int bodyLength;
    int sidecarOffset = -1;
    int sidecarLength;
  }

  /** A non-OK status from the server. */
  static final class RpcError extends IOException {
    private static final long serialVersionUID = 1L;
    final int code;
    final String leaderHint;

    RpcError(int code, String message, String leaderHint) {
      super(message);
      this.code = code;
      this.leaderHint = leaderHint;
    }
  }

  RpcConnection(String address, int connectTimeoutMs) throws IOException {
    this(address, connectTimeoutMs, null);
  }

  /** With {@code tls} (null: plain TCP), the whole connection is a TLS session, the preamble included. */
  RpcConnection(String address, int connectTimeoutMs, RpcTls tls) throws IOException {
    this.address = address;
    int colon = address.lastIndexOf(':');
    if (colon < 0) {
      throw new IOException("tablet server address without a port: " + address);
    }
    String host = address.substring(0, colon).replace("[", "").replace("]", "");
    int port = Integer.parseInt(address.substring(colon + 1));
    Socket plain = new Socket();
    plain.setTcpNoDelay(true);
    plain.setReceiveBufferSize(4 * 1024 * 1024);
    try {
      plain.connect(new InetSocketAddress(host, port), connectTimeoutMs);
      socket = tls == null ? plain : tls.wrap(plain, host, port, address, connectTimeoutMs);
    } catch (IOException e) {
      plain.close();
      throw e;
    }
    in = new DataInputStream(new BufferedInputStream(socket.getInputStream(), 256 * 1024));
    out = socket.getOutputStream();
    out.write(PREAMBLE);
  }

  /** Calls {@code method} ("Service.Method"); a non-OK status raises {@link RpcError}. */
  Response call(String method, byte[] body, long timeoutMs) throws IOException {
    send(method, body, timeoutMs);
    return receive();
  }

  /** Sends one request; {@link #receive} reads its answer (one call on the wire at a time). */
  void send(String method, byte[] body, long timeoutMs) throws IOException {
    long callId = nextCallId++;
    byte[] name = method.getBytes(StandardCharsets.UTF_8);
    int headerLen = 1 + 1 + 2 + 8 + 4 + 4 + 2 + name.length;
    ByteBuffer frame = ByteBuffer.allocate(8 + headerLen + body.length);
    frame.putInt(headerLen + body.length).putInt(headerLen);
    frame.put(KIND_REQUEST).put((byte) 0).putShort((short) 0).putLong(callId).putInt(body.length);
    int timeout = (int) Math.max(1, Math.min(timeoutMs, Integer.MAX_VALUE));
    frame.putInt(timeout).putShort((short) name.length).put(name);
    frame.put(body);
    socket.setSoTimeout(timeout);
    out.write(frame.array());
    out.flush();
  }

  /** How long {@link #receive} may block. */
  void readTimeout(long timeoutMs) throws IOException {
    socket.setSoTimeout((int) Math.max(1, Math.min(timeoutMs, Integer.MAX_VALUE)));
  }

  /** The answer to the request sent last; a non-OK status raises {@link RpcError}. */
  Response receive() throws IOException {
    Response response = read();
    if (response.code != OK) {
      throw new RpcError(response.code, response.message, response.leaderHint);
    }
    return response;
  }

  private Response read() throws IOException {
    int frameLen = in.readInt();
    int headerLen = in.readInt();
    if (frameLen < 0 || frameLen > MAX_FRAME_BYTES || headerLen < 0 || headerLen > frameLen) {
      throw new IOException("bad frame from " + address + ": frame_len " + frameLen + ", header_len " + headerLen);
    }
    if (buffer.length < frameLen) {
      buffer = new byte[Math.max(frameLen, Math.min(MAX_FRAME_BYTES, buffer.length * 2))];
    }
    byte[] frame = buffer;
    in.readFully(frame, 0, frameLen);
    ByteBuffer header = ByteBuffer.wrap(frame, 0, headerLen);
    if (header.get() != KIND_RESPONSE) {
      throw new IOException("bad frame from " + address + ": not a response");
    }
    header.get();
    int sidecars = header.getShort() & 0xffff;
    header.getLong(); // call id: one call at a time on this connection
    int bodySize = header.getInt();
    Response response = new Response();
    response.code = header.get() & 0xff;
    int messageLen = header.getShort() & 0xffff;
    int hintLen = header.getShort() & 0xffff;
    response.message = new String(frame, header.position(), messageLen, StandardCharsets.UTF_8);
    response.leaderHint = new String(frame, header.position() + messageLen, hintLen, StandardCharsets.UTF_8);
    header.position(header.position() + messageLen + hintLen);
    int[] sizes = new int[sidecars];
    for (int i = 0; i < sidecars; i++) {
      sizes[i] = header.getInt();
    }
    response.frame = frame;
    response.bodyOffset = headerLen;
    response.bodyLength = bodySize;
    if (sidecars > 0) {
      int offset = headerLen + bodySize;
      offset += (SIDECAR_ALIGNMENT - offset % SIDECAR_ALIGNMENT) % SIDECAR_ALIGNMENT;
      if (offset + sizes[0] > frameLen) {
        throw new IOException("bad frame from " + address + ": sidecar beyond the frame");
      }
      response.sidecarOffset = offset;
      response.sidecarLength = sizes[0];
    }
    return response;
  }

  @Override
  public void close() {
    try {
      socket.close();
    } catch (IOException ignored) {
      // closing a socket that failed already
    }
  }
}
