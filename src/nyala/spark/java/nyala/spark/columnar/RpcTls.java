package nyala.spark.columnar;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.KeyManager;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManagerFactory;

/**
 * TLS to the tablet servers with the JDK's own {@code javax.net.ssl}, from the same options the
 * Python client takes ({@code nyala.tls}, {@code nyala.tlsCaFile}, {@code nyala.tlsCertFile},
 * {@code nyala.tlsKeyFile}, {@code nyala.tlsCheckHostname}; docs/spark.md): TLS 1.2 or later, the
 * server's certificate checked against the CA file (else the JDK's CAs) and, unless turned off,
 * the server's address against the certificate's names, as Python's {@code ssl} does. Nyala's
 * RPC is TLS from the first byte (no STARTTLS step): the preamble and frames go inside the TLS
 * session. The planner has checked the options (and loaded the files) with the Python code
 * before any task runs; a task loads the PEM files itself, once per JVM and settings.
 */
record RpcTls(String caFile, String certFile, String keyFile, boolean checkHostname) implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final String[] PROTOCOLS = {"TLSv1.3", "TLSv1.2"};
  private static final Pattern PEM = Pattern.compile("-----BEGIN ([A-Z0-9 ]+)-----([^-]*)-----END \\1-----");
  private static final Map<RpcTls, SSLSocketFactory> FACTORIES = new ConcurrentHashMap<>();

  /** A TLS failure that another replica or a retry cannot fix (an untrusted or misnamed certificate). */
  static final class TlsError extends IOException {
    private static final long serialVersionUID = 1L;

    TlsError(String message, Throwable cause) {
      super(message, cause);
    }
  }

  /** The settings of these options, or null when they leave TLS off (the planner's rule, in Python). */
  static RpcTls fromOptions(Map<String, String> options) {
    String ca = blankToNull(options.get("nyala.tlsCaFile"));
    String cert = blankToNull(options.get("nyala.tlsCertFile"));
    String key = blankToNull(options.get("nyala.tlsKeyFile"));
    boolean on = "true".equalsIgnoreCase(String.valueOf(options.get("nyala.tls")).trim());
    if (!on && ca == null && cert == null) {
      return null;
    }
    String check = options.get("nyala.tlsCheckHostname");
    return new RpcTls(ca, cert, key, check == null || !"false".equalsIgnoreCase(check.trim()));
  }

  /** Wraps a connected socket into a TLS session with {@code host} and completes the handshake. */
  SSLSocket wrap(java.net.Socket plain, String host, int port, String address, int timeoutMs) throws IOException {
    SSLSocketFactory factory = FACTORIES.get(this);
    if (factory == null) {
      factory = context().getSocketFactory();
      FACTORIES.put(this, factory);
    }
    SSLSocket socket = (SSLSocket) factory.createSocket(plain, host, port, true);
    SSLParameters parameters = socket.getSSLParameters();
    parameters.setProtocols(PROTOCOLS);
    if (checkHostname) {
      parameters.setEndpointIdentificationAlgorithm("HTTPS"); // the address against subjectAltName
    }
    socket.setSSLParameters(parameters);
    socket.setSoTimeout(timeoutMs);
    try {
      socket.startHandshake();
    } catch (IOException e) {
      socket.close();
      if (isConfigurationError(e)) {
        throw new TlsError("TLS handshake with tablet server " + address + " failed: " + e.getMessage()
            + " (check nyala.tlsCaFile, nyala.tlsCertFile and nyala.tlsKeyFile against the cluster's "
            + "certificates" + (checkHostname ? ", and that the server's certificate names " + host : "") + ")", e);
      }
      throw e;
    }
    return socket;
  }

  /** A certificate the other side refused (or that we refused), as opposed to a dropped connection. */
  private static boolean isConfigurationError(Throwable error) {
    for (Throwable t = error; t != null; t = t.getCause()) {
      if (t instanceof CertificateException) {
        return true;
      }
      String message = t.getMessage();
      if (message != null && message.startsWith("Received fatal alert")) {
        return true;
      }
    }
    return false;
  }

  private SSLContext context() throws IOException {
    try {
      TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      if (caFile == null) {
        trust.init((KeyStore) null); // the JDK's CAs, as Python's default context uses the system's
      } else {
        KeyStore cas = KeyStore.getInstance(KeyStore.getDefaultType());
        cas.load(null, null);
        List<Certificate> certificates = certificates(caFile, "nyala.tlsCaFile");
        for (int i = 0; i < certificates.size(); i++) {
          cas.setCertificateEntry("ca-" + i, certificates.get(i));
        }
        trust.init(cas);
      }
      KeyManager[] keys = null;
      if (certFile != null) {
        List<Certificate> chain = certificates(certFile, "nyala.tlsCertFile");
        PrivateKey key = privateKey(keyFile != null ? keyFile : certFile);
        KeyStore store = KeyStore.getInstance("PKCS12");
        store.load(null, null);
        store.setKeyEntry("client", key, new char[0], chain.toArray(new Certificate[0]));
        KeyManagerFactory factory = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        factory.init(store, new char[0]);
        keys = factory.getKeyManagers();
      }
      SSLContext context = SSLContext.getInstance("TLS");
      context.init(keys, trust.getTrustManagers(), null);
      return context;
    } catch (GeneralSecurityException e) {
      throw new TlsError("cannot set up TLS from nyala.tlsCaFile " + caFile + ", nyala.tlsCertFile " + certFile
          + ", nyala.tlsKeyFile " + keyFile + ": " + e, e);
    }
  }

  private static List<Certificate> certificates(String file, String option) throws IOException,
      GeneralSecurityException {
    CertificateFactory factory = CertificateFactory.getInstance("X.509");
    List<Certificate> found = new ArrayList<>();
    for (String[] block : blocks(file)) {
      if (block[0].equals("CERTIFICATE")) {
        found.add(factory.generateCertificate(new ByteArrayInputStream(Base64.getMimeDecoder().decode(block[1]))));
      }
    }
    if (found.isEmpty()) {
      throw new TlsError(option + " " + file + " holds no PEM certificate", null);
    }
    return found;
  }

  private static PrivateKey privateKey(String file) throws IOException, GeneralSecurityException {
    for (String[] block : blocks(file)) {
      if (block[0].equals("PRIVATE KEY")) {
        PKCS8EncodedKeySpec spec = new PKCS8EncodedKeySpec(Base64.getMimeDecoder().decode(block[1]));
        for (String algorithm : new String[] {"EC", "RSA", "Ed25519", "Ed448"}) {
          try {
            return KeyFactory.getInstance(algorithm).generatePrivate(spec);
          } catch (GeneralSecurityException wrongAlgorithm) {
            // try the next key type
          }
        }
        throw new TlsError("the private key in " + file + " is of a type the JDK cannot load", null);
      }
      if (block[0].endsWith("PRIVATE KEY")) {
        throw new TlsError("the private key in " + file + " is '" + block[0] + "'; the JVM reader loads only "
            + "unencrypted PKCS#8 keys ('PRIVATE KEY'): convert it with openssl pkcs8 -topk8 -nocrypt", null);
      }
    }
    throw new TlsError("no PEM private key in " + file + " (give it with nyala.tlsKeyFile)", null);
  }

  /** The PEM blocks of a file: {type, base64 body}. */
  private static List<String[]> blocks(String file) throws IOException {
    String text = new String(Files.readAllBytes(Paths.get(file)), StandardCharsets.US_ASCII);
    List<String[]> blocks = new ArrayList<>();
    Matcher matcher = PEM.matcher(text);
    while (matcher.find()) {
      blocks.add(new String[] {matcher.group(1), matcher.group(2)});
    }
    return blocks;
  }

  private static String blankToNull(String value) {
    return value == null || value.trim().isEmpty() ? null : value.trim();
  }
}
