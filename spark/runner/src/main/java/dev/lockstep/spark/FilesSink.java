package dev.lockstep.spark;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.SecureRandom;
import java.time.Instant;
import java.util.HexFormat;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.api.java.function.VoidFunction2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;

/**
 * The files sink in foreachBatch: the layout and manifest of Lockstep's built-in files sink
 * (engine/sink/files.go). Each batch's rows go to one data file named by (query id, batch id,
 * attempt); the batch commits when its manifest entry {manifestDir}/{query id}/{batch} is created
 * if absent. An entry that exists means the batch committed before: nothing is written. Keying by
 * the query id (not the batch id alone) is what avoids Spark's fresh-checkpoint trap.
 */
final class FilesSink implements VoidFunction2<Dataset<Row>, Long> {
  private static final long serialVersionUID = 1L;
  private static final ObjectMapper JSON = new ObjectMapper();

  private final Plan.Sink sink;
  private final String queryId;

  FilesSink(Plan.Sink sink, String queryId) {
    this.sink = sink;
    this.queryId = queryId;
  }

  @Override
  public void call(Dataset<Row> batch, Long batchId) throws IOException {
    Configuration conf = batch.sparkSession().sessionState().newHadoopConf();
    Path out = new Path(sink.path);
    FileSystem fs = out.getFileSystem(conf);
    fs.setWriteChecksum(false); // no .crc files beside the data: readers go by the manifest
    out = fs.makeQualified(out);
    String name = String.format("%020d", batchId);
    Path entry = fs.makeQualified(new Path(out, sink.manifestDir + "/" + queryId + "/" + name));
    if (fs.exists(entry)) {
      Runner.skip(batch); // committed by an earlier attempt
      return;
    }
    String attempt = attempt();
    ObjectNode m = JSON.createObjectNode();
    m.put("version", 1);
    m.put("queryId", queryId);
    m.put("batchId", batchId);
    m.put("batchTime", Instant.now().toString());
    m.put("format", sink.format);
    m.set("columns", sink.columns);
    ArrayNode files = m.putArray("files");

    Dataset<Row> rows = batch.persist();
    try {
      long n = rows.count();
      if (n > 0) {
        Path tmp = new Path(out, "_lockstep_tmp/" + queryId + "-" + name + "-" + attempt);
        rows.coalesce(1).write().mode(SaveMode.ErrorIfExists).format(sink.format).options(sink.options).save(tmp.toString());
        Path part = null;
        for (FileStatus st : fs.listStatus(tmp)) {
          if (st.getPath().getName().startsWith("part-")) {
            part = st.getPath();
          }
        }
        if (part == null) {
          throw new IOException("batch " + batchId + ": Spark wrote no data file in " + tmp);
        }
        String file = "part-" + queryId + "-" + name + "-" + attempt + "." + sink.format;
        Path dst = new Path(out, file);
        if (!fs.rename(part, dst)) {
          throw new IOException("batch " + batchId + ": rename " + part + " to " + dst + " failed");
        }
        fs.delete(tmp, true);
        ObjectNode df = files.addObject();
        df.put("path", file);
        df.put("rows", n);
        df.put("bytes", fs.getFileStatus(dst).getLen());
      }
    } finally {
      rows.unpersist();
    }
    Crash.at(Crash.SINK_WRITE, batchId);
    byte[] data = (JSON.writeValueAsString(m) + "\n").getBytes(StandardCharsets.UTF_8);
    createIfAbsent(fs, entry, data);
    long written = 0;
    for (var f : files) {
      written += f.get("rows").asLong();
    }
    // Spark reports no output rows for foreachBatch: tell the Go side (before the progress).
    synchronized (System.out) {
      System.out.println("@@lockstep-sink {\"batchId\":" + batchId + ",\"rows\":" + written + "}");
      System.out.flush();
    }
  }

  /**
   * Creates the manifest entry only if no entry exists. A local folder gets the built-in engine's
   * contract (a temporary file linked into place: link(2) fails on an existing name); elsewhere
   * Hadoop's create without overwrite, which on S3A is not atomic (docs/spark.md).
   */
  private static void createIfAbsent(FileSystem fs, Path entry, byte[] data) throws IOException {
    if ("file".equals(fs.getScheme())) {
      java.nio.file.Path dst = Paths.get(entry.toUri());
      Files.createDirectories(dst.getParent());
      java.nio.file.Path tmp = dst.resolveSibling("." + dst.getFileName() + "." + attempt());
      Files.write(tmp, data);
      try (var ch = java.nio.channels.FileChannel.open(tmp, java.nio.file.StandardOpenOption.WRITE)) {
        ch.force(true);
      }
      try {
        Files.createLink(dst, tmp);
      } catch (FileAlreadyExistsException e) {
        // Another attempt committed the batch first: its files are the batch's.
      } finally {
        Files.deleteIfExists(tmp);
      }
      return;
    }
    try (FSDataOutputStream os = fs.create(entry, false)) {
      os.write(data);
    } catch (org.apache.hadoop.fs.FileAlreadyExistsException e) {
      // Another attempt committed the batch first.
    }
  }

  private static String attempt() {
    byte[] b = new byte[6];
    new SecureRandom().nextBytes(b);
    return HexFormat.of().formatHex(b);
  }
}
