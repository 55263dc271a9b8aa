package dev.lockstep.spark;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonProperty;

/**
 * The plan the Go side compiles (engine/spark/plan.go is the definition; this class mirrors it
 * field for field). Every decision is already made: expressions are Spark SQL, options are
 * Spark's, names are valid; the runner only builds what it reads.
 */
@JsonIgnoreProperties(ignoreUnknown = false)
public final class Plan {
  public int version;
  public String appName;
  public String master;
  public Map<String, String> conf = new LinkedHashMap<>();
  public String checkpointLocation;
  public String queryName;
  public String queryId;
  public List<Source> sources = new ArrayList<>();
  public List<Step> steps = new ArrayList<>();
  public String outputMode;
  public Trigger trigger = new Trigger();
  public Sink sink;
  /** A rebuild's runner: {@link Runner#rebuild}. */
  public boolean rebuild;

  /** One streaming source, read then projected. */
  @JsonIgnoreProperties(ignoreUnknown = false)
  public static final class Source {
    public String name;
    public String format;
    public String path;
    public String schema;
    public Map<String, String> options = new LinkedHashMap<>();
    public List<String> project = new ArrayList<>();
    /** A condition on the projected rows, before then; null: keep all. */
    public String keep;
    public List<String> then = new ArrayList<>();
    /** The environment variable whose value is the reader's password option; null: none. */
    public String passwordEnv;
    /** A static side's files, read instead of path; null: read path. */
    public List<String> paths;
  }

  /** One transform step; exactly one field is set. */
  @JsonIgnoreProperties(ignoreUnknown = false)
  public static final class Step {
    public String filter;
    public List<String> select;
    public Watermark watermark;
    public Aggregate aggregate;
    public List<String> dropDuplicates;
    public Join join;
  }

  /**
   * A join: the rows so far (aliased l) joined with a right side (aliased r), Stream or Static,
   * after its Right steps; then Select.
   */
  @JsonIgnoreProperties(ignoreUnknown = false)
  public static final class Join {
    /** Dataset.join's joinType: inner, left_outer, right_outer, full_outer, left_semi. */
    public String type;
    /** A streaming source read for this join only. */
    public Source stream;
    /** A batch read (its name unused), cached for the run. */
    @JsonProperty("static")
    public Source staticSide;
    public List<Step> right = new ArrayList<>();
    /** Spark SQL over `l`.* and `r`.*. */
    public String condition;
    public List<String> select = new ArrayList<>();
  }

  @JsonIgnoreProperties(ignoreUnknown = false)
  public static final class Watermark {
    public String column;
    public String delay;
  }

  @JsonIgnoreProperties(ignoreUnknown = false)
  public static final class Aggregate {
    public List<String> groupBy = new ArrayList<>();
    public List<String> aggregates = new ArrayList<>();
  }

  @JsonIgnoreProperties(ignoreUnknown = false)
  public static final class Trigger {
    public String kind = "default";
    public long intervalMs;
  }

  @JsonIgnoreProperties(ignoreUnknown = false)
  public static final class Sink {
    public String kind;
    public String format;
    public String path;
    public Map<String, String> options = new LinkedHashMap<>();
    /** Delta and Delta MERGE: the table's partition columns, when the sink creates it. */
    public List<String> partitionColumns = new ArrayList<>();
    /** Delta MERGE: the condition over the table t and the batch s, compiled in Go. */
    public String mergeCondition;
    /** Kafka: the header naming each record's batch, {@code <query id>:<batch id>}. */
    public String batchHeader;
  }
}
