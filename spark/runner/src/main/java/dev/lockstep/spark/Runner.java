package dev.lockstep.spark;

import java.io.File;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.delta.tables.DeltaTable;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.DataFrameReader;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.DataStreamReader;
import org.apache.spark.sql.streaming.DataStreamWriter;
import org.apache.spark.sql.streaming.StreamingQuery;
import org.apache.spark.sql.streaming.StreamingQueryException;
import org.apache.spark.sql.streaming.StreamingQueryProgress;
import org.apache.spark.sql.streaming.Trigger;
import org.apache.spark.sql.types.StructType;

/**
 * Lockstep's Spark runner: {@code Runner PLAN.json} builds the Structured Streaming query that the
 * plan describes, runs it, and prints one progress line per trigger on standard output. A line
 * "stop" on standard input, or its end, stops the query between batches; the other lines there
 * answer what a sink asks its Go parent ({@link Parent}). Exit codes: 0 the query
 * finished or was stopped, 1 it failed, 2 the plan could not be read or built.
 */
public final class Runner {
  private Runner() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      System.err.println("usage: Runner PLAN.json");
      System.exit(2);
    }
    // Spark's console sink and our progress lines share standard output: one lock, whole lines.
    PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
    System.setOut(out);
    Parent.start(out);
    Plan plan;
    try {
      plan = new ObjectMapper().enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES).readValue(new File(args[0]), Plan.class);
    } catch (Exception e) {
      fail(2, "read plan " + args[0], e);
      return;
    }
    if (plan.version != 1) {
      fail(2, "plan version " + plan.version + " is not 1", null);
    }
    SparkSession.Builder b = SparkSession.builder().appName(plan.appName).master(plan.master);
    for (Map.Entry<String, String> e : plan.conf.entrySet()) {
      b = b.config(e.getKey(), e.getValue());
    }
    // Whatever ends the runner is said on the error line: an exception left to the JVM would
    // end it with exit code 1 and only a stack trace in Spark's log.
    SparkSession spark;
    try {
      spark = b.getOrCreate();
    } catch (Exception e) {
      fail(1, "start Spark", e);
      System.exit(1);
      return;
    }
    int code;
    try {
      code = run(spark, plan, out);
    } catch (Exception e) {
      fail(1, "run the query", e);
      code = 1;
    } finally {
      spark.stop();
    }
    System.exit(code);
  }

  private static int run(SparkSession spark, Plan plan, PrintStream out) throws Exception {
    if (plan.rebuild) {
      return rebuild(spark, plan, out);
    }
    StreamingQuery query;
    try {
      spark.streams().addListener(new Progress(out));
      query = start(spark, plan);
    } catch (Exception e) {
      fail(2, "build the query", e);
      return 2;
    }
    Thread stopper = new Thread(() -> stopOnRequest(query), "lockstep-stop");
    stopper.setDaemon(true);
    stopper.start();
    try {
      query.awaitTermination();
    } catch (StreamingQueryException e) {
      fail(1, "the query failed", e);
      return 1;
    }
    return 0;
  }

  /**
   * A rebuild's runner (engine/spark/rebuild.go): for each line "batch N" on standard input, the Go
   * side has written offsets/N, without a commit, into the plan's checkpoint; the query started
   * on it (Trigger.Once, the noop sink) runs exactly that batch, as Spark re-runs the newest
   * uncommitted batch on restart, with its offsets, watermark and timestamp, and stops. The answer
   * is Spark's progress of the batch, one line "@@lockstep-rebuilt {json}". "stop" or the end of
   * standard input ends the loop; all batches run in this one SparkSession. A rebuild's kill
   * points are the Go side's (engine/spark's Options.PhaseHook), between these batches.
   */
  static int rebuild(SparkSession spark, Plan plan, PrintStream out) throws Exception {
    String line;
    while ((line = Parent.command()) != null) {
      line = line.trim();
      if (line.equals("stop")) {
        break;
      }
      if (!line.startsWith("batch ")) {
        continue;
      }
      long batch = Long.parseLong(line.substring("batch ".length()).trim());
      StreamingQueryProgress progress;
      try {
        StreamingQuery query = start(spark, plan);
        query.awaitTermination();
        progress = query.lastProgress();
      } catch (Exception e) {
        fail(1, "rebuild batch " + batch, e);
        return 1;
      }
      if (progress == null) {
        fail(1, "rebuild batch " + batch + ": Spark ran no batch", null);
        return 1;
      }
      synchronized (out) {
        out.println("@@lockstep-rebuilt " + progress.json().replace('\n', ' '));
        out.flush();
      }
    }
    return 0;
  }

  /** Builds and starts the query: sources, steps, sink. */
  @SuppressWarnings("deprecation") // Trigger.Once: the spec's once, which AvailableNow is not
  static StreamingQuery start(SparkSession spark, Plan plan) throws Exception {
    Dataset<Row> df = null;
    for (Plan.Source s : plan.sources) {
      Dataset<Row> in = source(spark, s);
      df = df == null ? in : df.union(in);
    }
    for (Plan.Step st : plan.steps) {
      df = step(df, st);
    }
    if (plan.sink.kind.equals("delta") && Crash.armed(Crash.SINK_WRITE)) {
      // Delta's own sink has no hook between its files and its commit: a task of the batch is.
      df = df.mapPartitions((MapPartitionsFunction<Row, Row>) rows -> {
        Crash.inTask(Crash.SINK_WRITE);
        return rows;
      }, Encoders.row(df.schema()));
    }
    DataStreamWriter<Row> w = df.writeStream()
        .queryName(plan.queryName)
        .outputMode(plan.outputMode)
        .option("checkpointLocation", plan.checkpointLocation);
    switch (plan.trigger.kind) {
      case "processingTime" -> w = w.trigger(Trigger.ProcessingTime(plan.trigger.intervalMs, TimeUnit.MILLISECONDS));
      case "availableNow" -> w = w.trigger(Trigger.AvailableNow());
      case "once" -> w = w.trigger(Trigger.Once()); // all available data in one batch, as the spec says
      case "default" -> { }
      default -> throw new IllegalArgumentException("trigger kind " + plan.trigger.kind);
    }
    Plan.Sink k = plan.sink;
    switch (k.kind) {
      case "delta" -> {
        return w.format("delta").options(k.options).partitionBy(k.partitionColumns.toArray(new String[0])).start(k.path);
      }
      case "deltaMerge" -> {
        return w.foreachBatch(Crash.around(new DeltaMergeSink(k, plan.queryId))).start();
      }
      case "rows" -> {
        return w.foreachBatch(Crash.around(new RowsSink())).start();
      }
      case "console" -> {
        return w.format("console").options(k.options).start();
      }
      case "noop" -> {
        return w.format("noop").start();
      }
      case "files" -> {
        return w.foreachBatch(Crash.around(new FilesSink(k))).start();
      }
      case "kafka" -> {
        // Spark's Kafka writer, a batch at a time so that each record can name its batch as
        // the built-in sink's do; the plan's last step made the key and value columns.
        String id = plan.queryId;
        return w.foreachBatch(Crash.around((batch, batchId) -> batch
            .withColumn("headers", functions.array(functions.struct(functions.lit(k.batchHeader).as("key"),
                functions.lit(id + ":" + batchId).cast("binary").as("value"))))
            .write().format("kafka").options(k.options).save())).start();
      }
      default -> throw new IllegalArgumentException("sink kind " + k.kind);
    }
  }

  static Dataset<Row> source(SparkSession spark, Plan.Source s) {
    DataStreamReader r = spark.readStream();
    if (s.name != null && !s.name.isEmpty()) {
      // Unnamed: a Spark job's checkpoint that named no sources, taken over.
      r = r.name(s.name);
    }
    r = r.format(s.format).options(s.options);
    if (s.schema != null && !s.schema.isEmpty()) {
      r = r.schema(s.schema);
    }
    Dataset<Row> df = s.path == null || s.path.isEmpty() ? r.load() : r.load(s.path);
    if (!s.project.isEmpty()) {
      df = df.selectExpr(s.project.toArray(new String[0]));
    }
    if (s.keep != null && !s.keep.isEmpty()) {
      df = df.filter(functions.expr(s.keep));
    }
    if (!s.then.isEmpty()) {
      df = df.selectExpr(s.then.toArray(new String[0]));
    }
    return df;
  }

  static Dataset<Row> step(Dataset<Row> df, Plan.Step st) {
    if (st.filter != null) {
      return df.filter(functions.expr(st.filter));
    }
    if (st.select != null) {
      return df.selectExpr(st.select.toArray(new String[0]));
    }
    if (st.watermark != null) {
      return df.withWatermark(st.watermark.column, st.watermark.delay);
    }
    if (st.aggregate != null) {
      Column[] keys = exprs(st.aggregate.groupBy);
      Column[] aggs = exprs(st.aggregate.aggregates);
      Column[] rest = new Column[aggs.length - 1];
      System.arraycopy(aggs, 1, rest, 0, rest.length);
      return df.groupBy(keys).agg(aggs[0], rest);
    }
    if (st.dropDuplicates != null) {
      return df.dropDuplicates(st.dropDuplicates.toArray(new String[0]));
    }
    if (st.join != null) {
      return join(df, st.join);
    }
    throw new IllegalArgumentException("a step with no kind");
  }

  /** Joins df (aliased l) with the join's right side (aliased r) as the Go side compiled it. */
  static Dataset<Row> join(Dataset<Row> df, Plan.Join j) {
    SparkSession spark = df.sparkSession();
    Dataset<Row> right;
    if (j.stream != null) {
      right = source(spark, j.stream);
    } else if (j.staticSide != null) {
      right = staticSide(spark, j.staticSide);
    } else {
      throw new IllegalArgumentException("a join with no right side");
    }
    for (Plan.Step st : j.right) {
      right = step(right, st);
    }
    return df.alias("l").join(right.alias("r"), functions.expr(j.condition), j.type)
        .selectExpr(j.select.toArray(new String[0]));
  }

  /**
   * Reads a static side once per run: cached, so that every batch joins against the rows the
   * first one read. The plan pins what a restart reads again: a Delta version (versionAsOf), a
   * folder's files (paths); without a pin, a Delta table's newest version. A JDBC side has no
   * path, and its password comes from the environment.
   */
  static Dataset<Row> staticSide(SparkSession spark, Plan.Source s) {
    DataFrameReader r = spark.read().format(s.format).options(s.options);
    if (s.format.equals("delta") && !s.options.containsKey("versionAsOf")) {
      // The version found now, for the whole run: Spark would read the newest at every batch.
      long version = DeltaTable.forPath(spark, s.path).history(1).select("version").head().getLong(0);
      r = r.option("versionAsOf", version);
    }
    if (s.schema != null && !s.schema.isEmpty()) {
      r = r.schema(s.schema);
    }
    if (s.passwordEnv != null && !s.passwordEnv.isEmpty()) {
      String password = System.getenv(s.passwordEnv);
      if (password != null) {
        r = r.option("password", password);
      }
    }
    Dataset<Row> df;
    if (s.paths != null && s.paths.isEmpty()) {
      // A folder pinned empty.
      df = spark.createDataFrame(new ArrayList<Row>(), StructType.fromDDL(s.schema));
    } else if (s.paths != null) {
      df = r.load(s.paths.toArray(new String[0]));
    } else {
      df = s.path == null || s.path.isEmpty() ? r.load() : r.load(s.path);
    }
    if (!s.project.isEmpty()) {
      df = df.selectExpr(s.project.toArray(new String[0]));
    }
    if (!s.then.isEmpty()) {
      df = df.selectExpr(s.then.toArray(new String[0]));
    }
    return df.cache();
  }

  /**
   * Computes a batch that a sink committed before and writes nothing: Spark 4.2 fails a batch
   * whose stateful operators' partitions did not all run (STATE_STORE_COMMIT_VALIDATION_FAILED),
   * so a replayed batch must run even when its output is already delivered.
   */
  static void skip(Dataset<Row> batch) {
    batch.write().format("noop").mode("overwrite").save();
  }

  private static Column[] exprs(List<String> sql) {
    List<Column> cols = new ArrayList<>();
    for (String s : sql) {
      cols.add(functions.expr(s));
    }
    return cols.toArray(new Column[0]);
  }

  /**
   * Waits for "stop" or the end of standard input, then stops the query between batches: it waits
   * until no trigger is running. A trigger that starts in the instant before stop() is interrupted;
   * its offsets are logged, so the next run replays it (docs/spark.md).
   */
  private static void stopOnRequest(StreamingQuery query) {
    try {
      String line;
      while ((line = Parent.command()) != null && !line.trim().equals("stop")) {
        // ignore anything else
      }
      while (query.isActive() && query.status().isTriggerActive()) {
        Thread.sleep(50);
      }
      query.stop();
    } catch (Exception e) {
      if (query.isActive()) { // else the query ended meanwhile and main stopped Spark: not news
        System.err.println("lockstep runner: stop: " + e);
      }
    }
  }

  private static void fail(int code, String what, Throwable e) {
    System.err.println("lockstep runner: " + what + (e == null ? "" : ": " + e));
    if (e != null) {
      e.printStackTrace(System.err);
    }
    // One machine-readable line for the Go side, which shows it to the user.
    String msg = (what + (e == null ? "" : ": " + rootMessage(e))).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ");
    System.out.println("@@lockstep-error {\"code\":" + code + ",\"message\":\"" + msg + "\"}");
    System.out.flush();
    if (code == 2) {
      System.exit(2);
    }
  }

  private static String rootMessage(Throwable e) {
    Throwable t = e;
    while (t.getCause() != null && t.getCause() != t) {
      t = t.getCause();
    }
    return t == e ? String.valueOf(e.getMessage()) : e.getMessage() + " (cause: " + t + ")";
  }
}
