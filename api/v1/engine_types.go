package v1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// EngineSpec shapes the engine pod of a query on Kubernetes, in the spirit of the Flink
// operator's podTemplate but limited to what a platform needs: identity, scheduling, metadata,
// extra environment and the liveness bound. The container itself (image, command, probes,
// security context, mounts) stays the controller's. Outside Kubernetes it is ignored.
type EngineSpec struct {
	// ServiceAccountName is the engine pod's service account, in the query's namespace: for
	// IAM roles for service accounts (web identity) or workload identity. Default: the
	// controller's --engine-service-account, else the namespace's default. The Kubernetes API
	// token is never mounted (the engine does not talk to the API server); web identity
	// platforms inject a token of their own.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// NodeSelector must match a node's labels for the engine pod to be scheduled there.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations let the engine pod run on nodes with matching taints.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Affinity constrains the nodes the engine pod runs on, by node and pod labels.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// PriorityClassName is the engine pod's PriorityClass.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// ImagePullSecrets name Secrets in the query's namespace that pull the engine image.
	// +optional
	// +listType=atomic
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// Labels are added to the engine pod's labels. The controller's own labels
	// (app.kubernetes.io/name, app.kubernetes.io/component, streaming.lockstep.dev/*) cannot
	// be set here.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are added to the engine pod's annotations (for example a service mesh's or
	// a log collector's). Keys under streaming.lockstep.dev/ are the controller's.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// EnvFrom adds every key of the named ConfigMaps and Secrets, from the query's namespace,
	// to the engine's environment (for example credentials of a source that the spec does not
	// wire itself). Variables the controller sets itself win over these.
	// +optional
	// +listType=atomic
	EnvFrom []corev1.EnvFromSource `json:"envFrom,omitempty"`
	// ProgressTimeout is how long the engine may go without finishing a trigger (a batch
	// committed, or no new data found) before its liveness probe fails and Kubernetes
	// restarts it. Default: three processingTime intervals, at least 5m. Set it above the
	// longest batch you expect: a batch that outlasts it is restarted, and replayed. On the
	// spark runtime the first trigger after a start gets 10m more, for the driver's start.
	// +optional
	ProgressTimeout Duration `json:"progressTimeout,omitempty"`
}

// MinProgressTimeout is the least default bound of [StreamingQuerySpec.ProgressTimeout].
const MinProgressTimeout = 5 * time.Minute

// ProgressTimeout returns how long the engine may go without finishing a trigger before it
// counts as stuck: spec.engine.progressTimeout when set, else three processingTime intervals
// and at least [MinProgressTimeout]. A trigger that never fires on its own (once,
// availableNow) gets MinProgressTimeout for its one run. An unparsable value yields the default;
// Validate refuses it.
func (s *StreamingQuerySpec) ProgressTimeout() time.Duration {
	if d, err := s.Engine.ProgressTimeout.Parse(); err == nil && d > 0 {
		return d
	}
	return max(MinProgressTimeout, 3*s.Trigger.Interval())
}

// SparkStartGrace is what the first trigger of a spark-runtime engine may take beyond
// [StreamingQuerySpec.ProgressTimeout]: the driver's JVM start, the executors' scheduling and
// start, and Spark's planning of the first batch, which take minutes on a crowded cluster.
const SparkStartGrace = 10 * time.Minute

// StartTimeout returns how long the engine may go, from its start, before its first trigger
// finishes: ProgressTimeout, plus [SparkStartGrace] on the spark runtime.
func (s *StreamingQuerySpec) StartTimeout() time.Duration {
	if s.Runtime.Spark != nil {
		return s.ProgressTimeout() + SparkStartGrace
	}
	return s.ProgressTimeout()
}
