package dev.lockstep.spark;

import java.util.Iterator;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.util.RawValue;
import org.apache.spark.api.java.function.VoidFunction2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;

/**
 * A sink whose commit protocol is Go's (the webhook and PostgreSQL sinks): each batch's rows,
 * the JSON objects the plan's last step made ({@code value}), go to the Go parent in chunks
 * ({@link Parent}, op "rows"), then "commit" asks it to write them with the built-in runtime's
 * own sink (engine/webhook, engine/postgres) and answers once they are committed
 * (engine/spark/rows.go). The rows pass through the driver a partition at a time.
 */
final class RowsSink implements VoidFunction2<Dataset<Row>, Long> {
  private static final long serialVersionUID = 1L;
  private static final String KIND = "rows";
  /** A chunk's size: well under the 16 MiB line the parent reads, few requests a batch. */
  private static final int CHUNK_ROWS = 4096, CHUNK_CHARS = 4 << 20;

  @Override
  public void call(Dataset<Row> batch, Long batchId) throws Exception {
    ObjectNode chunk = null;
    int chars = 0;
    for (Iterator<String> it = batch.select("value").as(Encoders.STRING()).toLocalIterator(); it.hasNext(); ) {
      if (chunk == null) {
        chunk = Parent.request(KIND, "rows", batchId);
        chunk.putArray("rows");
        chars = 0;
      }
      String row = it.next();
      ((ArrayNode) chunk.get("rows")).addRawValue(new RawValue(row));
      chars += row.length();
      if (chunk.get("rows").size() >= CHUNK_ROWS || chars >= CHUNK_CHARS) {
        Parent.ask(chunk);
        chunk = null;
      }
    }
    if (chunk != null) {
      Parent.ask(chunk);
    }
    Crash.at(Crash.SINK_WRITE, batchId);
    Parent.ask(Parent.request(KIND, "commit", batchId));
  }
}
