package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StreamingQuery is a streaming query run as micro-batches: named sources, ordered transform
// steps, one sink, a trigger and a checkpoint. The controller runs one engine pod per query and
// reports progress in status.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sq,categories=lockstep
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Batch",type=integer,JSONPath=`.status.latestCommittedBatch`
// +kubebuilder:printcolumn:name="Lag",type=integer,JSONPath=`.status.lag`
// +kubebuilder:printcolumn:name="Guarantee",type=string,JSONPath=`.status.guarantee`
// +kubebuilder:printcolumn:name="Executors",type=string,JSONPath=`.status.executors.summary`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Store",type=string,JSONPath=`.spec.checkpoint.store`,priority=1
// +kubebuilder:printcolumn:name="Location",type=string,JSONPath=`.status.checkpointLocation`,priority=1
// +kubebuilder:printcolumn:name="Restarts",type=integer,JSONPath=`.status.restarts`,priority=1
type StreamingQuery struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec StreamingQuerySpec `json:"spec"`
	// +optional
	Status StreamingQueryStatus `json:"status,omitzero"`
}

// StreamingQueryList is a list of StreamingQuery.
//
// +kubebuilder:object:root=true
type StreamingQueryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StreamingQuery `json:"items"`
}

// StreamingQuerySpec is what a user writes: where rows come from, how they are transformed,
// where they go, and how often. It is the one model of a query that the engine, controller,
// webhook, Terraform provider and CLI share. See docs/spec.md.
type StreamingQuerySpec struct {
	// Sources are read and unioned; they must yield the same columns. A source that a stream
	// join names (transform[].join.stream.source) is not unioned: it is the join's right side.
	// Each has a stable name under which the checkpoint keys its offsets: renaming a source
	// starts it afresh.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	Sources []Source `json:"sources"`

	// Transform is the ordered list of steps applied to the unioned rows. Omitted: rows go to
	// the sink unchanged.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	Transform []Step `json:"transform,omitempty"`

	// Sink is where each batch's output rows go.
	Sink Sink `json:"sink"`

	// OutputMode says which rows each batch writes: append (only new rows), update (rows that
	// changed) or complete (the whole result). Default append.
	// +optional
	// +kubebuilder:default=append
	OutputMode OutputMode `json:"outputMode,omitempty"`

	// Trigger says when batches run. Omitted: the next batch starts as soon as the last ends.
	// +optional
	Trigger Trigger `json:"trigger,omitzero"`

	// Checkpoint says where the query's progress and state live.
	// +optional
	// +kubebuilder:default={}
	Checkpoint Checkpoint `json:"checkpoint,omitzero"`

	// StateStore configures the state of stateful steps.
	// +optional
	// +kubebuilder:default={}
	StateStore StateStore `json:"stateStore,omitzero"`

	// Suspend stops the query at a batch boundary and keeps it stopped. Default false.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// OnIncompatibleChange says what becomes of a change the checkpoint cannot survive when
	// only the state stands in its way (new grouping keys, another window, an aggregate or
	// dedup added, more state partitions...; docs/rebuild.md). refuse (the default) rejects
	// it. rebuild accepts it when the checkpoint still records every batch's input and the
	// sources still hold it: the runtime (the built-in engine, or Spark) then rebuilds the
	// state for the new spec from the retained input, batch by batch as the offsets log
	// recorded them, writing no output, and runs on from the next batch (status Rebuilding
	// meanwhile). Changes to the sources or the sink are refused either way.
	// +optional
	OnIncompatibleChange IncompatibleChangePolicy `json:"onIncompatibleChange,omitempty"`

	// Resources are the compute resources of the engine pod on Kubernetes. A resource (cpu,
	// memory) with neither a request nor a limit gets the controller's default request
	// (cpu 100m, memory 256Mi).
	// +optional
	Resources ResourceRequirements `json:"resources,omitzero"`

	// Runtime selects what runs the query: the built-in engine (omitted) or Apache Spark
	// Structured Streaming (spark). Changing it on an existing checkpoint is rejected: the
	// two keep different checkpoint formats. See docs/spark.md.
	// +optional
	Runtime Runtime `json:"runtime,omitzero"`

	// Engine shapes the engine pod on Kubernetes: service account, scheduling, labels and
	// annotations, image pull secrets, extra environment and the liveness bound.
	// +optional
	Engine EngineSpec `json:"engine,omitzero"`
}

// IncompatibleChangePolicy is what a change the checkpoint refuses does (spec.onIncompatibleChange).
// +kubebuilder:validation:Enum=refuse;rebuild
type IncompatibleChangePolicy string

// Incompatible change policies.
const (
	// OnIncompatibleRefuse rejects the change: revert it or start fresh.
	OnIncompatibleRefuse IncompatibleChangePolicy = "refuse"
	// OnIncompatibleRebuild rebuilds the state from the retained input when that answers the
	// refusal.
	OnIncompatibleRebuild IncompatibleChangePolicy = "rebuild"
)

// OutputMode says which rows each batch writes to the sink.
// +kubebuilder:validation:Enum=append;update;complete
type OutputMode string

// Output modes, with Spark's meaning.
const (
	// OutputAppend writes only rows that will never change: every row of a stateless query, a
	// window once the watermark closes it, a first occurrence after dropDuplicates.
	OutputAppend OutputMode = "append"
	// OutputUpdate writes the rows that changed in the batch.
	OutputUpdate OutputMode = "update"
	// OutputComplete writes the whole result every batch; it needs an aggregation.
	OutputComplete OutputMode = "complete"
)

// OutputModes lists every output mode.
func OutputModes() []OutputMode { return []OutputMode{OutputAppend, OutputUpdate, OutputComplete} }

// Trigger says when batches run. At most one field may be set; none set means the next batch
// starts as soon as the last one ends (after a short poll when no data is new).
// +kubebuilder:validation:XValidation:rule="[has(self.processingTime), has(self.availableNow) && self.availableNow, has(self.once) && self.once].filter(x, x).size() <= 1",message="at most one of processingTime, availableNow, once may be set"
type Trigger struct {
	// ProcessingTime runs a batch every interval (a Go duration such as 30s or 1m); a
	// missed boundary starts the next batch at once.
	// +optional
	ProcessingTime Duration `json:"processingTime,omitempty"`
	// AvailableNow processes everything available at start, in batches that respect the
	// sources' rate limits, then stops.
	// +optional
	AvailableNow bool `json:"availableNow,omitempty"`
	// Once processes everything available at start in one batch, ignoring rate limits, then stops.
	// +optional
	Once bool `json:"once,omitempty"`
}

// Checkpoint says where the query's checkpoint lives and how long its logs are kept.
type Checkpoint struct {
	// Location is a local path, a file:// URL or an s3://bucket/prefix. On Kubernetes it is
	// defaulted from Store's location template. Changing it starts the query afresh.
	// +optional
	Location string `json:"location,omitempty"`
	// Store names the CheckpointStore (cluster-scoped) that holds the checkpoint on Kubernetes.
	// +optional
	Store string `json:"store,omitempty"`
	// MinBatchesToRetain is how many batches of every log are kept. Default 100.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	MinBatchesToRetain int32 `json:"minBatchesToRetain,omitempty"`
	// Retention says what happens to the checkpoint when the query is deleted: Retain (default)
	// or Delete.
	// +optional
	// +kubebuilder:default=Retain
	Retention RetentionPolicy `json:"retention,omitempty"`
}

// RetentionPolicy says what happens to a checkpoint when its query is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type RetentionPolicy string

// Retention policies.
const (
	RetentionRetain RetentionPolicy = "Retain"
	RetentionDelete RetentionPolicy = "Delete"
)

// StateStore configures the state kept by stateful steps.
type StateStore struct {
	// Partitions is the number of partitions that state keys are hashed into. Default 8. It is
	// pinned by the checkpoint at the first batch and cannot change afterwards.
	// +optional
	// +kubebuilder:default=8
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	Partitions int32 `json:"partitions,omitempty"`
}

// ResourceRequirements are the compute resources of the engine pod, as in a Pod's container.
// Keys are resource names such as cpu and memory.
type ResourceRequirements struct {
	// Requests are the resources the engine pod is scheduled with, as quantities (500m, 1Gi).
	// +optional
	Requests map[string]resource.Quantity `json:"requests,omitempty"`
	// Limits are the most the engine pod may use, as quantities (1, 2Gi).
	// +optional
	Limits map[string]resource.Quantity `json:"limits,omitempty"`
}
