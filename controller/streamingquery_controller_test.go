package controller_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

func condition(q *v1.StreamingQuery, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(q.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{Type: typ}
}

// eventuallyCondition waits until the query's condition has the status and reason.
func (f *fixture) eventuallyCondition(name, typ string, status metav1.ConditionStatus, reason string) *v1.StreamingQuery {
	f.t.Helper()
	return f.eventuallyConditionSaying(name, typ, status, reason, "")
}

// eventuallyConditionSaying waits as eventuallyCondition does, for a message that also
// contains says: the condition's status and reason alone may still be an earlier one's.
func (f *fixture) eventuallyConditionSaying(name, typ string, status metav1.ConditionStatus, reason, says string) *v1.StreamingQuery {
	f.t.Helper()
	var q *v1.StreamingQuery
	eventually(f.t, typ+" "+string(status)+"/"+reason+" saying "+strconv.Quote(says), func() error {
		q = f.get(name)
		if c := condition(q, typ); c.Status != status || c.Reason != reason || !strings.Contains(c.Message, says) {
			return fmt.Errorf("%s is %s/%s: %s", typ, c.Status, c.Reason, c.Message)
		}
		return nil
	})
	return q
}

// newOrdersEngine makes a fixture, starts the manager, creates the query orders and returns
// the fixture and the engine's Deployment once the controller made it.
func newOrdersEngine(t *testing.T) (*fixture, *appsv1.Deployment) {
	t.Helper()
	f := newFixture(t, testenv.ControlPlane(t))
	f.startManager(nil)
	f.create(f.query("orders").Obj())
	_, d := f.engine("orders")
	return f, d
}

func (f *fixture) engine(name string) (*corev1.ConfigMap, *appsv1.Deployment) {
	f.t.Helper()
	var cm corev1.ConfigMap
	var d appsv1.Deployment
	eventually(f.t, "the engine's ConfigMap and Deployment", func() error {
		ctx := context.Background()
		if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: controller.EngineName(name)}, &cm); err != nil {
			return err
		}
		return f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: controller.EngineName(name)}, &d)
	})
	return &cm, &d
}

// runPod creates a ready engine pod for the Deployment's current template, as the
// Deployment controller and kubelet would.
func (f *fixture) runPod(d *appsv1.Deployment) *corev1.Pod {
	f.t.Helper()
	return f.startPod(d, true, time.Now())
}

// startPod creates an engine pod for the Deployment's current template whose engine
// container started at started, ready or not yet.
func (f *fixture) startPod(d *appsv1.Deployment, ready bool, started time.Time) *corev1.Pod {
	f.t.Helper()
	return f.templatePod(d, &d.Spec.Template, corev1.PodRunning, ready, corev1.ContainerState{
		Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)},
	})
}

// eventuallySuspended waits until the engine of query name is scaled to 0 and the query is
// Ready=False Suspended, checks that its phase is Suspended, and returns it.
func (f *fixture) eventuallySuspended(name string) *v1.StreamingQuery {
	f.t.Helper()
	f.eventuallyReplicas(name, 0)
	q := f.eventuallyCondition(name, v1.ConditionReady, metav1.ConditionFalse, v1.ReasonSuspended)
	if q.Status.Phase != v1.PhaseSuspended {
		f.t.Errorf("phase = %s, want Suspended", q.Status.Phase)
	}
	return q
}

// setEngine reports cs as the status of pod's engine container, as the kubelet would; cs's
// name and image are the container's.
func (f *fixture) setEngine(pod *corev1.Pod, cs corev1.ContainerStatus) {
	f.t.Helper()
	cs.Name, cs.Image = controller.EngineContainer, pod.Spec.Containers[0].Image
	pod.Status.ContainerStatuses[0] = cs
	if err := f.c.Status().Update(context.Background(), pod); err != nil {
		f.t.Fatal(err)
	}
}

func TestReconcileCreatesEngine(t *testing.T) {
	f := newFixture(t, testenv.ControlPlane(t))
	f.startManager(nil)
	q := f.query("orders").Obj()
	q.Spec.Resources.Requests = map[string]resource.Quantity{"cpu": resource.MustParse("250m")}
	f.create(q)

	cm, d := f.engine("orders")
	got, err := v1.ParseQuery([]byte(cm.Data[controller.QueryKey]))
	if err != nil {
		t.Fatalf("ParseQuery(ConfigMap %s) = %v", controller.QueryKey, err)
	}
	if got.Spec.Checkpoint.Location != f.location("orders") || got.Name != "orders" || got.UID == "" {
		t.Errorf("rendered query = %s/%s uid %q at %s, want orders at %s with a uid", got.Namespace, got.Name, got.UID, got.Spec.Checkpoint.Location, f.location("orders"))
	}
	if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("Deployment replicas %d, strategy %s; want 1, Recreate", *d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	for _, obj := range []metav1.Object{cm, d} {
		if refs := obj.GetOwnerReferences(); len(refs) != 1 || refs[0].Name != "orders" || refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("%s owner references = %v, want the query as controller", obj.GetName(), refs)
		}
	}
	c := d.Spec.Template.Spec.Containers[0]
	if diff := cmp.Diff([]string{"/lockstep", "engine"}, c.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if ref := env[controller.EnvSecretAccessKey].ValueFrom; ref == nil || ref.SecretKeyRef.Name != "s3-credentials" {
		t.Errorf("%s = %+v, want from Secret s3-credentials", controller.EnvSecretAccessKey, env[controller.EnvSecretAccessKey])
	}
	if env[controller.EnvS3Endpoint].Value != f.s3.URL {
		t.Errorf("%s = %q, want %q", controller.EnvS3Endpoint, env[controller.EnvS3Endpoint].Value, f.s3.URL)
	}
	if c.TerminationMessagePath != controller.TerminationMessagePath || c.LivenessProbe == nil || c.ReadinessProbe == nil {
		t.Errorf("container lacks termination message path or probes: %+v", c)
	}
	if c.Resources.Requests.Cpu().String() != "250m" {
		t.Errorf("cpu request = %s, want 250m", c.Resources.Requests.Cpu())
	}

	q = f.eventuallyCondition("orders", v1.ConditionCompatible, metav1.ConditionTrue, v1.ReasonNoCheckpoint)
	if !slices.Contains(q.Finalizers, controller.Finalizer) {
		t.Errorf("finalizers = %v, want %s", q.Finalizers, controller.Finalizer)
	}
	if q.Status.Phase != v1.PhasePending || q.Status.CheckpointLocation != f.location("orders") || q.Status.ObservedGeneration != q.Generation {
		t.Errorf("status = phase %s, location %s, observed %d; want Pending at %s, observed %d", q.Status.Phase, q.Status.CheckpointLocation, q.Status.ObservedGeneration, f.location("orders"), q.Generation)
	}
	if q.Status.Guarantee != v1.GuaranteeExactlyOnce || q.Status.GuaranteeReason == "" {
		t.Errorf("guarantee = %q (%q), want exactly-once with a reason", q.Status.Guarantee, q.Status.GuaranteeReason)
	}
	if c := condition(q, v1.ConditionCheckpointReachable); c.Status != metav1.ConditionTrue {
		t.Errorf("CheckpointReachable = %+v, want True", c)
	}
}

func TestStatusFromCheckpoint(t *testing.T) {
	f, d := newOrdersEngine(t)
	q := f.get("orders")
	meta := f.writeCheckpoint(q, 2, 1, time.Now())
	f.runPod(d)

	f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionTrue, v1.ReasonRunning)
	q = f.eventuallyCondition("orders", v1.ConditionProgressing, metav1.ConditionTrue, v1.ReasonBatchesCommitting)
	st := q.Status
	if st.Phase != v1.PhaseRunning || st.QueryID != meta.ID {
		t.Errorf("phase %s, queryId %q; want Running, %q", st.Phase, st.QueryID, meta.ID)
	}
	if st.LatestPlannedBatch == nil || *st.LatestPlannedBatch != 2 || st.LatestCommittedBatch == nil || *st.LatestCommittedBatch != 1 {
		t.Errorf("planned %v, committed %v; want 2, 1", st.LatestPlannedBatch, st.LatestCommittedBatch)
	}
	// Batch 1 left 2 records, the newest it read 3 s old (3,000 ms in commits/1).
	want := []v1.SourceStatus{{Name: "orders", Offsets: `{"files":2}`, Lag: new(int64(2)), LagSeconds: new(int64(3))}}
	if diff := cmp.Diff(want, st.Sources); diff != "" {
		t.Errorf("sources (-want +got):\n%s", diff)
	}
	if st.Lag == nil || *st.Lag != 2 || st.LagSeconds == nil || *st.LagSeconds != 3 {
		t.Errorf("lag = %v records, %v s; want 2, 3", st.Lag, st.LagSeconds)
	}
	if p := st.LastProgress; p == nil || p.Batch != 1 || p.InputRows != 10 || p.OutputRows != 7 || p.ProcessedRowsPerSecond != 20 {
		t.Errorf("lastProgress = %+v, want batch 1, 10 in, 7 out, 20 rows/s", p)
	}
	if c := condition(q, v1.ConditionCheckpointReachable); c.Reason != v1.ReasonCheckpointRead || !strings.Contains(c.Message, meta.ID) {
		t.Errorf("CheckpointReachable = %+v, want CheckpointRead naming the query id", c)
	}
}

// TestStatusNeverMixesCheckpoints: after a move to a new location, the status shows the old
// location with the old query id and batches, or the new one with the new checkpoint's (none
// yet here), never the new location with the old progress.
func TestStatusNeverMixesCheckpoints(t *testing.T) {
	f, _ := newOrdersEngine(t)
	meta := f.writeCheckpoint(f.get("orders"), 3, 3, time.Now())
	f.eventuallyCondition("orders", v1.ConditionCheckpointReachable, metav1.ConditionTrue, v1.ReasonCheckpointRead)
	eventually(t, "batch 3 in status", func() error {
		if b := f.get("orders").Status.LatestCommittedBatch; b == nil || *b != 3 {
			return fmt.Errorf("latest committed batch %v", b)
		}
		return nil
	})

	moved := f.location("orders-v2")
	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Checkpoint.Location = moved }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new location in status", func() error {
		st := f.get("orders").Status
		switch st.CheckpointLocation {
		case f.location("orders"):
			if st.QueryID != meta.ID || st.LatestCommittedBatch == nil || *st.LatestCommittedBatch != 3 {
				t.Fatalf("the old location with query id %q, batch %v: a mix", st.QueryID, st.LatestCommittedBatch)
			}
			return errors.New("the old location still")
		case moved:
			if st.QueryID != "" || st.LatestCommittedBatch != nil || st.LatestPlannedBatch != nil || st.LastProgress != nil || st.Lag != nil || len(st.Sources) > 0 {
				t.Fatalf("the new location, which holds no checkpoint, with query id %q, batches %v/%v, progress %+v, lag %v, sources %+v: a mix",
					st.QueryID, st.LatestPlannedBatch, st.LatestCommittedBatch, st.LastProgress, st.Lag, st.Sources)
			}
			return nil
		default:
			return fmt.Errorf("location %q", st.CheckpointLocation)
		}
	})
}

// TestCommitShowsEngineRunning: a batch committed since the current engine container started
// shows the query Running, before the kubelet reports the pod ready.
func TestCommitShowsEngineRunning(t *testing.T) {
	f, d := newOrdersEngine(t)
	f.startPod(d, false, time.Now().Add(-2*time.Second))
	// The engine's first batch commits before the kubelet reports the pod ready (it never
	// does here).
	f.writeCheckpoint(f.get("orders"), 0, 0, time.Now())
	q := f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionTrue, v1.ReasonRunning)
	if q.Status.Phase != v1.PhaseRunning || q.Status.LatestCommittedBatch == nil {
		t.Errorf("phase %s, batch %v; want Running with batch 0", q.Status.Phase, q.Status.LatestCommittedBatch)
	}
}

func TestCompatibleChangeRollsEngine(t *testing.T) {
	f, d := newOrdersEngine(t)
	f.writeCheckpoint(f.get("orders"), 0, 0, time.Now())
	f.eventuallyCondition("orders", v1.ConditionCheckpointReachable, metav1.ConditionTrue, v1.ReasonCheckpointRead)
	oldHash := d.Spec.Template.Annotations[controller.AnnotationSpecHash]

	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Transform[0].Filter = "amount > 10.0" }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the engine rolls", func() error {
		if _, d := f.engine("orders"); d.Spec.Template.Annotations[controller.AnnotationSpecHash] == oldHash {
			return errors.New("the pod template still has the old spec hash")
		}
		return nil
	})
	cm, _ := f.engine("orders")
	if !strings.Contains(cm.Data[controller.QueryKey], "amount > 10.0") {
		t.Errorf("ConfigMap does not hold the new filter:\n%s", cm.Data[controller.QueryKey])
	}
	q := f.eventuallyCondition("orders", v1.ConditionCompatible, metav1.ConditionTrue, v1.ReasonCompatibleChange)
	if q.Status.ObservedGeneration != q.Generation {
		t.Errorf("observedGeneration = %d, want %d", q.Status.ObservedGeneration, q.Generation)
	}
}

func TestIncompatibleChangeIsBlocked(t *testing.T) {
	// This control plane has no webhook: the controller is the last line of defence.
	f := newFixture(t, testenv.ControlPlane(t))
	f.startManager(nil)
	f.create(f.query("orders").Obj())
	cm, d := f.engine("orders")
	f.writeCheckpoint(f.get("orders"), 0, 0, time.Now())
	f.eventuallyCondition("orders", v1.ConditionCheckpointReachable, metav1.ConditionTrue, v1.ReasonCheckpointRead)

	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Sources[0].Files.Path = "s3://" + f.s3.Bucket + "/landing/other" }); err != nil {
		t.Fatal(err)
	}
	q := f.eventuallyCondition("orders", v1.ConditionCompatible, metav1.ConditionFalse, v1.ReasonIncompatibleChange)
	c := condition(q, v1.ConditionCompatible)
	if !strings.Contains(c.Message, "spec.sources[0]") || !strings.Contains(c.Message, "Remedy:") {
		t.Errorf("Compatible message = %q, want the finding's path and remedy", c.Message)
	}
	if q.Status.Phase != v1.PhaseBlocked {
		t.Errorf("phase = %s, want Blocked", q.Status.Phase)
	}
	if r := condition(q, v1.ConditionReady); r.Reason != v1.ReasonIncompatibleChange || !strings.Contains(r.Message, "keeps running") {
		t.Errorf("Ready = %+v, want IncompatibleChange saying the old generation keeps running", r)
	}
	cm2, d2 := f.engine("orders")
	if cm2.Data[controller.QueryKey] != cm.Data[controller.QueryKey] || d2.Spec.Template.Annotations[controller.AnnotationSpecHash] != d.Spec.Template.Annotations[controller.AnnotationSpecHash] {
		t.Error("the refused spec reached the engine's ConfigMap or Deployment")
	}
	eventually(t, "an IncompatibleChange event", func() error {
		var evs eventsv1.EventList
		if err := f.c.List(context.Background(), &evs, client.InNamespace(f.ns)); err != nil {
			return err
		}
		var reasons []string
		for _, e := range evs.Items {
			if e.Reason == v1.ReasonIncompatibleChange {
				return nil
			}
			reasons = append(reasons, e.Reason)
		}
		return fmt.Errorf("events: %v", reasons)
	})
}

// event waits for an Event of the query with the reason and returns it.
func (f *fixture) event(name, reason string) eventsv1.Event {
	f.t.Helper()
	var found eventsv1.Event
	eventually(f.t, "a "+reason+" event", func() error {
		var evs eventsv1.EventList
		if err := f.c.List(context.Background(), &evs, client.InNamespace(f.ns)); err != nil {
			return err
		}
		var reasons []string
		for _, e := range evs.Items {
			if e.Reason == reason && e.Regarding.Name == name {
				found = e
				return nil
			}
			reasons = append(reasons, e.Reason)
		}
		return fmt.Errorf("events: %v", reasons)
	})
	return found
}

// events returns the Events of the query with the reason, each listed once with its count
// (a series counts its repeats).
func (f *fixture) events(name, reason string) []eventsv1.Event {
	f.t.Helper()
	var evs eventsv1.EventList
	if err := f.c.List(context.Background(), &evs, client.InNamespace(f.ns)); err != nil {
		f.t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range evs.Items {
		if e.Reason == reason && e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// announcedOnce fails the test unless the query has exactly one Event with the reason, not
// repeated in a series.
func (f *fixture) announcedOnce(name, reason string) {
	f.t.Helper()
	evs := f.events(name, reason)
	if len(evs) != 1 || evs[0].Series != nil {
		var notes []string
		for _, e := range evs {
			notes = append(notes, fmt.Sprintf("%q (series %+v)", e.Note, e.Series))
		}
		f.t.Errorf("%d %s events: %v; want one", len(evs), reason, notes)
	}
}

// TestSuspend: a suspend scales the engine to 0 with a Suspended event and shows no lag
// (nothing measures it); a resume scales it back with a Resumed event.
func TestSuspend(t *testing.T) {
	f, _ := newOrdersEngine(t)
	f.writeCheckpoint(f.get("orders"), 1, 1, time.Now())
	eventually(t, "lag 2", func() error {
		if l := f.get("orders").Status.Lag; l == nil || *l != 2 {
			return fmt.Errorf("lag = %v", l)
		}
		return nil
	})
	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Suspend = true }); err != nil {
		t.Fatal(err)
	}
	q := f.eventuallySuspended("orders")
	if q.Status.Lag != nil || q.Status.LagSeconds != nil || len(q.Status.Sources) != 1 || q.Status.Sources[0].Lag != nil || q.Status.Sources[0].LagSeconds != nil {
		t.Errorf("suspended: lag %v, sources %+v; want no lag", q.Status.Lag, q.Status.Sources)
	}
	if e := f.event("orders", v1.ReasonSuspended); e.Type != corev1.EventTypeNormal {
		t.Errorf("Suspended event type = %s, want Normal", e.Type)
	}
	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Suspend = false }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "replicas 1", func() error {
		if _, d := f.engine("orders"); *d.Spec.Replicas != 1 {
			return fmt.Errorf("replicas = %d", *d.Spec.Replicas)
		}
		return nil
	})
	if e := f.event("orders", controller.EventResumed); e.Type != corev1.EventTypeNormal {
		t.Errorf("Resumed event type = %s, want Normal", e.Type)
	}
	// Later reconciles (the status read from a cache behind the controller's own write among
	// them) announce nothing again.
	f.eventuallyReconciled("orders")
	f.announcedOnce("orders", v1.ReasonSuspended)
	f.announcedOnce("orders", controller.EventResumed)
}

// eventuallyReconciled waits until the controller has reconciled the query again, several
// times: it touches an annotation (which reconciles at once) and waits for resyncs.
func (f *fixture) eventuallyReconciled(name string) {
	f.t.Helper()
	start := time.Now()
	eventually(f.t, "several reconciles", func() error {
		if err := f.update(name, func(q *v1.StreamingQuery) {
			if q.Annotations == nil {
				q.Annotations = map[string]string{}
			}
			q.Annotations["test.lockstep.dev/touched"] = time.Now().Format(time.RFC3339Nano)
		}); err != nil {
			return err
		}
		if time.Since(start) < 4*resync {
			return errors.New("not yet")
		}
		return nil
	})
}

// eventuallyRestarts waits until the query's status counts n restarts, then for several
// reconciles more (eventuallyReconciled), so that its status has settled.
func (f *fixture) eventuallyRestarts(name string, n int32) {
	f.t.Helper()
	eventually(f.t, fmt.Sprintf("restarts %d", n), func() error {
		if q := f.get(name); q.Status.Restarts != n {
			return fmt.Errorf("restarts %d", q.Status.Restarts)
		}
		return nil
	})
	f.eventuallyReconciled(name)
}

// TestEngineCrashLoop: an engine that crash-loops makes the query Failed with a Warning
// event carrying its termination message; status.restarts counts the current pod's restarts,
// not those of older pods.
func TestEngineCrashLoop(t *testing.T) {
	f, d := newOrdersEngine(t)
	ctx := context.Background()

	// A pod of an older spec that restarted often, still terminating.
	old := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-old", Namespace: f.ns, Labels: d.Spec.Template.Labels,
			Annotations: map[string]string{controller.AnnotationSpecHash: "older"}},
		Spec: d.Spec.Template.Spec,
	}
	f.create(old)
	old.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: controller.EngineContainer, RestartCount: 7, Image: d.Spec.Template.Spec.Containers[0].Image,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
	}}}
	if err := f.c.Status().Update(ctx, old); err != nil {
		t.Fatal(err)
	}
	pod := f.runPod(d)
	f.setEngine(pod, corev1.ContainerStatus{
		RestartCount:         3,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "read sasl password: no such file", FinishedAt: metav1.Now()}},
	})
	q := f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionFalse, v1.ReasonEngineFailed)
	if q.Status.Phase != v1.PhaseFailed || q.Status.Restarts != 3 {
		t.Errorf("phase %s, restarts %d; want Failed, 3 (the current pod's)", q.Status.Phase, q.Status.Restarts)
	}
	e := f.event("orders", v1.ReasonEngineFailed)
	if e.Type != corev1.EventTypeWarning || !strings.Contains(e.Note, "read sasl password: no such file") {
		t.Errorf("EngineFailed event = %s %q, want a Warning with the termination message", e.Type, e.Note)
	}

	// Between two crashes the kubelet runs the engine again; the crash loop goes on, and is
	// neither Running in between nor announced again.
	crash := pod.Status.ContainerStatuses[0].LastTerminationState
	f.setEngine(pod, corev1.ContainerStatus{
		RestartCount: 4, Ready: true,
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
		LastTerminationState: crash,
	})
	f.eventuallyRestarts("orders", 4)
	if q := f.get("orders"); q.Status.Phase != v1.PhaseFailed || condition(q, v1.ConditionReady).Reason != v1.ReasonEngineFailed {
		t.Errorf("between two crashes: phase %s, Ready %+v; want Failed, EngineFailed", q.Status.Phase, condition(q, v1.ConditionReady))
	}
	f.announcedOnce("orders", v1.ReasonEngineFailed)

	// A new pod of the current spec starts with no restarts.
	if err := f.c.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the crashed pod is gone", func() error {
		if err := f.c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("get = %v", err)
		}
		return nil
	})
	f.runPod(d)
	eventually(t, "restarts 0", func() error {
		if q := f.get("orders"); q.Status.Restarts != 0 || q.Status.Phase == v1.PhaseFailed {
			return fmt.Errorf("phase %s, restarts %d", q.Status.Phase, q.Status.Restarts)
		}
		return nil
	})
}

// TestEngineRestartedByLiveness: the kubelet restarts the engine container after its
// liveness probe failed (the engine wrote controller.StuckMessage as it was stopped); the
// status says so at once, with one Warning Event, and the query is Ready again once the
// restarted engine commits a batch.
func TestEngineRestartedByLiveness(t *testing.T) {
	f, d := newOrdersEngine(t)
	pod := f.runPod(d)
	f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionTrue, v1.ReasonRunning)

	// As the kubelet reports it: restarted once, running (and ready: the new engine claimed
	// the checkpoint), the last termination the probe's kill with the engine's message.
	stuck := controller.StuckMessage + "no trigger finished for 5m1s, more than the progress timeout 5m0s (spec.engine.progressTimeout)"
	restartedAt := time.Now().Add(-time.Second)
	f.setEngine(pod, corev1.ContainerStatus{
		RestartCount: 1, Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(restartedAt)}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: "Error", Message: stuck, FinishedAt: metav1.NewTime(restartedAt)}},
	})
	q := f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionFalse, v1.ReasonEngineRestarted)
	if c := condition(q, v1.ConditionReady); !strings.Contains(c.Message, "restarted by its liveness probe") || !strings.Contains(c.Message, stuck) {
		t.Errorf("Ready message = %q, want it to name the liveness restart and the engine's message", c.Message)
	}
	if q.Status.Phase != v1.PhaseRunning || q.Status.Restarts != 1 || q.Status.LastFailure == nil || q.Status.LastFailure.Message != stuck {
		t.Errorf("phase %s, restarts %d, lastFailure %+v; want Running, 1, the engine's message", q.Status.Phase, q.Status.Restarts, q.Status.LastFailure)
	}
	if e := f.event("orders", v1.ReasonEngineRestarted); e.Type != corev1.EventTypeWarning || !strings.Contains(e.Note, "liveness probe") {
		t.Errorf("EngineRestarted event = %s %q, want a Warning naming the liveness probe", e.Type, e.Note)
	}

	// The restarted engine commits a batch: it works again.
	f.writeCheckpoint(q, 0, 0, time.Now())
	f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionTrue, v1.ReasonRunning)
	f.announcedOnce("orders", v1.ReasonEngineRestarted)
}

// TestOneCrashIsARestart: an engine container killed once (SIGKILL: it writes no message,
// and the kubelet gives the tail of its log instead) reads as a restart from the moment the
// kubelet reports it down: phase Running, Ready=False EngineRestarted, one Warning Event
// naming the signal, never Failed. Killed again before it shows that it works, it
// crash-loops: Failed, with one EngineFailed Event naming the signal, not an INFO line.
func TestOneCrashIsARestart(t *testing.T) {
	f, d := newOrdersEngine(t)
	started := time.Now().Add(-time.Minute)
	pod := f.startPod(d, true, started)
	f.writeCheckpoint(f.get("orders"), 0, 0, time.Now().Add(-30*time.Second))
	f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionTrue, v1.ReasonRunning)
	notFailed := func() {
		t.Helper()
		if q := f.get("orders"); q.Status.Phase == v1.PhaseFailed {
			t.Errorf("phase Failed after one crash; conditions %+v", q.Status.Conditions)
		}
		if evs := f.events("orders", v1.ReasonEngineFailed); len(evs) > 0 {
			t.Errorf("an EngineFailed Event after one crash: %q", evs[0].Note)
		}
	}
	// What `kubectl logs` would show: INFO lines only; the kubelet gives them as the message.
	tail := `{"time":"2026-07-01T11:59:00Z","level":"INFO","msg":"Garbage collector set","settings":"GC percent 200"}` + "\n" +
		`{"time":"2026-07-01T11:59:01Z","level":"INFO","msg":"Batch committed","batch":0}`
	killedAt := time.Now().Add(-20 * time.Second)
	kill := &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", Message: tail,
		StartedAt: metav1.NewTime(started), FinishedAt: metav1.NewTime(killedAt)}

	// Down: the kubelet reports the end of run 0 before it starts run 1.
	f.setEngine(pod, corev1.ContainerStatus{State: corev1.ContainerState{Terminated: kill}})
	q := f.eventuallyConditionSaying("orders", v1.ConditionReady, metav1.ConditionFalse, v1.ReasonEngineRestarted, "killed by signal SIGKILL (exit code 137)")
	msg := condition(q, v1.ConditionReady).Message
	if q.Status.Phase != v1.PhaseRunning || strings.Contains(msg, "Garbage collector") {
		t.Errorf("phase %s, Ready %q; want Running, naming the signal and no INFO line", q.Status.Phase, msg)
	}
	notFailed()

	// Run 1 runs: still the same restart, announced once.
	restartedAt := killedAt.Add(time.Second)
	f.setEngine(pod, corev1.ContainerStatus{RestartCount: 1, Ready: true,
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(restartedAt)}},
		LastTerminationState: corev1.ContainerState{Terminated: kill}})
	f.eventuallyRestarts("orders", 1)
	q = f.get("orders")
	if c := condition(q, v1.ConditionReady); q.Status.Phase != v1.PhaseRunning || c.Reason != v1.ReasonEngineRestarted || c.Message != msg {
		t.Errorf("restarted: phase %s, Ready %+v; want Running, EngineRestarted %q", q.Status.Phase, c, msg)
	}
	notFailed()
	f.announcedOnce("orders", v1.ReasonEngineRestarted)
	if e := f.event("orders", v1.ReasonEngineRestarted); e.Type != corev1.EventTypeWarning || !strings.Contains(e.Note, "SIGKILL") {
		t.Errorf("EngineRestarted event = %s %q, want a Warning naming the signal", e.Type, e.Note)
	}

	// Run 1 is killed too, before it committed a batch: a crash loop.
	f.setEngine(pod, corev1.ContainerStatus{RestartCount: 1,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", Message: tail,
			StartedAt: metav1.NewTime(restartedAt), FinishedAt: metav1.Now()}},
		LastTerminationState: corev1.ContainerState{Terminated: kill}})
	q = f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionFalse, v1.ReasonEngineFailed)
	if q.Status.Phase != v1.PhaseFailed {
		t.Errorf("phase %s after two crashes in a row, want Failed", q.Status.Phase)
	}
	if e := f.event("orders", v1.ReasonEngineFailed); e.Type != corev1.EventTypeWarning || !strings.Contains(e.Note, "killed by signal SIGKILL") || strings.Contains(e.Note, "Garbage collector") {
		t.Errorf("EngineFailed event = %s %q, want a Warning naming the signal, not an INFO line", e.Type, e.Note)
	}
}

// TestCompatibleKeepsWarnings: a change allowed with a warning keeps the warning in the
// Compatible condition after the engine has recorded the new shape, until the next change.
func TestCompatibleKeepsWarnings(t *testing.T) {
	f, _ := newOrdersEngine(t)
	f.writeCheckpoint(f.get("orders"), 0, 0, time.Now())
	f.eventuallyCondition("orders", v1.ConditionCheckpointReachable, metav1.ConditionTrue, v1.ReasonCheckpointRead)

	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Sink = v1.Sink{Console: &v1.ConsoleSink{}} }); err != nil {
		t.Fatal(err)
	}
	var q *v1.StreamingQuery
	hasWarning := func() error {
		q = f.get("orders")
		c := condition(q, v1.ConditionCompatible)
		if c.ObservedGeneration != q.Generation || c.Reason != v1.ReasonCompatibleChange || !strings.Contains(c.Message, "[warning]") || !strings.Contains(c.Message, "spec.sink") {
			return fmt.Errorf("Compatible of generation %d is %s (generation %d): %s", q.Generation, c.Reason, c.ObservedGeneration, c.Message)
		}
		return nil
	}
	eventually(t, "a Compatible condition with the sink's warning", hasWarning)

	// The engine runs the new spec: it records its shape at batch 1 and commits.
	_, d := f.engine("orders")
	cp := f.claim(q, 1)
	if err := cp.AddOffsets(t.Context(), checkpoint.Offsets{BatchID: 1, Sources: []checkpoint.SourceOffset{{Source: "orders", Offset: json.RawMessage(`{"files":2}`)}}}); err != nil {
		t.Fatal(err)
	}
	if err := cp.AddCommit(t.Context(), checkpoint.Commit{BatchID: 1}); err != nil {
		t.Fatal(err)
	}
	f.runPod(d)
	f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionTrue, v1.ReasonRunning)
	if err := hasWarning(); err != nil {
		t.Errorf("after the engine recorded the new shape: %v", err)
	}

	// A suspend and a resume are new generations but no change the engine sees: the
	// warnings stay.
	for _, suspend := range []bool{true, false} {
		if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Suspend = suspend }); err != nil {
			t.Fatal(err)
		}
		eventually(t, fmt.Sprintf("the Compatible condition of the generation with suspend %t keeps the warning", suspend), hasWarning)
	}
	// The next change replaces them.
	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Transform[0].Filter = "amount > 1.0" }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the next change's verdict, without the old warning", func() error {
		q := f.get("orders")
		if c := condition(q, v1.ConditionCompatible); c.ObservedGeneration != q.Generation || strings.Contains(c.Message, "[warning]") {
			return fmt.Errorf("Compatible of generation %d (query at %d): %s", c.ObservedGeneration, q.Generation, c.Message)
		}
		return nil
	})
}

func TestRetention(t *testing.T) {
	for _, policy := range []v1.RetentionPolicy{v1.RetentionRetain, v1.RetentionDelete} {
		t.Run(string(policy), func(t *testing.T) {
			f := newFixture(t, testenv.ControlPlane(t))
			f.startManager(nil)
			q := f.query("orders").Obj()
			q.Spec.Checkpoint.Retention = policy
			f.create(q)
			f.engine("orders")
			f.eventuallyCondition("orders", v1.ConditionCompatible, metav1.ConditionTrue, v1.ReasonNoCheckpoint)
			f.writeCheckpoint(f.get("orders"), 1, 1, time.Now())
			if err := f.c.Delete(context.Background(), f.get("orders")); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the query is deleted", func() error {
				err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "orders"}, &v1.StreamingQuery{})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("get = %v", err)
			})
			_, err := checkpoint.Load(context.Background(), f.openCheckpoint("orders"))
			switch policy {
			case v1.RetentionRetain:
				if err != nil {
					t.Errorf("checkpoint.Load after deletion with Retain = %v, want the checkpoint", err)
				}
			case v1.RetentionDelete:
				if !errors.Is(err, checkpoint.ErrNotFound) {
					t.Errorf("checkpoint.Load after deletion with Delete = %v, want ErrNotFound", err)
				}
				keys, _ := f.openCheckpoint("orders").List(context.Background(), "")
				if len(keys) > 0 {
					t.Errorf("objects left after Delete: %v", keys)
				}
			}
		})
	}
}

// TestRetentionChangeKeepsEngine: checkpoint.retention is a deletion policy the controller
// applies; changing it alone leaves the engine's query file and pod as they were, so the
// engine does not restart.
func TestRetentionChangeKeepsEngine(t *testing.T) {
	f := newFixture(t, testenv.ControlPlane(t))
	f.startManager(nil)
	f.create(f.query("orders").Obj())
	cm, d := f.engine("orders")
	f.eventuallyCondition("orders", v1.ConditionCompatible, metav1.ConditionTrue, v1.ReasonNoCheckpoint)

	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Checkpoint.Retention = v1.RetentionDelete }); err != nil {
		t.Fatal(err)
	}
	gen := f.get("orders").Generation
	eventually(t, "the ConfigMap renders the new generation", func() error {
		got, _ := f.engine("orders")
		if g := got.Annotations[controller.AnnotationGeneration]; g != fmt.Sprint(gen) {
			return fmt.Errorf("ConfigMap renders generation %s, want %d", g, gen)
		}
		return nil
	})
	cm2, d2 := f.engine("orders")
	if cm2.Data[controller.QueryKey] != cm.Data[controller.QueryKey] {
		t.Errorf("the engine's query changed with retention:\n%s\nwas\n%s", cm2.Data[controller.QueryKey], cm.Data[controller.QueryKey])
	}
	if diff := cmp.Diff(d.Spec.Template, d2.Spec.Template); diff != "" {
		t.Errorf("the engine's pod template changed with retention (-before +after):\n%s", diff)
	}
	if d2.Generation != d.Generation {
		t.Errorf("Deployment generation %d → %d: it was rewritten", d.Generation, d2.Generation)
	}
}

func TestStoreRefusesNamespace(t *testing.T) {
	f := newFixture(t, testenv.ControlPlane(t))
	f.startManager(nil)
	f.store.Spec.AllowedNamespaces = []string{"someone-else"}
	if err := f.c.Update(context.Background(), f.store); err != nil {
		t.Fatal(err)
	}
	f.create(f.query("orders").Obj())
	q := f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionFalse, v1.ReasonStoreRefused)
	if q.Status.Phase != v1.PhaseBlocked || !strings.Contains(condition(q, v1.ConditionReady).Message, "may not use CheckpointStore") {
		t.Errorf("status = %s / %+v, want Blocked saying the namespace may not use the store", q.Status.Phase, condition(q, v1.ConditionReady))
	}
	err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: controller.EngineName("orders")}, &appsv1.Deployment{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("get engine Deployment = %v, want NotFound", err)
	}

	// Allowed by label, it runs.
	f.store.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": f.ns}}
	if err := f.c.Update(context.Background(), f.store); err != nil {
		t.Fatal(err)
	}
	f.engine("orders")
}

func TestRenderedQueryIsYAML(t *testing.T) {
	q := querytest.Make("q", "ns").RateSource("ticks", 5).ConsoleSink().Checkpoint("s3://b/ns/q").Obj()
	cm, err := controller.RenderConfigMap(q, nil, controller.EngineSettings{})
	if err != nil {
		t.Fatal(err)
	}
	var back v1.StreamingQuery
	if err := yaml.UnmarshalStrict([]byte(cm.Data[controller.QueryKey]), &back); err != nil {
		t.Fatalf("rendered query does not read back strictly: %v", err)
	}
}
