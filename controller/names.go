package controller

import (
	"strings"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
)

// Names, labels and annotations of the objects the controller manages.
const (
	// Finalizer holds a query until its checkpoint retention has been applied.
	Finalizer = "streaming.lockstep.dev/checkpoint-retention"
	// LabelQuery names the query an object belongs to.
	LabelQuery = "streaming.lockstep.dev/query"
	// LabelComponent is "engine" on the engine's Deployment, pods and ConfigMap.
	LabelComponent = "app.kubernetes.io/component"
	// AnnotationSpecHash on the pod template is the hash of the ConfigMap's data, so that a
	// new spec rolls the engine.
	AnnotationSpecHash = "streaming.lockstep.dev/spec-hash"
	// AnnotationGeneration on the ConfigMap is the query generation it renders.
	AnnotationGeneration = "streaming.lockstep.dev/generation"

	// QueryKey is the ConfigMap key holding the query manifest the engine reads.
	QueryKey = "query.yaml"
	// CABundleKey is the ConfigMap key holding the store's CA bundle, when it has one.
	CABundleKey = "ca.crt"
	// TrustStoreKey is the ConfigMap key (binary data) holding, for a spark query whose store
	// has a CA bundle, the bundle and the controller's system CAs as a PKCS#12 trust store
	// (s3.Settings.TrustStore) for the executors' JVMs: S3A trusts the JVM's trust store only.
	TrustStoreKey = "truststore.p12"
	// ConfigMountPath is where the ConfigMap is mounted in the engine container.
	ConfigMountPath = "/etc/lockstep"
	// EngineContainer is the name of the engine's container.
	EngineContainer = "engine"
	// HealthPort is the engine's HTTP port: health (/healthz, /readyz), Prometheus metrics
	// (/metrics) and the query page (/).
	HealthPort = 8081
	// EnginePortName names HealthPort on the pod; probes and the PodMonitor
	// (config/prometheus) refer to it.
	EnginePortName = "http-metrics"
	// TerminationMessagePath is where the engine writes its last error before it exits.
	TerminationMessagePath = "/dev/termination-log"
	// StuckMessage starts the termination message of an engine stopped while stuck: no
	// trigger finished within its progress timeout, so its liveness probe failed and the
	// kubelet restarted it. The engine writes it; the query's status tells a liveness restart
	// from a crash by it.
	StuckMessage = "stopped while stuck: "

	// SparkConfKey is the ConfigMap key holding the Spark settings of a spark query's driver
	// on Kubernetes (a JSON object; no secret: credentials come from the environment).
	SparkConfKey = "spark-conf.json"
	// ExecutorPodKey is the ConfigMap key holding the executors' pod template (Spark's
	// spark.kubernetes.executor.podTemplateFile): placement, labels, resources and the
	// environment from Secret references, never a secret's value.
	ExecutorPodKey = "executor-pod.yaml"
	// EnvPodName and EnvPodIP carry the driver pod's name and IP (the downward API): Spark
	// owns the executors by the driver pod, and they connect back to its IP.
	EnvPodName = "LOCKSTEP_POD_NAME"
	EnvPodIP   = "LOCKSTEP_POD_IP"

	componentEngine = "engine"
	fieldOwner      = "lockstep-controller"
)

// EngineName returns the name of the Deployment and ConfigMap of a query.
func EngineName(query string) string { return query + "-engine" }

// EngineLabels returns the labels of a query's engine objects; the Deployment selects its pods
// by them.
func EngineLabels(q *v1.StreamingQuery) map[string]string {
	return map[string]string{
		LabelQuery:               q.Name,
		LabelComponent:           componentEngine,
		"app.kubernetes.io/name": "lockstep",
	}
}

// Overlaps reports whether two checkpoint locations are equal or one is inside the other:
// two queries on such locations would read or purge each other's files.
func Overlaps(a, b string) bool {
	a, b = checkpoint.CanonicalLocation(a)+"/", checkpoint.CanonicalLocation(b)+"/"
	return strings.HasPrefix(a, b) || strings.HasPrefix(b, a)
}
