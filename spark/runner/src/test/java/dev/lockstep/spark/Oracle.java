package dev.lockstep.spark;

import java.io.File;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.SparkThrowable;
import org.apache.spark.api.java.function.VoidFunction2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.streaming.StreamingQuery;
import org.apache.spark.sql.streaming.Trigger;

/**
 * The planner's oracle (engine/spark/oracle_test.go): {@code Oracle} reads plan paths from
 * standard input, one per line, and runs each in one SparkSession (one JVM for the whole
 * matrix), availableNow, with the plan's sources and steps but its rows collected instead of
 * written (a files sink is written as well, and committed by the Go side as the runner's is: its
 * requests and their answers share standard output and input with the results and the plan paths).
 * After each it prints one JSON line: whether Spark ran it or refused it, the error class Spark
 * gave, and the rows each batch produced.
 */
public final class Oracle {
  private Oracle() {}

  public static void main(String[] args) throws Exception {
    // Standard output carries the result lines only: what else prints there (a sink's progress
    // lines) goes to standard error.
    PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
    System.setOut(System.err);
    // Source evolution is fixed when the session starts, and every plan the Go side compiles
    // turns it on (engine/spark/compile.go): the session's own setting, as the runner's.
    SparkSession spark = SparkSession.builder().appName("lockstep-oracle").master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true")
        .getOrCreate();
    spark.sparkContext().setLogLevel("ERROR");
    ObjectMapper json = new ObjectMapper().enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);
    // Plan paths and the answers to the files sink's requests share standard input.
    Parent.start(out);
    try {
      String path;
      while ((path = Parent.command()) != null) {
        if (path.isBlank()) {
          continue;
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("plan", path);
        List<String> rows = new ArrayList<>();
        try {
          Plan plan = json.readValue(new File(path), Plan.class);
          run(spark, plan, rows);
          result.put("ran", true);
        } catch (Throwable e) {
          result.put("ran", false);
          result.put("errorClass", errorClass(e));
          result.put("message", rootMessage(e));
        } finally {
          // A static join side is cached for its run; the next plan is another run, which
          // reads it again, as a restarted runner does.
          spark.catalog().clearCache();
        }
        result.put("rows", rows);
        String line = json.writeValueAsString(result);
        synchronized (out) {
          out.println(line);
        }
      }
    } finally {
      spark.stop();
    }
  }

  private static void run(SparkSession spark, Plan plan, List<String> rows) throws Exception {
    for (Map.Entry<String, String> e : plan.conf.entrySet()) {
      try {
        spark.conf().set(e.getKey(), e.getValue());
      } catch (Exception ignored) {
        // a static setting: fixed for the session, as it would be for a restarted job's
      }
    }
    Dataset<Row> df = null;
    for (Plan.Source s : plan.sources) {
      Dataset<Row> in = Runner.source(spark, s);
      df = df == null ? in : df.union(in);
    }
    for (Plan.Step st : plan.steps) {
      df = Runner.step(df, st);
    }
    // A files sink is written too (the Go side compares the folders): its folder, format and
    // manifest are what a change of sink is about.
    FilesSink files = "files".equals(plan.sink.kind) ? new FilesSink(plan.sink) : null;
    VoidFunction2<Dataset<Row>, Long> collect = (batch, id) -> {
      synchronized (rows) {
        rows.addAll(batch.toJSON().collectAsList());
      }
      if (files != null) {
        files.call(batch, id);
      }
    };
    StreamingQuery q = df.writeStream().queryName(null).outputMode(plan.outputMode)
        .option("checkpointLocation", plan.checkpointLocation)
        .trigger(Trigger.AvailableNow())
        .foreachBatch(collect)
        .start();
    q.awaitTermination();
  }

  /**
   * The error class (condition) Spark gave: the innermost SparkThrowable's, since the outer ones
   * (STREAM_FAILED) only say that the query stopped; "" if none.
   */
  private static String errorClass(Throwable e) {
    String found = "";
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof SparkThrowable st && st.getCondition() != null) {
        found = st.getCondition();
      }
    }
    return found;
  }

  private static String rootMessage(Throwable e) {
    Throwable t = e;
    while (t.getCause() != null && t.getCause() != t) {
      t = t.getCause();
    }
    return String.valueOf(t.getMessage()).lines().findFirst().orElse("");
  }
}
