package dev.lockstep.spark;

import java.io.File;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

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
 * The Spark application of the package's tests (engine/spark/oracle_test.go): {@code Oracle}
 * reads plan paths from standard input, one per line, and runs each in a session of its own
 * (its own settings) on one SparkContext (one JVM for all the tests that share it), side by side
 * with the plans already running, availableNow, with the plan's sources and steps but its rows
 * collected instead of written (a files sink is written as well, and committed by the Go side as
 * the runner's is: its requests and their answers share standard output and input with the results
 * and the plan paths; each request line is tagged with its plan's path). After each plan it prints
 * one JSON line naming the plan: whether Spark ran it or refused it, the error class Spark gave,
 * the rows each batch produced, and for a console sink each batch's table as that sink prints it.
 */
public final class Oracle {
  private Oracle() {}

  public static void main(String[] args) throws Exception {
    // Standard output carries the result lines and the files sinks' requests only: what else
    // prints there (a sink's progress lines) goes to standard error.
    PrintStream out = new TaggedRequests(new java.io.FileOutputStream(java.io.FileDescriptor.out));
    System.setOut(System.err);
    // Source evolution is fixed when the session starts, and every plan the Go side compiles
    // turns it on (engine/spark/compile.go): the session's own setting, as the runner's.
    SparkSession spark = SparkSession.builder().appName("lockstep-oracle").master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true")
        .getOrCreate();
    spark.sparkContext().setLogLevel("ERROR");
    ObjectMapper json = new ObjectMapper().enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);
    // Plan paths and the answers to the files sink's requests share standard input. Parent asks
    // one request at a time, so each answer is the one its plan's caller gave.
    Parent.start(out);
    ExecutorService plans = Executors.newCachedThreadPool();
    try {
      String path;
      while ((path = Parent.command()) != null) {
        if (path.isBlank()) {
          continue;
        }
        String planPath = path;
        plans.execute(() -> runPlan(spark, json, out, planPath));
      }
    } finally {
      plans.shutdown();
      plans.awaitTermination(1, TimeUnit.HOURS);
      spark.stop();
    }
  }

  /** Runs the plan at path in a session of its own and prints its result line. */
  private static void runPlan(SparkSession spark, ObjectMapper json, PrintStream out, String path) {
    Map<String, Object> result = new LinkedHashMap<>();
    result.put("plan", path);
    List<String> rows = new ArrayList<>();
    Map<String, String> shown = new LinkedHashMap<>(); // by batch id: a console sink's table
    Plan plan = null;
    // The plan's settings are its session's: as a runner's, whatever the plans beside it set.
    SparkSession session = spark.newSession();
    try {
      plan = json.readValue(new File(path), Plan.class);
      run(session, plan, rows, shown, path);
      result.put("ran", true);
    } catch (Throwable e) {
      result.put("ran", false);
      result.put("errorClass", errorClass(e));
      result.put("message", rootMessage(e));
    } finally {
      if (plan != null) {
        uncacheStatics(session, plan);
      }
    }
    result.put("rows", rows);
    result.put("shown", shown);
    try {
      String line = json.writeValueAsString(result);
      synchronized (out) {
        out.println(line);
      }
    } catch (Exception e) {
      System.err.println("oracle: the result of " + path + ": " + e);
    }
  }

  /**
   * Drops the plan's static join sides from the cache, which the sessions share: a static side
   * is cached for its run (Runner.staticSide), and a later plan is another run, which reads it
   * again, as a restarted runner does.
   */
  private static void uncacheStatics(SparkSession session, Plan plan) {
    for (Plan.Step st : plan.steps) {
      if (st.join == null || st.join.staticSide == null) {
        continue;
      }
      try {
        Runner.staticSide(session, st.join.staticSide).unpersist();
      } catch (Exception e) {
        System.err.println("oracle: uncache a static side of " + plan.checkpointLocation + ": " + e);
      }
    }
  }

  /** The plan path of the plan whose batch runs on this thread (its files sink asks the parent). */
  private static final ThreadLocal<String> planOfThread = new ThreadLocal<>();

  /** The prefix of a files sink's request line, tagged: the prefix, the plan's path, a tab, the request line. */
  private static final String TAGGED_REQUEST = "@@oracle-request ";

  /** Standard output, where a request line printed by a plan's batch says which plan asks. */
  private static final class TaggedRequests extends PrintStream {
    TaggedRequests(java.io.OutputStream out) {
      super(out, true, StandardCharsets.UTF_8);
    }

    @Override
    public void println(String line) {
      String plan = planOfThread.get();
      if (plan != null && line != null && line.startsWith(Parent.REQUEST_PREFIX)) {
        line = TAGGED_REQUEST + plan + "\t" + line;
      }
      synchronized (this) {
        super.println(line);
      }
    }
  }

  private static void run(SparkSession spark, Plan plan, List<String> rows, Map<String, String> shown, String path) throws Exception {
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
    // A console sink's batches are printed too, as Spark's console sink prints them with the
    // plan's options (the Go side compares them with a runner's console output).
    boolean console = "console".equals(plan.sink.kind);
    int numRows = Integer.parseInt(plan.sink.options.getOrDefault("numRows", "20"));
    int truncate = Boolean.parseBoolean(plan.sink.options.getOrDefault("truncate", "true")) ? 20 : 0;
    VoidFunction2<Dataset<Row>, Long> collect = (batch, id) -> {
      if (console) {
        // The batch computed once: its rows, then the console sink's table of them.
        Dataset<Row> local = batch.sparkSession().createDataFrame(batch.collectAsList(), batch.schema());
        String table = ((org.apache.spark.sql.classic.Dataset<Row>) local).showString(numRows, truncate, false);
        synchronized (rows) {
          rows.addAll(local.toJSON().collectAsList());
          shown.put(String.valueOf(id), table);
        }
      } else {
        synchronized (rows) {
          rows.addAll(batch.toJSON().collectAsList());
        }
      }
      if (files != null) {
        planOfThread.set(path);
        try {
          files.call(batch, id);
        } finally {
          planOfThread.remove();
        }
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
