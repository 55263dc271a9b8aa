package engine

import (
	"time"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
)

// Observer is told what a run does. Its methods are called from the
// engine's goroutine and should return quickly.
type Observer interface {
	// Started is called once the checkpoint is claimed and the components
	// are built, before the first batch.
	Started(Start)
	// Committed is called after each batch's commit entry is written.
	Committed(Progress)
}

// IdleObserver is an Observer that is also told, from the engine's goroutine, each time a
// trigger found no new data and so ran no batch. With Committed it tells an idle engine from a
// stuck one: a run that is neither committing nor finding nothing new is blocked.
type IdleObserver interface {
	Observer
	// Idle is called with the time the trigger found no new data.
	Idle(at time.Time)
}

// A StoreObserver is an Observer that is also told of every operation on the
// checkpoint's store: the logs, the state files and the sources' private
// files. StoreOperation is called by the goroutine that made the operation —
// the engine's, or a state store's snapshot writer — so it must be safe for
// concurrent use and return quickly.
type StoreObserver interface {
	Observer
	StoreOperation(StoreOperation)
}

// StoreOperation is one operation on the checkpoint's store.
type StoreOperation struct {
	// Op is one of StoreOps: get, create, put, list or delete.
	Op string
	// Duration is the whole operation, its retries included.
	Duration time.Duration
	// Retries counts the requests it retried (S3; 0 for a local folder).
	Retries int
	// Failed reports an error other than the outcomes a caller expects: a
	// missing object on get, a lost create-if-absent race on create.
	Failed bool
}

// The operations on a checkpoint's store that a StoreOperation names.
const (
	OpGet    = "get"
	OpCreate = "create"
	OpPut    = "put"
	OpList   = "list"
	OpDelete = "delete"
)

// StoreOps returns every operation a StoreOperation may name.
func StoreOps() []string { return []string{OpGet, OpCreate, OpPut, OpList, OpDelete} }

// Start describes a run as it begins.
type Start struct {
	QueryID  string           `json:"queryId"`
	Location string           `json:"checkpoint"`
	Owner    checkpoint.Owner `json:"owner"`
	// New reports a checkpoint created by this run.
	New bool `json:"new"`
	// Adopted reports a checkpoint that a Spark job Lockstep did not start wrote, which
	// this run (of the spark runtime) took over after the plan allowed it.
	Adopted bool `json:"adopted,omitempty"`
	// NextBatch is the first batch the run executes.
	NextBatch int64 `json:"nextBatch"`
	// Replay reports that NextBatch was planned by an earlier run that
	// stopped before committing it: it runs again with its logged offsets,
	// timestamp and watermark.
	Replay bool `json:"replay"`
	// LastCommitted is the newest committed batch, -1 if none.
	LastCommitted int64 `json:"lastCommitted"`
	// Trigger names the trigger: default, processingTime=<d>, availableNow, once.
	Trigger string `json:"trigger"`
	// Guarantee is the query's delivery guarantee and why.
	Guarantee Guarantee `json:"guarantee"`
	// Pinned holds the settings pinned by the checkpoint, in force for
	// this run whatever the spec says now.
	Pinned map[string]string `json:"pinned,omitempty"`
}

// Progress describes a committed batch.
type Progress struct {
	QueryID string `json:"queryId"`
	Batch   int64  `json:"batchId"`
	// Replay reports a batch planned by an earlier run and run again.
	Replay bool `json:"replay,omitempty"`
	// Timestamp is the batch's timestamp (as logged in offsets/N).
	Timestamp time.Time `json:"timestamp"`
	// NumInputRows counts the rows read from the sources, NumOutputRows
	// the rows handed to the sink, NumMalformedRows the records skipped or
	// dead-lettered (onMalformed).
	NumInputRows     int64 `json:"numInputRows"`
	NumOutputRows    int64 `json:"numOutputRows"`
	NumMalformedRows int64 `json:"numMalformedRows"`
	// Duration is the whole batch, from planning to commit.
	Duration time.Duration `json:"-"`
	// DurationMs holds the time per phase in milliseconds: latestOffset
	// (planning), walCommit (offsets/N), getBatch (reading), transform,
	// addBatch (sink), commitOffsets (commits/N), triggerExecution (all).
	DurationMs map[string]int64 `json:"durationMs"`
	// ProcessedRowsPerSecond is NumInputRows over Duration.
	ProcessedRowsPerSecond float64 `json:"processedRowsPerSecond"`
	// WatermarkMs is the batch's event-time watermark (ms since the epoch);
	// 0 when the query has none.
	WatermarkMs int64            `json:"watermarkMs"`
	Sources     []SourceProgress `json:"sources"`
	// Joins describes the static side each stream–static join joined against.
	Joins []JoinProgress `json:"joins,omitempty"`
	// StateOperators describes the state of each stateful step.
	StateOperators []StateOperatorProgress `json:"stateOperators,omitempty"`
	// S3 counts the S3 requests retried (by operation) and the uncertain
	// creates resolved by reading back since the previous batch, over the
	// checkpoint, sources and sink; absent when there were none.
	S3 *s3.StatsSnapshot `json:"s3,omitempty"`
}

// SourceProgress is one source's part of a batch.
type SourceProgress struct {
	Name             string `json:"name"`
	StartOffset      Offset `json:"startOffset,omitempty"`
	EndOffset        Offset `json:"endOffset"`
	NumInputRows     int64  `json:"numInputRows"`
	NumMalformedRows int64  `json:"numMalformedRows"`
	// LatestOffset is the newest offset the source had when the batch was planned, in the
	// form of EndOffset, when the source can tell (kafka: the partitions' high-water marks).
	LatestOffset Offset `json:"latestOffset,omitempty"`
	Lag          *int64 `json:"lag,omitempty"`
	// LagMs is the largest LagMs of the source's partitions, when one
	// knows it (see PartitionLag).
	LagMs *int64 `json:"lagMs,omitempty"`
	// Partitions is the lag per partition of a partitioned source (Kafka).
	Partitions []PartitionLag `json:"partitions,omitempty"`
}

// StopReason says why a run ended without an error.
type StopReason string

// Stop reasons.
const (
	// StopTriggerDone: an availableNow or once trigger finished its work.
	StopTriggerDone StopReason = "trigger-done"
	// StopRequested: Stop was called; the run ended at a batch boundary.
	StopRequested StopReason = "stopped"
	// StopSuspended: spec.suspend is true; no batch ran.
	StopSuspended StopReason = "suspended"
)

// Summary describes a whole run.
type Summary struct {
	QueryID string     `json:"queryId"`
	Reason  StopReason `json:"reason"`
	// Batches counts the batches this run committed.
	Batches          int   `json:"batches"`
	NumInputRows     int64 `json:"numInputRows"`
	NumOutputRows    int64 `json:"numOutputRows"`
	NumMalformedRows int64 `json:"numMalformedRows"`
	// LastCommitted is the newest committed batch, -1 if none.
	LastCommitted int64         `json:"lastCommitted"`
	Duration      time.Duration `json:"-"`
	DurationMs    int64         `json:"durationMs"`
}
