package dev.lockstep.spark;

import java.io.PrintStream;

import org.apache.spark.sql.streaming.StreamingQueryListener;

/**
 * Prints Spark's own progress of every trigger as one line on the progress stream, prefixed with
 * {@link #PREFIX}; the Go side reads the fields it needs and drops triggers that ran no batch.
 */
final class Progress extends StreamingQueryListener {
  static final String PREFIX = "@@lockstep-progress ";

  private final PrintStream out;

  Progress(PrintStream out) {
    this.out = out;
  }

  @Override
  public void onQueryStarted(QueryStartedEvent event) {
    synchronized (out) {
      out.println("@@lockstep-started {\"id\":\"" + event.id() + "\",\"runId\":\"" + event.runId() + "\"}");
      out.flush();
    }
  }

  @Override
  public void onQueryProgress(QueryProgressEvent event) {
    Crash.at(Crash.COMMIT, event.progress().batchId());
    String json = event.progress().json().replace('\n', ' ');
    synchronized (out) {
      out.println(PREFIX + json);
      out.flush();
    }
  }

  @Override
  public void onQueryIdle(QueryIdleEvent event) {}

  @Override
  public void onQueryTerminated(QueryTerminatedEvent event) {}
}
