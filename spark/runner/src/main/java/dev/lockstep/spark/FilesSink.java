package dev.lockstep.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.api.java.function.VoidFunction2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;

/**
 * The files sink in foreachBatch: each batch's rows are written by one Spark job, one data file
 * a task ({@link FilesCommitProtocol}), and committed by the Go parent ({@link Parent}), which
 * lists those files in the batch's manifest entry with the built-in files sink's own code
 * (engine/sink/files.go). Before writing, the parent says whether the batch is committed (then
 * it is computed and nothing written) and how this attempt's files are named.
 */
final class FilesSink implements VoidFunction2<Dataset<Row>, Long> {
  private static final long serialVersionUID = 1L;
  private static final String KIND = "files";
  /** Spark's setting naming the commit protocol of file writes. */
  private static final String COMMIT_PROTOCOL = "spark.sql.sources.commitProtocolClass";

  private final Plan.Sink sink;

  FilesSink(Plan.Sink sink) {
    this.sink = sink;
  }

  @Override
  public void call(Dataset<Row> batch, Long batchId) throws Exception {
    JsonNode begun = Parent.ask(Parent.request(KIND, "begin", batchId));
    if (begun.path("skip").asBoolean()) {
      Runner.skip(batch); // committed by an earlier attempt
      return;
    }
    String prefix = begun.path("prefix").asText();
    batch.sparkSession().conf().set(COMMIT_PROTOCOL, FilesCommitProtocol.class.getName());
    batch.write().format(sink.format).options(sink.options)
        .option(FilesCommitProtocol.PREFIX, prefix)
        .option("maxRecordsPerFile", "0") // one file a task: its output metrics are the file's
        .mode(SaveMode.Append).save(sink.path);
    var files = FilesCommitProtocol.take(prefix);
    Crash.at(Crash.SINK_WRITE, batchId);
    ObjectNode commit = Parent.request(KIND, "commit", batchId);
    ArrayNode list = commit.putArray("files");
    for (var f : files) {
      list.addObject().put("path", f.path).put("rows", f.rows).put("bytes", f.bytes);
    }
    Parent.ask(commit);
  }
}
