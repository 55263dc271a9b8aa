package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// StreamingQueryStatus is what the controller observed of a query, mostly read from its
// checkpoint.
type StreamingQueryStatus struct {
	// Phase summarises the query's state.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// QueryID is the id recorded in the checkpoint's metadata; sinks key idempotence by it.
	// +optional
	QueryID string `json:"queryId,omitempty"`
	// CheckpointLocation is the location in use.
	// +optional
	CheckpointLocation string `json:"checkpointLocation,omitempty"`
	// LatestPlannedBatch is the newest batch in the offsets log.
	// +optional
	LatestPlannedBatch *int64 `json:"latestPlannedBatch,omitempty"`
	// LatestCommittedBatch is the newest batch in the commit log.
	// +optional
	LatestCommittedBatch *int64 `json:"latestCommittedBatch,omitempty"`
	// LastProgress is the progress of the newest committed batch.
	// +optional
	LastProgress *BatchProgress `json:"lastProgress,omitempty"`
	// Sources are the per-source offsets and lag after the newest committed batch.
	// +optional
	// +listType=map
	// +listMapKey=name
	Sources []SourceStatus `json:"sources,omitempty"`
	// Lag is the total of the sources' lag: records (Kafka) or files not yet read, as the
	// engine measured it at the newest committed batch. Unset while the query is suspended:
	// nothing measures it then, and the last measure would only grow stale.
	// +optional
	Lag *int64 `json:"lag,omitempty"`
	// LagSeconds is how far behind the query is in time: the largest of the sources'
	// lagSeconds. Unset when no source can tell, and while the query is suspended.
	// +optional
	LagSeconds *int64 `json:"lagSeconds,omitempty"`
	// Guarantee is the query's delivery guarantee, from its sources and sink.
	// +optional
	Guarantee Guarantee `json:"guarantee,omitempty"`
	// GuaranteeReason says why the query has that guarantee and, for at-least-once, what a
	// reader must do.
	// +optional
	GuaranteeReason string `json:"guaranteeReason,omitempty"`
	// Conditions: Ready, Compatible, CheckpointReachable, Progressing.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Restarts is how often the engine container of the current engine pod has restarted
	// (its restartCount); a new pod, after a roll or a deleted pod, starts again from 0.
	// +optional
	Restarts int32 `json:"restarts"`
	// LastFailure is the engine's last error.
	// +optional
	LastFailure *Failure `json:"lastFailure,omitempty"`
	// Executors are a spark query's executor pods on Kubernetes: how many are ready of how
	// many the spec wants. Unset for the built-in engine.
	// +optional
	Executors *ExecutorsStatus `json:"executors,omitempty"`
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ExecutorsStatus counts a spark query's executor pods.
type ExecutorsStatus struct {
	// Ready counts the executor pods that are running and ready.
	Ready int32 `json:"ready"`
	// Wanted is spec.runtime.spark.instances while the query runs, 0 while it is stopped.
	Wanted int32 `json:"wanted"`
	// Summary is "ready/wanted", as the Executors column prints it.
	Summary string `json:"summary"`
	// Unschedulable counts the executor pods the scheduler cannot place (FailedScheduling).
	// +optional
	Unschedulable int32 `json:"unschedulable,omitempty"`
	// Message is the scheduler's reason for one of them.
	// +optional
	Message string `json:"message,omitempty"`
}

// Phase summarises a query's state.
// +kubebuilder:validation:Enum=Pending;Running;Rebuilding;Suspended;Failed;Blocked;Completed
type Phase string

// Phases.
const (
	// PhasePending: the engine is not running yet.
	PhasePending Phase = "Pending"
	// PhaseRunning: the engine is running batches.
	PhaseRunning Phase = "Running"
	// PhaseSuspended: spec.suspend stopped the query.
	PhaseSuspended Phase = "Suspended"
	// PhaseFailed: the engine stopped with an error.
	PhaseFailed Phase = "Failed"
	// PhaseBlocked: a spec change was refused (for example by the checkpoint); the last good
	// spec keeps running or the query waits.
	PhaseBlocked Phase = "Blocked"
	// PhaseCompleted: a trigger that ends (availableNow, once) has ended.
	PhaseCompleted Phase = "Completed"
	// PhaseRebuilding: the engine rebuilds the state for a change the spec accepted with
	// spec.onIncompatibleChange: rebuild, before it runs batches again (docs/rebuild.md).
	PhaseRebuilding Phase = "Rebuilding"
)

// Guarantee is a delivery guarantee.
// +kubebuilder:validation:Enum=exactly-once;at-least-once;none
type Guarantee string

// Delivery guarantees.
const (
	GuaranteeExactlyOnce Guarantee = "exactly-once"
	GuaranteeAtLeastOnce Guarantee = "at-least-once"
	GuaranteeNone        Guarantee = "none"
)

// BatchProgress is the progress of one committed batch, as recorded in commits/<N>.
type BatchProgress struct {
	// Batch is the batch id.
	Batch int64 `json:"batch"`
	// Timestamp is when the batch was planned (batchTimestampMs).
	// +optional
	Timestamp metav1.Time `json:"timestamp,omitzero"`
	// InputRows counts the rows read from all sources.
	InputRows int64 `json:"inputRows"`
	// OutputRows counts the rows written to the sink.
	OutputRows int64 `json:"outputRows"`
	// InputRowsPerSecond is the rate at which rows arrived since the previous batch, rounded.
	// +optional
	InputRowsPerSecond int64 `json:"inputRowsPerSecond,omitempty"`
	// ProcessedRowsPerSecond is the rate at which the batch processed its rows, rounded.
	// +optional
	ProcessedRowsPerSecond int64 `json:"processedRowsPerSecond,omitempty"`
	// DurationMs is the time spent per phase in milliseconds, keyed as Spark does:
	// latestOffset, walCommit, getBatch, addBatch, commit, triggerExecution.
	// +optional
	DurationMs map[string]int64 `json:"durationMs,omitempty"`
	// Watermark is the event-time watermark in force for the batch.
	// +optional
	Watermark *metav1.Time `json:"watermark,omitempty"`
	// MalformedRows counts records that did not parse (skipped or dead-lettered).
	// +optional
	MalformedRows int64 `json:"malformedRows,omitempty"`
	// LateRows counts rows dropped by stateful steps for being older than the watermark.
	// +optional
	LateRows int64 `json:"lateRows,omitempty"`
	// StateRows counts the rows in all state stores after the batch.
	// +optional
	StateRows int64 `json:"stateRows,omitempty"`
}

// SourceStatus is one source's position.
type SourceStatus struct {
	// Name is the source's name in the spec.
	Name string `json:"name"`
	// Offsets is the source's end offset of the newest committed batch, in the JSON form the
	// offsets log records (for Kafka {"topic":{"partition":next offset}}).
	// +optional
	Offsets string `json:"offsets,omitempty"`
	// Lag is what the source has not read yet: records for Kafka, files for files and delta.
	// Unset while the query is suspended.
	// +optional
	Lag *int64 `json:"lag,omitempty"`
	// LagSeconds is how old, at the newest committed batch's time, the newest record that
	// batch read was, where records remained beyond it (for Kafka the largest over the
	// partitions); 0 when nothing remained. Unset when the source cannot tell (records
	// without timestamps, files) and while the query is suspended.
	// +optional
	LagSeconds *int64 `json:"lagSeconds,omitempty"`
}

// Failure is an error that stopped the engine.
type Failure struct {
	// Time is when it happened.
	// +optional
	Time metav1.Time `json:"time,omitzero"`
	// Batch is the batch that was running, if any.
	// +optional
	Batch *int64 `json:"batch,omitempty"`
	// Message is the error.
	Message string `json:"message"`
}

// Condition types of a StreamingQuery.
const (
	// ConditionReady is True while the engine runs the current spec (or has completed it).
	ConditionReady = "Ready"
	// ConditionCompatible is False when the spec changes in a way the checkpoint forbids.
	ConditionCompatible = "Compatible"
	// ConditionCheckpointReachable is False when the checkpoint cannot be read.
	ConditionCheckpointReachable = "CheckpointReachable"
	// ConditionProgressing is True while batches commit.
	ConditionProgressing = "Progressing"
)

// Condition reasons of a StreamingQuery.
const (
	ReasonRunning                  = "Running"
	ReasonSuspended                = "Suspended"
	ReasonCompleted                = "Completed"
	ReasonEngineFailed             = "EngineFailed"
	ReasonInvalidSpec              = "InvalidSpec"
	ReasonCompatibleChange         = "CompatibleChange"
	ReasonIncompatibleChange       = "IncompatibleChange"
	ReasonNoCheckpoint             = "NoCheckpoint"
	ReasonCheckpointOwnedElsewhere = "CheckpointOwnedElsewhere"
	ReasonCheckpointUnreachable    = "CheckpointUnreachable"
	ReasonCheckpointRead           = "CheckpointRead"
	ReasonBatchesCommitting        = "BatchesCommitting"
	ReasonIdle                     = "Idle"
	// ReasonEngineStarting: the engine pod is being created or is not ready yet.
	ReasonEngineStarting = "EngineStarting"
	// ReasonUnschedulable: the scheduler cannot place the engine pod, or none of a spark
	// query's executor pods, so no batch runs; the message has the scheduler's reason.
	ReasonUnschedulable = "Unschedulable"
	// ReasonEngineRestarted: the engine container restarted after a failure (a crash, or its
	// liveness probe found it stuck) and has not yet shown that it works again: no batch
	// committed since, and it has run for less than its liveness bound.
	ReasonEngineRestarted = "EngineRestarted"
	// ReasonStoreRefused: the query cannot use its CheckpointStore (missing, namespace not
	// allowed, location outside the namespace's prefix, credentials Secret without its keys).
	ReasonStoreRefused = "StoreRefused"
	// ReasonSecretMissing: the store's credentials Secret does not exist in the query's
	// namespace (yet); the message names it. The engine runs once it exists.
	ReasonSecretMissing = "SecretMissing"
	// ReasonRebuilding: the engine rebuilds the state from the retained input; the message
	// says how many batches of how many it has replayed.
	ReasonRebuilding = "Rebuilding"
)
