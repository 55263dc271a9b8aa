package dev.lockstep.spark;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.spark.TaskContext;
import org.apache.spark.internal.io.FileCommitProtocol;
import org.apache.spark.internal.io.FileNameSpec;
import org.apache.spark.util.TaskCompletionListener;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * How the files sink's one Spark job a batch writes (Spark's {@code
 * spark.sql.sources.commitProtocolClass} for those writes): each task writes its one data file
 * straight into the output folder, named by the prefix that the Go side gave the batch's attempt
 * (the write's option {@link #PREFIX}) and by the task's partition and attempt id, and commits
 * nothing: no temporary folder, no rename, no _SUCCESS. The job's files, each with the rows and
 * bytes its task wrote (the task's output metrics), go to {@link FilesSink}, whose Go parent lists
 * them in the batch's manifest entry: that entry is the commit, and a file no entry lists (a
 * failed task's, an aborted job's) is never read.
 */
public final class FilesCommitProtocol extends FileCommitProtocol implements Serializable {
  private static final long serialVersionUID = 1L;

  /** The write option (and so the job's Hadoop setting) naming the batch attempt's prefix. */
  static final String PREFIX = "lockstep.files.prefix";

  /** The files of each committed job, by prefix, until FilesSink takes them. */
  private static final ConcurrentHashMap<String, List<Written>> JOBS = new ConcurrentHashMap<>();

  private final String outputPath;
  /** The file this task writes; null until it opens one (each task has its own copy). */
  private String file;

  /** Spark's constructor (FileCommitProtocol.instantiate). */
  public FilesCommitProtocol(String jobId, String outputPath, boolean dynamicPartitionOverwrite) {
    if (dynamicPartitionOverwrite) {
      throw new IllegalArgumentException("the files sink does not overwrite partitions");
    }
    this.outputPath = outputPath;
  }

  @Override
  public void setupJob(JobContext job) {
    prefix(job.getConfiguration());
  }

  @Override
  public void commitJob(JobContext job, scala.collection.immutable.Seq<TaskCommitMessage> commits) {
    List<Written> files = new ArrayList<>();
    for (TaskCommitMessage m : CollectionConverters.asJava(commits)) {
      if (m.obj() instanceof Written w) {
        files.add(w);
      }
    }
    JOBS.put(prefix(job.getConfiguration()), files);
  }

  @Override
  public void abortJob(JobContext job) {
    // The files written are listed by no manifest entry: readers never see them.
  }

  @Override
  public void setupTask(TaskAttemptContext task) {}

  @Override
  @SuppressWarnings("deprecation")
  public String newTaskTempFile(TaskAttemptContext task, Option<String> dir, String ext) {
    return newTaskTempFile(task, dir, new FileNameSpec("", ext));
  }

  @Override
  public String newTaskTempFile(TaskAttemptContext task, Option<String> dir, FileNameSpec spec) {
    if (dir.isDefined()) {
      throw new UnsupportedOperationException("the files sink writes no partition folders");
    }
    if (file != null) {
      // One file a task, so that the task's output metrics are the file's.
      throw new IllegalStateException("a task of the files sink writes one file, and it wrote " + file);
    }
    TaskAttemptID id = task.getTaskAttemptID();
    file = prefix(task.getConfiguration()) + String.format("-%05d-%d", id.getTaskID().getId(), id.getId()) + spec.prefix() + spec.suffix();
    Path p = new Path(outputPath, file);
    try {
      // No checksum files beside the data: readers go by the manifest.
      p.getFileSystem(task.getConfiguration()).setWriteChecksum(false);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    return p.toString();
  }

  @Override
  public String newTaskTempFileAbsPath(TaskAttemptContext task, String absoluteDir, String ext) {
    throw new UnsupportedOperationException("the files sink writes no partition folders");
  }

  @Override
  public String newTaskTempFileAbsPath(TaskAttemptContext task, String absoluteDir, FileNameSpec spec) {
    throw new UnsupportedOperationException("the files sink writes no partition folders");
  }

  @Override
  public TaskCommitMessage commitTask(TaskAttemptContext task) {
    if (file == null) {
      return new TaskCommitMessage(null); // an empty partition writes no file
    }
    Written w = new Written(file);
    file = null;
    // The write's own count: Spark sets the task's output metrics after commitTask, and the task
    // completes (its listeners run) after that and before its result, this message, is sent.
    TaskContext ctx = TaskContext.get();
    ctx.addTaskCompletionListener((TaskCompletionListener) c -> {
      w.rows = c.taskMetrics().outputMetrics().recordsWritten();
      w.bytes = c.taskMetrics().outputMetrics().bytesWritten();
    });
    return new TaskCommitMessage(w);
  }

  @Override
  public void abortTask(TaskAttemptContext task) {
    if (file == null) {
      return;
    }
    Path p = new Path(outputPath, file);
    try {
      p.getFileSystem(task.getConfiguration()).delete(p, false);
    } catch (IOException e) {
      // A file no manifest entry lists is never read.
    }
  }

  /** Returns the files of the committed job of prefix, once. */
  static List<Written> take(String prefix) {
    List<Written> files = JOBS.remove(prefix);
    if (files == null) {
      throw new IllegalStateException("the files sink's job " + prefix + " committed no files");
    }
    return files;
  }

  private static String prefix(Configuration conf) {
    String p = conf.get(PREFIX);
    if (p == null || p.isEmpty()) {
      throw new IllegalStateException("a write with " + FilesCommitProtocol.class.getName() + " needs the option " + PREFIX);
    }
    return p;
  }

  /** One data file a task wrote: its name in the output folder, rows and bytes (-1: unknown). */
  static final class Written implements Serializable {
    private static final long serialVersionUID = 1L;

    final String path;
    long rows = -1;
    long bytes = -1;

    Written(String path) {
      this.path = path;
    }
  }
}
