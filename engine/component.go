package engine

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
)

// Row is one row: one value per column, in column order. A value is a
// string, int64, float64, bool, time.Time (UTC) or nil (null), following the
// column's type (v1.TypeString, TypeLong, TypeDouble, TypeBoolean,
// TypeTimestamp).
type Row []any

// Offset is a source's position in its own JSON. The engine stores it in the
// offsets log and hands it back to the source; it never looks inside.
type Offset = json.RawMessage

// Source reads one named input of a query. The engine calls its methods from
// one goroutine at a time; ctx bounds each call. A Source must be
// replayable: Read with offsets that Plan returned earlier, even in another
// process, yields the same rows.
type Source interface {
	// Plan is called before batch req.Batch is written to the offsets log.
	// It returns the end offset of the batch: the newest data after
	// req.Start, within the source's rate limit when req.Limit is set.
	// req.Start is nil for a source new to the checkpoint, whose data then
	// starts at the source's starting position. When no data is new,
	// Planned.HasData is false and Planned.End describes the same position
	// as req.Start (for a new source: its starting position); End is never
	// empty. Plan may record what it decided in the source's private
	// checkpoint files, so that Read can find it again; it must then cope
	// with a record left by a run that died before the offsets log entry
	// was written. An error stops the query.
	Plan(ctx context.Context, req PlanRequest) (Planned, error)

	// Read returns the rows of (req.Start, req.End], offsets that Plan
	// returned for this batch or for an earlier one (a replay after a
	// restart reads the logged offsets). It yields no rows when they are
	// equal. Records that do not parse follow the source's onMalformed
	// policy: fail is an error naming the file and line; skip and
	// deadLetter count them in ReadResult.Malformed. Any other error stops
	// the query; the batch is replayed by the next run. The rows returned
	// belong to the engine, which may change them (a select writes its
	// output into them): a source keeps none, and returns new rows when it
	// reads the same offsets again.
	Read(ctx context.Context, req ReadRequest) (ReadResult, error)
}

// PlanRequest is the input of Source.Plan.
type PlanRequest struct {
	// Batch is the batch being planned.
	Batch int64
	// Start is the end offset of the previous batch, nil if the source has
	// none in the checkpoint.
	Start Offset
	// Time is the batch's timestamp (logged as batchTimestampMs).
	Time time.Time
	// Limit says whether the source's rate limit (maxFilesPerTrigger, …)
	// applies; the once trigger clears it.
	Limit bool
}

// Planned is the output of Source.Plan.
type Planned struct {
	// End is the batch's end offset for the source.
	End Offset
	// HasData reports whether (Start, End] holds data.
	HasData bool
	// Backlog is what the source held beyond End when it planned the batch.
	Backlog
}

// Backlog is how far behind a source was when a batch was planned: what it
// held beyond the batch's end. Every field is optional; a source fills in
// what it can tell. The engine hands a batch's Backlog back to Read, which may
// complete it with what reading taught it (the age of the data), and reports
// it in the batch's progress; a batch replayed by a new process has none.
type Backlog struct {
	// Lag counts the records or files the source held beyond End.
	Lag *int64
	// Latest is the newest offset the source held, in the form of End; the
	// commit records it as latestOffset.
	Latest Offset
	// Partitions is the backlog of each partition of a partitioned source
	// (Kafka), in partition order.
	Partitions []PartitionLag
}

// ReadRequest is the input of Source.Read.
type ReadRequest struct {
	Batch      int64
	Start, End Offset
	// Time is the batch's timestamp as logged, the same on a replay.
	Time time.Time
	// Backlog is what Plan returned for this batch in this process; nil for a
	// batch planned by an earlier one (a replay after a restart).
	Backlog *Backlog
}

// ReadResult is the output of Source.Read.
type ReadResult struct {
	Rows []Row
	// Malformed counts the records skipped or dead-lettered.
	Malformed int64
	// Backlog is the request's Backlog completed with what reading taught
	// the source (for Kafka, the age of each partition's data); nil keeps the
	// request's.
	Backlog *Backlog
}

// PartitionLag is how far behind one partition of a source was when a batch
// was planned.
type PartitionLag struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Lag counts the records the partition held beyond the batch's end.
	Lag int64 `json:"lag"`
	// LagMs is how old, at the batch's timestamp, the newest record the
	// query had read from the partition up to the batch's end was (its
	// Kafka timestamp): the age of the data the query is behind by. 0 when
	// Lag is 0; nil when Lag is not 0 and the process has read no record of
	// the partition yet.
	LagMs *int64 `json:"lagMs,omitempty"`
}

// An AvailableNowSource fixes, when an availableNow run starts, the data it
// will deliver: later Plan calls in the run never go beyond what was
// available at now. Sources without it are read until they report no new
// data.
type AvailableNowSource interface {
	PrepareAvailableNow(ctx context.Context, now time.Time) error
}

// A PurgingSource deletes its private checkpoint files that only batches
// before oldest need. The engine calls it when it purges the logs.
type PurgingSource interface {
	Purge(ctx context.Context, oldest int64) error
}

// A RetainingSource can say whether it still holds what batches read: a rebuild of the
// state (Query.Rebuild) replays every committed batch from the source, so it needs the
// source to hold everything from the source's first recorded start through end, the end
// offset of the newest committed batch. Retained returns nil when it does, an error saying
// precisely what is gone when it does not ("Kafka partition orders-3 starts at offset 1,200
// now; the committed batches read it from offset 0"), and an error wrapping
// ErrRetentionUnknown when it could not find out (a broker unreachable). A source that is not
// a RetainingSource (rate, Nexmark) regenerates its input and always holds it.
type RetainingSource interface {
	Retained(ctx context.Context, end Offset) error
}

// ErrRetentionUnknown means a source could not find out whether it still holds what a
// rebuild would replay.
var ErrRetentionUnknown = errors.New("could not check what the source still holds")

// SourceEnv is what the engine gives a source's constructor.
type SourceEnv struct {
	// Name is the source's name in the spec.
	Name string
	// QueryID is the checkpoint's query id.
	QueryID string
	// Store holds the source's private checkpoint files: its keys are
	// relative to sources/<name>/ in the checkpoint. Log-like files should
	// be written with Create.
	Store checkpoint.Store
	// Open returns the folder of a location (local or s3://) with the
	// engine's S3 settings.
	Open FolderOpener
	// Logger is the engine's logger; it discards by default.
	Logger *slog.Logger
	// Getenv reads the engine's environment (a source's credentials, such
	// as Kafka SASL's); os.Getenv unless the engine was given WithEnv.
	Getenv func(string) string
	// Wake tells an idle query that the source may have new data: with the
	// default trigger the engine then plans the next batch at once instead
	// of after its idle poll. A source that learns of new data as it
	// arrives (a long-poll fetch) calls it then; one that never does is
	// asked again every idle poll. Wake never blocks and may be called from
	// any goroutine, as often as the source likes; calls while a batch runs
	// are folded into one plan after it. Never nil.
	Wake func()
}

// SourceConstructor builds a source from its spec. It validates the
// settings that the spec's own validation cannot (it may do I/O) and returns
// every problem it finds. Its errors, and those of the source's methods, do
// not name the source: the engine prefixes them with "source <name>: ".
type SourceConstructor func(ctx context.Context, spec *v1.Source, env SourceEnv) (Source, error)

// Sink is where a query's output goes. The engine calls Write from one
// goroutine at a time.
type Sink interface {
	// Write writes the rows of batch b and returns once they are committed
	// (durable and visible to readers as the sink defines it). The engine
	// calls it at most once per batch in a run, but a batch is written again
	// after a restart when the run that wrote it died before recording the
	// commit: an exactly-once sink then finds the batch already committed,
	// keyed by (b.QueryID, b.ID), and writes nothing. An error stops the
	// query; the batch is replayed by the next run.
	Write(ctx context.Context, b *Batch) error
}

// A ChunkReader is a Source that can hand a batch's rows over a chunk at a
// time, so that a batch is never held whole: the engine reads, transforms and
// writes a large batch (a big availableNow trigger) in bounded memory, and
// the sink writes the first chunks while the source reads the next.
type ChunkReader interface {
	// ReadChunks reads what Read reads, (req.Start, req.End], and hands the
	// rows to emit in chunks instead of returning them: each partition's
	// rows in order, partitions possibly interleaved. A chunk belongs to the
	// engine until emit returns; the source may then reuse the slice (not
	// the rows). The result's Rows is nil; Malformed and Backlog cover the
	// whole read. An error from emit stops the read and is returned.
	ReadChunks(ctx context.Context, req ReadRequest, emit func([]Row) error) (ReadResult, error)
}

// A ChunkWriter is a Sink that can take a batch a chunk at a time, with the
// same guarantee as Write: the batch is committed once, whole, by Commit.
// The engine uses it, with ChunkReader sources, for queries whose steps keep
// no row (filters, selects, a watermark), whose output order within a
// batch is free.
type ChunkWriter interface {
	// Open begins writing batch b, whose Rows are empty. It does what Write
	// does before the rows: an exactly-once sink fences an earlier run's
	// writer and finds whether a replayed batch is already committed (then
	// the writer it returns drops the rows and commits nothing).
	Open(ctx context.Context, b *Batch) (BatchWriter, error)
}

// WriteWhole writes batch b through w as one chunk: Open, Write of every row, Commit (Abort
// after a failed Write). A ChunkWriter's Sink.Write is this.
func WriteWhole(ctx context.Context, w ChunkWriter, b *Batch) error {
	bw, err := w.Open(ctx, b)
	if err != nil {
		return err
	}
	if err := bw.Write(ctx, b.Rows); err != nil {
		bw.Abort(ctx)
		return err
	}
	return bw.Commit(ctx)
}

// BatchWriter writes one batch a chunk at a time: Write any number of times,
// then Commit or Abort once.
type BatchWriter interface {
	// Write writes rows of the batch; they are the writer's only until it
	// returns. An error stops the query; the batch is replayed.
	Write(ctx context.Context, rows []Row) error
	// Commit returns once the batch is committed, as Sink.Write does.
	Commit(ctx context.Context) error
	// Abort gives up the batch after an error elsewhere: nothing of it
	// becomes visible that an exactly-once sink would not show anyway.
	Abort(ctx context.Context)
}

// Batch is what a sink writes.
type Batch struct {
	// QueryID and ID together identify the batch across restarts; a fresh
	// checkpoint has a new QueryID and counts batches from 0 again.
	QueryID string
	ID      int64
	// Time is the batch's timestamp, the same on a replay.
	Time    time.Time
	Columns v1.Columns
	Rows    []Row
}

// SinkEnv is what the engine gives a sink's constructor.
type SinkEnv struct {
	// QueryID is the checkpoint's query id.
	QueryID string
	// Columns are the columns of the rows the sink receives.
	Columns    v1.Columns
	OutputMode v1.OutputMode
	// Keys are the output columns that identify a row, for sinks that upsert
	// in update mode (the spec's UpsertKeys: declared keys, else the
	// aggregation's grouping keys); nil when the query has none. An empty,
	// non-nil Keys is a global aggregation: one row, replaced each batch.
	Keys []string
	// Open returns the folder of a location with the engine's S3 settings.
	Open FolderOpener
	// Stdout is where a console sink prints; os.Stdout by default.
	Stdout io.Writer
	// Logger is the engine's logger; it discards by default.
	Logger *slog.Logger
	// Getenv reads the engine's environment (a sink's connection settings);
	// os.Getenv unless the engine was given WithEnv.
	Getenv func(string) string
	// Reached reports that the sink is in the middle of writing a batch:
	// after its data is written, before the data is committed. Sinks call
	// it with PhaseSinkWrite; crash tests stop the process there.
	Reached func(phase Phase, batch int64)
}

// SinkConstructor builds a sink from its spec, validating what the spec's
// own validation cannot.
type SinkConstructor func(ctx context.Context, spec *v1.Sink, env SinkEnv) (Sink, error)

// FolderOpener opens the folder at a location: a local path, file:// or
// s3://bucket/prefix.
type FolderOpener func(location string) (checkpoint.Store, error)

// Phase names a point in the life of a batch, for WithPhaseHook.
type Phase string

// Phases, in the order a batch passes them.
const (
	// PhaseOffsetsWritten: offsets/N is written; nothing read yet.
	PhaseOffsetsWritten Phase = "offsets"
	// PhaseSinkWrite: the sink has written data but not committed it.
	PhaseSinkWrite Phase = "sink-write"
	// PhaseSinkCommitted: the sink committed the batch; commits/N is not
	// written yet.
	PhaseSinkCommitted Phase = "sink-commit"
	// PhaseCommitted: commits/N is written.
	PhaseCommitted Phase = "commit"
)

// Phases lists the phases in order.
func Phases() []Phase {
	return []Phase{PhaseOffsetsWritten, PhaseSinkWrite, PhaseSinkCommitted, PhaseCommitted}
}

// StaticTable is the right side of a stream–static join: a table read whole as a snapshot.
// A snapshot is named by the table's own JSON (a Delta version, a files listing), which the
// engine records in the offsets log of each batch that joins against it.
type StaticTable interface {
	// Latest returns the name of the table's newest snapshot. It is called once per batch
	// whose join's refresh is due, so it should be cheap (a log or folder listing).
	Latest(ctx context.Context) (Snapshot, error)
	// Read returns every row of exactly the named snapshot, in the static side's schema; a
	// snapshot that can no longer be read as it was is an error naming what changed.
	Read(ctx context.Context, snap Snapshot) ([]Row, error)
}

// Snapshot names one snapshot of a static table, in the table's own JSON.
type Snapshot = json.RawMessage

// StaticEnv is what a static table's constructor gets besides its spec.
type StaticEnv struct {
	// Join is the join's name, for messages and credentials.
	Join string
	// Open opens the table's location with the join's S3 settings.
	Open FolderOpener
	// Getenv reads the engine's environment (a table's connection settings);
	// os.Getenv unless the engine was given WithEnv.
	Getenv func(string) string
	Logger *slog.Logger
}

// StaticConstructor builds the static table of a join's static side.
type StaticConstructor func(ctx context.Context, spec *v1.StaticSide, env StaticEnv) (StaticTable, error)
