package v1

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Runtime selects what runs the query: the built-in engine (Runtime empty) or Apache Spark
// Structured Streaming (Spark set). See docs/spark.md. The runtime is recorded in the
// checkpoint: the two write different checkpoint formats, so changing it on an existing
// checkpoint is rejected by the planner.
type Runtime struct {
	// Spark runs the query on Apache Spark Structured Streaming (4.2) instead of the built-in
	// engine: on Kubernetes the driver runs in the engine pod and the executors
	// (spec.runtime.spark.instances) run as pods of their own; `lockstep run` runs it in local
	// mode, in one JVM. Omitted: the built-in engine.
	// +optional
	Spark *SparkRuntime `json:"spark,omitempty"`
}

// RuntimeName names a runtime as the CLI's --runtime flag and the checkpoint's shape do.
type RuntimeName string

// Runtime names.
const (
	// RuntimeLockstep is the built-in micro-batch engine.
	RuntimeLockstep RuntimeName = "lockstep"
	// RuntimeSpark is Apache Spark Structured Streaming.
	RuntimeSpark RuntimeName = "spark"
)

// RuntimeNames lists every runtime name.
func RuntimeNames() []RuntimeName { return []RuntimeName{RuntimeLockstep, RuntimeSpark} }

// Name returns the runtime's name: spark when Spark is set, else lockstep.
func (r *Runtime) Name() RuntimeName {
	if r.Spark != nil {
		return RuntimeSpark
	}
	return RuntimeLockstep
}

// SparkRuntime is Spark's sizing and extra configuration. The state partitions
// (spec.stateStore.partitions) become spark.sql.shuffle.partitions.
type SparkRuntime struct {
	// Driver sizes the Spark driver: on Kubernetes, the JVM in the engine pod that plans the
	// batches and tracks offsets (spec.resources, when set, sizes its pod instead); in local
	// mode, the one JVM that runs everything.
	// +optional
	Driver SparkProcess `json:"driver,omitzero"`
	// Executor sizes each executor pod on Kubernetes. In local mode the executor's cores are
	// the driver's task slots (local[cores]); its memory applies on Kubernetes only.
	// +optional
	Executor SparkProcess `json:"executor,omitzero"`
	// Instances is the number of executor pods on Kubernetes. Default 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Instances int32 `json:"instances,omitempty"`
	// Conf passes Spark settings through (spark.* keys). The keys Lockstep sets itself
	// (see docs/spark.md: master, app name, shuffle partitions, checkpoint, session time zone,
	// source evolution, S3A endpoint and credentials, Delta's extension and catalog, and the
	// sizing above) are refused.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Conf map[string]string `json:"conf,omitempty"`
}

// SparkProcess sizes a Spark driver or executor.
type SparkProcess struct {
	// Cores is the number of task slots (an executor's spark.executor.cores; local[cores] in
	// local mode) and, when set, the CPU the pod requests on Kubernetes: set it to reserve
	// whole cores. Default 2 slots, and a request of 250m CPU per pod (no CPU limit), so that
	// a driver and its executors fit a small node.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	Cores int32 `json:"cores,omitempty"`
	// Memory is the JVM heap, as a quantity (1Gi). Default 1Gi. On Kubernetes the pod
	// requests, and is limited to, the heap plus Spark's overhead (max(384Mi, 10%)).
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
}

// Spark sizing defaults.
const (
	DefaultSparkCores     = 2
	DefaultSparkInstances = 1
)

// DefaultSparkMemory is the default heap of the driver and of each executor.
var DefaultSparkMemory = resource.MustParse("1Gi")

// DefaultSparkCPURequest is the CPU a driver or executor pod requests on Kubernetes when its
// cores are not set: well under a core, so that a driver and its executors schedule on a
// 2-core node. Their CPU is not limited.
var DefaultSparkCPURequest = resource.MustParse("250m")

// MaxSparkConf is the most Spark settings spec.runtime.spark.conf may pass through.
const MaxSparkConf = 64

// sparkOwnedConf are the Spark settings Lockstep sets itself: a key equal to one, or under a
// prefix ending in '.', is refused in spec.runtime.spark.conf.
var sparkOwnedConf = []string{
	"spark.master",
	"spark.app.name",
	"spark.submit.",
	"spark.driver.cores",
	"spark.driver.memory",
	"spark.executor.cores",
	"spark.executor.memory",
	"spark.executor.instances",
	"spark.sql.shuffle.partitions",
	"spark.sql.streaming.checkpointLocation",
	"spark.sql.session.timeZone",
	"spark.sql.streaming.queryEvolution.",
	"spark.sql.streaming.offsetLog.",
	"spark.sql.extensions",
	"spark.sql.catalog.spark_catalog",
	"spark.hadoop.fs.s3a.",
	"spark.ui.enabled",
	"spark.sql.warehouse.dir",
}

// SparkOwnedConf returns the Spark settings (keys, or prefixes ending in '.') that Lockstep
// sets itself and spec.runtime.spark.conf refuses.
func SparkOwnedConf() []string { return append([]string(nil), sparkOwnedConf...) }

// sparkOwned reports the owned key or prefix that key falls under, "" if none.
func sparkOwned(key string) string {
	for _, k := range sparkOwnedConf {
		if key == k || strings.HasSuffix(k, ".") && strings.HasPrefix(key, k) {
			return k
		}
	}
	return ""
}

func (r *Runtime) validate(p *field.Path) field.ErrorList {
	if r.Spark == nil {
		return nil
	}
	return r.Spark.validate(p.Child("spark"))
}

func (s *SparkRuntime) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, s.Driver.validate(p.Child("driver"))...)
	errs = append(errs, s.Executor.validate(p.Child("executor"))...)
	if s.Instances < 0 {
		errs = append(errs, field.Invalid(p.Child("instances"), s.Instances, "must be at least 1"))
	}
	cp := p.Child("conf")
	if len(s.Conf) > MaxSparkConf {
		errs = append(errs, field.TooMany(cp, len(s.Conf), MaxSparkConf))
	}
	keys := make([]string, 0, len(s.Conf))
	for k := range s.Conf {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch owned := sparkOwned(k); {
		case !strings.HasPrefix(k, "spark."):
			errs = append(errs, field.Invalid(cp.Key(k), k, "a Spark setting starts with spark."))
		case owned == "spark.sql.shuffle.partitions":
			errs = append(errs, field.Forbidden(cp.Key(k), "Lockstep sets it from spec.stateStore.partitions; set that instead"))
		case owned != "":
			errs = append(errs, field.Forbidden(cp.Key(k), fmt.Sprintf("Lockstep sets %s itself (docs/spark.md lists the keys it owns)", owned)))
		case k == SparkDriverJavaOptions || k == SparkExecutorJavaOptions:
			errs = append(errs, validateJavaOptions(cp.Key(k), s.Conf[k], strings.Split(k, ".")[1])...)
		}
	}
	return errs
}

// The Spark settings that carry JVM options. Lockstep starts the driver's JVM itself and adds
// the driver's; Spark adds the executors'.
const (
	SparkDriverJavaOptions   = "spark.driver.extraJavaOptions"
	SparkExecutorJavaOptions = "spark.executor.extraJavaOptions"
)

// JavaOptions splits a JVM options setting at white space (quotes are not interpreted).
func JavaOptions(v string) []string { return strings.Fields(v) }

// validateJavaOptions refuses, as Spark does, a heap size among a driver's or executors' JVM
// options, and Spark settings passed as system properties, which would get past the keys
// Lockstep owns.
func validateJavaOptions(p *field.Path, v, process string) field.ErrorList {
	var errs field.ErrorList
	for _, o := range JavaOptions(v) {
		switch {
		case strings.HasPrefix(o, "-Xmx"):
			errs = append(errs, field.Invalid(p, o, fmt.Sprintf("the heap is spec.runtime.spark.%s.memory: set that instead", process)))
		case strings.HasPrefix(o, "-Dspark."):
			errs = append(errs, field.Invalid(p, o, "pass Spark settings as keys of spec.runtime.spark.conf, not as system properties"))
		}
	}
	return errs
}

func (s *SparkProcess) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Cores < 0 {
		errs = append(errs, field.Invalid(p.Child("cores"), s.Cores, "must be at least 1"))
	}
	if s.Memory != nil && s.Memory.Cmp(resource.MustParse("128Mi")) < 0 {
		errs = append(errs, field.Invalid(p.Child("memory"), s.Memory.String(), "must be at least 128Mi: Spark does not start with less"))
	}
	return errs
}

// CoresOrDefault returns Cores, or DefaultSparkCores when unset.
func (s SparkProcess) CoresOrDefault() int32 {
	if s.Cores > 0 {
		return s.Cores
	}
	return DefaultSparkCores
}

// CPURequest returns the CPU a pod of the process requests on Kubernetes: Cores when set,
// else DefaultSparkCPURequest.
func (s SparkProcess) CPURequest() resource.Quantity {
	if s.Cores > 0 {
		return *resource.NewQuantity(int64(s.Cores), resource.DecimalSI)
	}
	return DefaultSparkCPURequest.DeepCopy()
}

// MemoryOrDefault returns Memory, or DefaultSparkMemory when unset.
func (s SparkProcess) MemoryOrDefault() resource.Quantity {
	if s.Memory != nil {
		return *s.Memory
	}
	return DefaultSparkMemory
}
