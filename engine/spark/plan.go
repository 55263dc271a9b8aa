package spark

import "strings"

// PlanVersion is the version of the plan format below; the runner refuses any other.
const PlanVersion = 1

// Plan is what the runner (spark/runner, dev.lockstep.spark.Plan mirrors it field for field)
// builds a Structured Streaming query from. Everything in it is decided here, in Go:
// expressions are Spark SQL, options are Spark's, names are Spark-valid. The runner reads
// the sources, applies the steps in order and starts the query on the sink.
type Plan struct {
	// Version is PlanVersion.
	Version int `json:"version"`
	// AppName is Spark's application name (namespace/name of the query).
	AppName string `json:"appName"`
	// Master is Spark's master URL: local[N] for now.
	Master string `json:"master"`
	// Conf is every Spark setting of the session: Lockstep's own, then the spec's passthrough.
	Conf map[string]string `json:"conf"`
	// CheckpointLocation is the query's location as Spark names it (a path, or s3a://).
	CheckpointLocation string `json:"checkpointLocation"`
	// QueryName is Spark's query name.
	QueryName string `json:"queryName"`
	// QueryID is the query's id, which the checkpoint's metadata holds; the sinks key what
	// makes a replayed batch harmless by it.
	QueryID string `json:"queryId"`
	// Sources are read, each projected to the query's columns, and unioned in order.
	Sources []Source `json:"sources"`
	// Steps are applied in order.
	Steps []Step `json:"steps"`
	// OutputMode is append, update or complete.
	OutputMode string `json:"outputMode"`
	// Trigger says when batches run.
	Trigger Trigger `json:"trigger"`
	// Sink is where each batch goes.
	Sink Sink `json:"sink"`
	// Rebuild runs the runner as a rebuild's (engine/spark/rebuild.go): for each line
	// "batch <i>" on its standard input, it starts the query (Trigger once, a noop sink),
	// which runs the checkpoint's uncommitted batch i, and answers with Spark's progress of
	// it on a line "@@lockstep-rebuilt {json}"; "stop" or the end of the input ends it.
	Rebuild bool `json:"rebuild,omitempty"`
}

// Source is one streaming source: spark.readStream.name(Name).format(Format).options(Options)
// .schema(Schema).load(Path), then selectExpr(Project...).
type Source struct {
	// Name is the source's Spark name ([A-Za-z0-9_]); with source evolution on, the
	// checkpoint keys the source's offsets by it. Empty: the source is not named (a Spark
	// job's checkpoint that named none, taken over).
	Name   string `json:"name,omitempty"`
	Format string `json:"format"`
	// Path is load's argument; empty for sources without one (kafka).
	Path string `json:"path,omitempty"`
	// Schema is the reader's schema in Spark's DDL form; empty when the format has its own.
	Schema  string            `json:"schema,omitempty"`
	Options map[string]string `json:"options"`
	// Project lists the Spark SQL expressions (with AS aliases) that turn the read rows into
	// the source's columns in the spec's order and types.
	Project []string `json:"project"`
	// Keep, when set, is a condition on Project's rows: the others are dropped before Then (a
	// Kafka value that did not parse, with onMalformed skip).
	Keep string `json:"keep,omitempty"`
	// Then is a second projection after Project (a Kafka JSON value is parsed in Project and
	// taken apart in Then); empty when none.
	Then []string `json:"then,omitempty"`
	// PasswordEnv names the runner's environment variable whose value the reader gets as its
	// password option (a JDBC static side): the plan never holds the password. Empty: none.
	PasswordEnv string `json:"passwordEnv,omitempty"`
	// Paths, when not nil, are the files a static side reads instead of Path: the folder's
	// files its snapshot lists (StaticPin), none for a folder that was empty.
	Paths []string `json:"paths"`
}

// Step is one transform step; exactly one field is set.
type Step struct {
	// Filter keeps the rows for which this Spark SQL expression is true.
	Filter string `json:"filter,omitempty"`
	// Select replaces the columns: Spark SQL expressions with AS aliases (selectExpr).
	Select []string `json:"select,omitempty"`
	// Watermark is withWatermark(Column, Delay).
	Watermark *Watermark `json:"watermark,omitempty"`
	// Aggregate is groupBy(GroupBy...).agg(Aggregates...).
	Aggregate *Aggregate `json:"aggregate,omitempty"`
	// DropDuplicates is dropDuplicates(columns...).
	DropDuplicates []string `json:"dropDuplicates,omitempty"`
	// Join joins the rows so far (aliased l) with a right side (aliased r).
	Join *Join `json:"join,omitempty"`
}

// Spark's join types (Dataset.join's joinType), as Join.Type names them.
const (
	JoinInner      = "inner"
	JoinLeftOuter  = "left_outer"
	JoinRightOuter = "right_outer"
	JoinFullOuter  = "full_outer"
	JoinLeftSemi   = "left_semi"
)

// Join is l.join(r, expr(Condition), Type).selectExpr(Select...), where l is the rows so far
// aliased "l" and r the right side aliased "r": Stream (a streaming source read for this join
// only, not unioned with the others) or Static (a batch read, cached for the run), then Right
// applied to it. Exactly one of Stream and Static is set.
type Join struct {
	Type string `json:"type"`
	// Stream is read with readStream, as a plan's sources are.
	Stream *Source `json:"stream,omitempty"`
	// Static is read with read (Name unused): Path (none for jdbc), Format, Schema, Options
	// and the password of PasswordEnv, then Project.
	Static *Source `json:"static,omitempty"`
	// Right are steps (filter, select, watermark) applied to the right side before the join.
	Right []Step `json:"right,omitempty"`
	// Condition is the join condition in Spark SQL over `l`.* and `r`.*: the keys' equality,
	// and a stream join's time bound.
	Condition string `json:"condition"`
	// Select names the output columns: Spark SQL expressions over `l`.* and `r`.* with AS
	// aliases.
	Select []string `json:"select"`
}

// Watermark is withWatermark's arguments.
type Watermark struct {
	Column string `json:"column"`
	// Delay is Spark's interval string ("600000 milliseconds").
	Delay string `json:"delay"`
}

// Aggregate is a grouped aggregation: Spark SQL expressions with AS aliases.
type Aggregate struct {
	GroupBy    []string `json:"groupBy"`
	Aggregates []string `json:"aggregates"`
}

// Trigger kinds.
const (
	TriggerDefault        = "default"
	TriggerProcessingTime = "processingTime"
	TriggerAvailableNow   = "availableNow"
	TriggerOnce           = "once"
)

// Trigger is the query's trigger: a kind, and the interval of processingTime.
type Trigger struct {
	Kind       string `json:"kind"`
	IntervalMs int64  `json:"intervalMs,omitempty"`
}

// Sink kinds the runner builds.
const (
	SinkDelta = "delta"
	// SinkDeltaMerge is Delta in update mode: a MERGE on MergeCondition in foreachBatch, made
	// idempotent by Delta's txnAppId/txnVersion (query id, batch id).
	SinkDeltaMerge = "deltaMerge"
	SinkConsole    = "console"
	// SinkNoop writes nothing: a rebuild's batches (Plan.Rebuild).
	SinkNoop  = "noop"
	SinkFiles = "files"
	// SinkKafka is Spark's Kafka writer in foreachBatch, each record headed lockstep-batch:
	// <query id>:<batch id>; the steps before it made the key and value columns.
	SinkKafka = "kafka"
	// SinkRows hands each batch's rows, the JSON objects the last step made (value), to the
	// Go parent, which writes and commits them with the built-in runtime's sink (rows.go): the
	// webhook and PostgreSQL sinks.
	SinkRows = "rows"
)

// Sink is where batches go.
type Sink struct {
	// Kind is one of the Sink* kinds: e.g. delta (Spark's native Delta sink), files
	// (foreachBatch writing each batch's data files in one Spark job, which the Go side then
	// commits in the files sink's manifest: files.go), rows (the Go sink writes the rows).
	Kind string `json:"kind"`
	// Format is the files sink's data format (json or parquet).
	Format  string            `json:"format,omitempty"`
	Path    string            `json:"path,omitempty"`
	Options map[string]string `json:"options"`
	// PartitionColumns are a Delta table's partition columns, in order, when the sink creates
	// the table (delta and deltaMerge).
	PartitionColumns []string `json:"partitionColumns,omitempty"`
	// MergeCondition is deltaMerge's MERGE condition over the table (aliased t) and the batch
	// (aliased s): the merge keys' null-safe equality, as grouping treats nulls; "true" for a
	// global aggregate (its one row). See MergeCondition.
	MergeCondition string `json:"mergeCondition,omitempty"`
	// BatchHeader is the kafka sink's header naming each record's batch.
	BatchHeader string `json:"batchHeader,omitempty"`
}

// MergeCondition is the Delta MERGE condition of the table t and the batch s by keys: each key
// equal null-safely (<=>, as grouping treats nulls), and "true" for no keys (a global
// aggregate's one row).
func MergeCondition(keys []string) string {
	if len(keys) == 0 {
		return "true"
	}
	on := make([]string, len(keys))
	for i, k := range keys {
		on[i] = "t." + quoteIdent(k) + " <=> s." + quoteIdent(k)
	}
	return strings.Join(on, " AND ")
}
