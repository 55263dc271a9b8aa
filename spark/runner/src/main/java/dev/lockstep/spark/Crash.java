package dev.lockstep.spark;

import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.VoidFunction2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * Crash tests' kill points: with {@code LOCKSTEP_CRASH_AT=<phase>:<batch>} (the built-in engine's
 * phases and syntax), the runner SIGKILLs its parent, {@code lockstep run}, and halts when the
 * batch reaches the phase, as a pod's death ends both. They are a test-only switch: armed only
 * in a JVM started with {@code -Dlockstep.testHooks=true} (the crash tests put it in
 * JAVA_TOOL_OPTIONS); otherwise the variable is ignored with a warning. Unarmed, every call does
 * nothing.
 *
 * <p>Where each phase is: {@code offsets} on entering a foreachBatch sink (offsets/N is written);
 * {@code sink-write} inside the sinks that write before they commit (PostgreSQL's rows before
 * COMMIT, the files sink's data before its manifest) and, for Delta's native sink, in a task of
 * the batch (files being written, the Delta commit not made); {@code sink-commit} on leaving a
 * foreachBatch sink (commits/N not written); {@code commit} in the progress listener (commits/N
 * written, Lockstep's record of the batch not yet).
 */
final class Crash {
  static final String ENV = "LOCKSTEP_CRASH_AT";
  /** The system property that arms the kill points: set by tests only. */
  static final String SWITCH = "lockstep.testHooks";
  static final String OFFSETS = "offsets";
  static final String SINK_WRITE = "sink-write";
  static final String SINK_COMMIT = "sink-commit";
  static final String COMMIT = "commit";

  /** Spark's local property naming the micro-batch a task runs for. */
  private static final String BATCH_ID_PROPERTY = "streaming.sql.batchId";

  private static final String PHASE;
  private static final long BATCH;

  static {
    String spec = System.getenv(ENV);
    String phase = null;
    long batch = -1;
    if (spec != null && !spec.isEmpty() && !Boolean.getBoolean(SWITCH)) {
      System.err.println("lockstep runner: " + ENV + "=" + spec + " is ignored: the kill points are for tests, which arm them with -D" + SWITCH + "=true");
      spec = null;
    }
    if (spec != null && !spec.isEmpty()) {
      int colon = spec.indexOf(':');
      String p = colon < 0 ? spec : spec.substring(0, colon);
      if (colon < 0 || !(p.equals(OFFSETS) || p.equals(SINK_WRITE) || p.equals(SINK_COMMIT) || p.equals(COMMIT))) {
        throw new IllegalArgumentException(ENV + "=" + spec + ": want <phase>:<batch>, phase one of offsets, sink-write, sink-commit, commit");
      }
      phase = p;
      batch = Long.parseLong(spec.substring(colon + 1));
    }
    PHASE = phase;
    BATCH = batch;
  }

  private Crash() {}

  /** Whether a kill point is set at phase p. */
  static boolean armed(String p) {
    return p.equals(PHASE);
  }

  /** Kills lockstep run and the runner if batch b has reached the kill point's phase p. */
  static void at(String p, long b) {
    if (!p.equals(PHASE) || b != BATCH) {
      return;
    }
    System.err.println("lockstep runner: " + ENV + "=" + p + ":" + b + ": killing lockstep run and the runner");
    System.err.flush();
    ProcessHandle.current().parent().ifPresent(ProcessHandle::destroyForcibly);
    Runtime.getRuntime().halt(137);
  }

  /** Kills in a task of the batch the task runs for, if the kill point is there. */
  static void inTask(String p) {
    String id = TaskContext.get() == null ? null : TaskContext.get().getLocalProperty(BATCH_ID_PROPERTY);
    if (id != null) {
      at(p, Long.parseLong(id));
    }
  }

  /** Wraps a foreachBatch sink with the offsets and sink-commit points. */
  static VoidFunction2<Dataset<Row>, Long> around(VoidFunction2<Dataset<Row>, Long> sink) {
    if (PHASE == null) {
      return sink;
    }
    return (batch, id) -> {
      at(OFFSETS, id);
      sink.call(batch, id);
      at(SINK_COMMIT, id);
    };
  }
}
