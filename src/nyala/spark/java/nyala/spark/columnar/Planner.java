package nyala.spark.columnar;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.sources.EqualNullSafe;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.IsNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.sources.StringStartsWith;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The driver's planner: one long-lived Python process ({@code python -m nyala.spark.columnar_planner})
 * that uses Nyala's client for what needs the master: option checks, the table's schema, which
 * filters become predicates, and the scan tokens (partition pruning, key-range splits, replica
 * locations), each returned as the Scan request that opens it.
 *
 * <p>One JSON object a line each way on the process's stdin and stdout. The process is started
 * on first use, reused by every query of this JVM (a master lookup per query, no process start),
 * and exits when the JVM closes its stdin.
 */
final class Planner {
  private static Planner instance;
  private static final ObjectMapper JSON = new ObjectMapper();

  private Process process;
  private BufferedWriter requests;
  private BufferedReader answers;

  static synchronized Planner get() {
    if (instance == null) {
      instance = new Planner();
    }
    return instance;
  }

  StructType schema(CaseInsensitiveStringMap options) {
    Map<String, Object> request = request("schema", options);
    return (StructType) DataType.fromJson(call(request).get("schema").asText());
  }

  boolean[] push(CaseInsensitiveStringMap options, StructType tableSchema, Filter[] filters) {
    Map<String, Object> request = request("push", options);
    request.put("schema", tableSchema.json());
    request.put("filters", filtersJson(filters));
    JsonNode accepted = call(request).get("accepted");
    boolean[] result = new boolean[filters.length];
    for (JsonNode index : accepted) {
      result[index.asInt()] = true;
    }
    return result;
  }

  InputPartition[] plan(CaseInsensitiveStringMap options, StructType tableSchema, StructType required,
      Filter[] pushed) {
    Map<String, Object> request = request("plan", options);
    request.put("schema", tableSchema.json());
    request.put("columns", List.of(required.fieldNames()));
    request.put("filters", filtersJson(pushed));
    JsonNode answer = call(request);
    boolean leaderOnly = answer.get("leader_only").asBoolean();
    boolean ordered = answer.get("ordered").asBoolean();
    int batchSizeBytes = answer.get("batch_size_bytes").asInt();
    long timeoutMs = answer.get("timeout_ms").asLong();
    java.util.TreeMap<String, String> known = new java.util.TreeMap<>();
    answer.get("servers").fields().forEachRemaining(e -> known.put(e.getKey(), e.getValue().asText()));
    String[] serverUuids = known.keySet().toArray(new String[0]);
    String[] serverAddresses = known.values().toArray(new String[0]);
    List<NyalaInputPartition> tablets = new ArrayList<>();
    for (JsonNode p : answer.get("partitions")) {
      JsonNode replicas = p.get("replicas");
      String[] uuids = new String[replicas.size()];
      String[] addresses = new String[replicas.size()];
      String leader = "";
      for (int i = 0; i < replicas.size(); i++) {
        uuids[i] = replicas.get(i).get(0).asText();
        addresses[i] = replicas.get(i).get(1).asText();
        if ("LEADER".equals(replicas.get(i).get(2).asText())) {
          leader = uuids[i];
        }
      }
      byte[] open = Base64.getDecoder().decode(p.get("request").asText());
      tablets.add(new NyalaInputPartition(p.get("tablet").asText(), open, uuids, addresses, leader, leaderOnly,
          ordered, batchSizeBytes, timeoutMs, serverUuids, serverAddresses));
    }
    JsonNode groups = answer.get("groups");
    if (groups == null) {
      return tablets.toArray(new InputPartition[0]);
    }
    // Small tablets share a partition (nyala.combineSizeBytes); every tablet is in one group.
    List<InputPartition> partitions = new ArrayList<>();
    for (JsonNode group : groups) {
      if (group.size() == 1) {
        partitions.add(tablets.get(group.get(0).asInt()));
        continue;
      }
      NyalaInputPartition[] members = new NyalaInputPartition[group.size()];
      for (int i = 0; i < members.length; i++) {
        members[i] = tablets.get(group.get(i).asInt());
      }
      partitions.add(new NyalaGroupPartition(members));
    }
    return partitions.toArray(new InputPartition[0]);
  }

  private static Map<String, Object> request(String op, CaseInsensitiveStringMap options) {
    Map<String, Object> request = new LinkedHashMap<>();
    request.put("op", op);
    request.put("options", new HashMap<>(options.asCaseSensitiveMap()));
    return request;
  }

  private synchronized JsonNode call(Map<String, Object> request) {
    String line;
    try {
      line = JSON.writeValueAsString(request);
    } catch (IOException e) {
      throw new IllegalStateException("cannot encode a planner request: " + e.getMessage(), e);
    }
    String answer = null;
    for (int attempt = 0; attempt < 2 && answer == null; attempt++) {
      try {
        ensureStarted();
        requests.write(line);
        requests.write('\n');
        requests.flush();
        answer = answers.readLine();
      } catch (IOException e) {
        answer = null;
      }
      if (answer == null) {
        stop(); // the process died (or never started): start a new one once
      }
    }
    if (answer == null) {
      throw new IllegalStateException("the Nyala planner process (" + String.join(" ", command())
          + ") did not answer; its error output is in the Spark driver's stderr");
    }
    JsonNode node;
    try {
      node = JSON.readTree(answer);
    } catch (IOException e) {
      throw new IllegalStateException("the Nyala planner answered something that is not JSON: " + answer, e);
    }
    if (node.has("error")) {
      String kind = node.get("kind").asText();
      String message = node.get("error").asText();
      if ("InvalidArgument".equals(kind) || "NotFound".equals(kind)) {
        throw new IllegalArgumentException(kind + ": " + message);
      }
      throw new IllegalStateException(kind + ": " + message);
    }
    return node;
  }

  private void ensureStarted() throws IOException {
    if (process != null && process.isAlive()) {
      return;
    }
    ProcessBuilder builder = new ProcessBuilder(command());
    builder.redirectError(ProcessBuilder.Redirect.INHERIT);
    process = builder.start();
    requests = new BufferedWriter(new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8));
    answers = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
  }

  private void stop() {
    if (process != null) {
      process.destroy();
      process = null;
    }
  }

  /** The interpreter Nyala is installed in: NYALA_SPARK_PYTHON, spark.pyspark.python, PYSPARK_PYTHON, python3. */
  static List<String> command() {
    String python = System.getenv("NYALA_SPARK_PYTHON");
    if (python == null || python.isEmpty()) {
      SparkEnv env = SparkEnv.get();
      python = env == null ? null : env.conf().get("spark.pyspark.python", null);
    }
    if (python == null || python.isEmpty()) {
      python = System.getenv("PYSPARK_PYTHON");
    }
    if (python == null || python.isEmpty()) {
      python = "python3";
    }
    return List.of(python, "-m", "nyala.spark.columnar_planner");
  }

  static List<Map<String, Object>> filtersJson(Filter[] filters) {
    List<Map<String, Object>> out = new ArrayList<>();
    for (Filter f : filters) {
      out.add(filterJson(f));
    }
    return out;
  }

  private static Map<String, Object> filterJson(Filter f) {
    Map<String, Object> json = new LinkedHashMap<>();
    String kind;
    String attribute;
    Object value = null;
    boolean hasValue = true;
    if (f instanceof EqualTo) {
      kind = "EqualTo"; attribute = ((EqualTo) f).attribute(); value = ((EqualTo) f).value();
    } else if (f instanceof EqualNullSafe) {
      kind = "EqualNullSafe"; attribute = ((EqualNullSafe) f).attribute(); value = ((EqualNullSafe) f).value();
    } else if (f instanceof GreaterThan) {
      kind = "GreaterThan"; attribute = ((GreaterThan) f).attribute(); value = ((GreaterThan) f).value();
    } else if (f instanceof GreaterThanOrEqual) {
      kind = "GreaterThanOrEqual"; attribute = ((GreaterThanOrEqual) f).attribute();
      value = ((GreaterThanOrEqual) f).value();
    } else if (f instanceof LessThan) {
      kind = "LessThan"; attribute = ((LessThan) f).attribute(); value = ((LessThan) f).value();
    } else if (f instanceof LessThanOrEqual) {
      kind = "LessThanOrEqual"; attribute = ((LessThanOrEqual) f).attribute();
      value = ((LessThanOrEqual) f).value();
    } else if (f instanceof In) {
      kind = "In"; attribute = ((In) f).attribute();
      List<Object> values = new ArrayList<>();
      for (Object v : ((In) f).values()) {
        values.add(valueJson(v));
      }
      json.put("values", values);
      hasValue = false;
    } else if (f instanceof IsNull) {
      kind = "IsNull"; attribute = ((IsNull) f).attribute(); hasValue = false;
    } else if (f instanceof IsNotNull) {
      kind = "IsNotNull"; attribute = ((IsNotNull) f).attribute(); hasValue = false;
    } else if (f instanceof StringStartsWith) {
      kind = "StringStartsWith"; attribute = ((StringStartsWith) f).attribute();
      value = ((StringStartsWith) f).value();
    } else {
      json.put("kind", "Other");
      json.put("text", f.toString());
      return json;
    }
    json.put("kind", kind);
    json.put("attribute", attribute);
    if (hasValue) {
      json.put("value", valueJson(value));
    }
    return json;
  }

  /** A literal with its type: the planner rebuilds the Python value Spark would hand a Python source. */
  private static Map<String, Object> valueJson(Object v) {
    Map<String, Object> json = new LinkedHashMap<>();
    if (v == null) {
      json.put("t", "null");
    } else if (v instanceof String) {
      json.put("t", "str"); json.put("v", v);
    } else if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) {
      json.put("t", "int"); json.put("v", ((Number) v).longValue());
    } else if (v instanceof Double || v instanceof Float) {
      json.put("t", "float"); json.put("v", Double.toString(((Number) v).doubleValue()));
    } else if (v instanceof Boolean) {
      json.put("t", "bool"); json.put("v", v);
    } else if (v instanceof BigDecimal) {
      json.put("t", "decimal"); json.put("v", ((BigDecimal) v).toPlainString());
    } else if (v instanceof java.sql.Timestamp) {
      java.sql.Timestamp ts = (java.sql.Timestamp) v;
      long micros = Math.floorDiv(ts.getTime(), 1000L) * 1_000_000L + ts.getNanos() / 1000;
      json.put("t", "timestamp"); json.put("v", micros);
    } else if (v instanceof Instant) {
      Instant i = (Instant) v;
      json.put("t", "timestamp"); json.put("v", i.getEpochSecond() * 1_000_000L + i.getNano() / 1000);
    } else if (v instanceof java.sql.Date) {
      json.put("t", "date"); json.put("v", ((java.sql.Date) v).toLocalDate().toEpochDay());
    } else if (v instanceof LocalDate) {
      json.put("t", "date"); json.put("v", ((LocalDate) v).toEpochDay());
    } else if (v instanceof byte[]) {
      json.put("t", "bytes"); json.put("v", Base64.getEncoder().encodeToString((byte[]) v));
    } else {
      json.put("t", "other"); json.put("v", v.getClass().getName());
    }
    return json;
  }

}
