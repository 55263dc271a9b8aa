package controller

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint"
)

// TestSparkDefaultSizes: a spark query that sizes nothing asks for a quarter of a core for
// its driver and for each executor, so that it schedules on a 2-core node; sized cores are
// requested whole, and an executor request in spec.runtime.spark.conf is the user's.
func TestSparkDefaultSizes(t *testing.T) {
	tests := []struct {
		name      string
		rt        v1.SparkRuntime
		driverCPU string
		// executorCPU is the executors' request among the controller's settings: "" leaves
		// it to Spark (spark.executor.cores) or to spec.runtime.spark.conf, which the
		// controller's settings are laid over.
		executorCPU             string
		executorCores           string
		driverMemory, driverCap string
	}{
		{"defaults", v1.SparkRuntime{}, "250m", "250m", "2", "1408Mi", "1408Mi"},
		{"sized", v1.SparkRuntime{Driver: v1.SparkProcess{Cores: 1}, Executor: v1.SparkProcess{Cores: 3}}, "1", "", "3", "1408Mi", "1408Mi"},
		{"executor request in conf", v1.SparkRuntime{Conf: map[string]string{sparkExecutorRequestCores: "100m"}}, "250m", "", "2", "1408Mi", "1408Mi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := querytest.Make("q", "ns").RateSource("ticks", 5).ConsoleSink().Checkpoint("s3://b/ns/q").Obj()
			q.Spec.Runtime.Spark = &tt.rt
			s := EngineSettings{Image: "ghcr.io/lockstep-dev/lockstep:v1", SparkImage: "ghcr.io/lockstep-dev/lockstep-spark:v1"}
			store := &v1.CheckpointStore{Spec: v1.CheckpointStoreSpec{S3: v1.S3Store{Endpoint: "http://s3:9000", Bucket: "b"}, CredentialsSecretName: "s3"}}
			cm, err := RenderConfigMap(q, store, s)
			if err != nil {
				t.Fatal(err)
			}
			c := RenderPodTemplate(q, store, cm, s).Spec.Containers[0]
			if got := c.Resources.Requests.Cpu(); got.Cmp(resource.MustParse(tt.driverCPU)) != 0 {
				t.Errorf("driver cpu request = %s, want %s", got, tt.driverCPU)
			}
			if got := c.Resources.Requests.Memory(); got.Cmp(resource.MustParse(tt.driverMemory)) != 0 {
				t.Errorf("driver memory request = %s, want %s", got, tt.driverMemory)
			}
			if got := c.Resources.Limits.Memory(); got.Cmp(resource.MustParse(tt.driverCap)) != 0 {
				t.Errorf("driver memory limit = %s, want %s", got, tt.driverCap)
			}
			if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
				t.Errorf("driver cpu limit = %v, want none", c.Resources.Limits)
			}
			var conf map[string]string
			if err := json.Unmarshal([]byte(cm.Data[SparkConfKey]), &conf); err != nil {
				t.Fatal(err)
			}
			if got := conf[sparkExecutorRequestCores]; got != tt.executorCPU {
				t.Errorf("%s = %q, want %q", sparkExecutorRequestCores, got, tt.executorCPU)
			}
			if got := conf["spark.executor.cores"]; got != tt.executorCores {
				t.Errorf("spark.executor.cores = %q, want %s", got, tt.executorCores)
			}
		})
	}
}

// TestReadinessUnschedulable: an engine pod, or every executor pod, that the scheduler cannot
// place makes the query Pending with the scheduler's reason; an executor unschedulable
// beside a ready one does not.
func TestReadinessUnschedulable(t *testing.T) {
	in, now := statusFixture(t)
	const why = "0/1 nodes are available: 1 Insufficient cpu."
	pending := func(name string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: why}}}}
	}
	ready := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q-exec-2"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	spark := func(in *statusInput) { in.q.Spec.Runtime.Spark = &v1.SparkRuntime{Instances: 2} }

	// The engine pod: inspectPods reads the scheduler's reason of the current pod.
	engine := pending("q-engine-1")
	engine.Annotations = map[string]string{AnnotationSpecHash: "h"}
	if got := inspectPods([]corev1.Pod{engine}, "h").unschedulable; got != "pod q-engine-1: "+why {
		t.Errorf("inspectPods().unschedulable = %q, want the pod and the scheduler's reason", got)
	}
	engine.Annotations[AnnotationSpecHash] = "old"
	if got := inspectPods([]corev1.Pod{engine}, "h").unschedulable; got != "" {
		t.Errorf("inspectPods().unschedulable of an old spec's pod = %q, want none", got)
	}

	tests := []struct {
		conditionCase
		phase v1.Phase
	}{
		{conditionCase{"engine pod", in(func(in *statusInput) { in.o.engine = engineState{unschedulable: "pod q-engine-1: " + why} }),
			metav1.ConditionFalse, v1.ReasonUnschedulable, "The engine cannot be scheduled: pod q-engine-1: " + why + " (lower its requests, spec.resources,"}, v1.PhasePending},
		{conditionCase{"spark driver pod", in(func(in *statusInput) {
			spark(in)
			in.o.engine = engineState{unschedulable: "pod q-engine-1: " + why}
		}), metav1.ConditionFalse, v1.ReasonUnschedulable, "spec.runtime.spark.driver"}, v1.PhasePending},
		{conditionCase{"no executor schedules", in(func(in *statusInput) {
			spark(in)
			in.o.executors = []corev1.Pod{pending("q-exec-1"), pending("q-exec-2")}
		}), metav1.ConditionFalse, v1.ReasonUnschedulable, "No executor can be scheduled, so no batch runs: executor pod q-exec-1: " + why}, v1.PhasePending},
		{conditionCase{"one executor of two schedules", in(func(in *statusInput) {
			spark(in)
			in.o.executors = []corev1.Pod{pending("q-exec-1"), ready}
		}), metav1.ConditionTrue, v1.ReasonRunning, "The engine runs generation 2"}, v1.PhaseRunning},
		{conditionCase{"batches commit meanwhile", in(func(in *statusInput) {
			spark(in)
			in.o.executors = []corev1.Pod{pending("q-exec-1")}
			in.o.engine.startedAt = now.Add(-time.Minute)
			in.o.snap.head.Committed = &checkpoint.Commit{BatchID: 1, Progress: checkpoint.Progress{Timestamp: now}}
		}), metav1.ConditionTrue, v1.ReasonRunning, "The engine runs generation 2"}, v1.PhaseRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			phase, got := readiness(tt.in, nil)
			if phase != tt.phase {
				t.Errorf("readiness() phase = %s, want %s", phase, tt.phase)
			}
			tt.check(t, "readiness", got)
		})
	}
}

// TestStaleExecutors: after the driver's container restarted in its pod, the executors of
// the dead application (made before the restart, another spark-app-selector) are stale once
// the new application has made one of its own; other drivers' executors, and everything
// before the new application starts, are left alone.
func TestStaleExecutors(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	restarted := t0.Add(10 * time.Minute)
	driver := func(uid types.UID, started time.Time) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q-engine-" + string(uid), UID: uid}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: EngineContainer,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}
		return p
	}
	executor := func(name string, owner types.UID, app string, made time.Time, phase corev1.PodPhase) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), CreationTimestamp: metav1.NewTime(made),
			Labels:          map[string]string{sparkAppSelector: app, LabelComponent: ComponentSparkExecutor},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Pod", Name: "q-engine-" + string(owner), UID: owner}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	oldA := executor("q-exec-1", "d1", "spark-a", t0.Add(time.Minute), corev1.PodSucceeded)
	oldB := executor("q-exec-2", "d1", "spark-a", t0.Add(time.Minute), corev1.PodFailed)
	newer := executor("q-exec-3", "d1", "spark-b", restarted.Add(20*time.Second), corev1.PodRunning)
	other := executor("q-exec-9", "d2", "spark-z", t0, corev1.PodSucceeded)
	tests := []struct {
		name      string
		drivers   []corev1.Pod
		executors []corev1.Pod
		want      []string
	}{
		{"the new application runs", []corev1.Pod{driver("d1", restarted)}, []corev1.Pod{oldA, oldB, newer, other}, []string{"q-exec-1", "q-exec-2"}},
		{"the new application has no executor yet", []corev1.Pod{driver("d1", restarted)}, []corev1.Pod{oldA, oldB}, nil},
		{"no restart", []corev1.Pod{driver("d1", t0)}, []corev1.Pod{oldA, oldB}, nil},
		{"the driver's container does not run", []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{UID: "d1"}}}, []corev1.Pod{oldA, newer}, nil},
		{"another driver's executors", []corev1.Pod{driver("d2", restarted)}, []corev1.Pod{oldA, newer}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range staleExecutors(tt.drivers, tt.executors) {
				got = append(got, p.Name)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("staleExecutors() = %v, want %v", got, tt.want)
			}
		})
	}
}
