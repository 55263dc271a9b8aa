package controller_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// labelStoreTest marks the stores a test's StoreReconciler sees: the API server is shared by
// the package's tests, and a store reconciler must not put its finalizer on another test's.
const labelStoreTest = "test.lockstep.dev/store-reconciler"

// startStores runs a manager with only the StoreReconciler, seeing the stores labelled for
// this fixture (the fixture's own store is labelled here). Stores it leaves behind lose
// their finalizer when the test ends, after the manager stopped.
func (f *fixture) startStores(opts ...controller.StoreOption) {
	f.t.Helper()
	ctx := context.Background()
	f.t.Cleanup(func() {
		var list v1.CheckpointStoreList
		if err := f.c.List(ctx, &list, client.MatchingLabels{labelStoreTest: f.ns}); err != nil {
			f.t.Errorf("list stores: %v", err)
			return
		}
		for i := range list.Items {
			st := &list.Items[i]
			if controllerutil.RemoveFinalizer(st, controller.StoreFinalizer) {
				_ = f.c.Update(ctx, st)
			}
			_ = f.c.Delete(ctx, st)
		}
	})
	f.labelStore(f.store)
	if err := f.c.Update(ctx, f.store); err != nil {
		f.t.Fatal(err)
	}
	mo := ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             controllerConfig(),
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{f.ns: {}},
			ByObject: map[client.Object]cache.ByObject{
				&v1.CheckpointStore{}: {Label: labels.SelectorFromSet(labels.Set{labelStoreTest: f.ns})},
			},
		},
	}
	mgr, err := ctrl.NewManager(f.cfg, mo)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := controller.NewStoreReconciler(mgr, opts...).SetupWithManager(mgr); err != nil {
		f.t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	f.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			f.t.Errorf("manager: %v", err)
		}
	})
}

func (f *fixture) labelStore(st *v1.CheckpointStore) {
	if st.Labels == nil {
		st.Labels = map[string]string{}
	}
	st.Labels[labelStoreTest] = f.ns
}

// newStore creates a store of the fixture's bucket named <namespace>-<suffix>, changed by
// edit, that the fixture's StoreReconciler sees.
func (f *fixture) newStore(suffix string, edit func(*v1.CheckpointStore)) *v1.CheckpointStore {
	f.t.Helper()
	st := &v1.CheckpointStore{
		ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-" + suffix},
		Spec:       *f.store.Spec.DeepCopy(),
	}
	f.labelStore(st)
	if edit != nil {
		edit(st)
	}
	f.create(st)
	return st
}

func (f *fixture) getStore(name string) *v1.CheckpointStore {
	f.t.Helper()
	var st v1.CheckpointStore
	if err := f.c.Get(context.Background(), client.ObjectKey{Name: name}, &st); err != nil {
		f.t.Fatal(err)
	}
	return &st
}

// eventuallyStoreReady waits until the store's Ready condition has the status and reason,
// for the store's current generation.
func (f *fixture) eventuallyStoreReady(name string, status metav1.ConditionStatus, reason string) *v1.CheckpointStore {
	f.t.Helper()
	var st *v1.CheckpointStore
	eventually(f.t, "store "+name+" Ready "+string(status)+"/"+reason, func() error {
		st = f.getStore(name)
		c := meta.FindStatusCondition(st.Status.Conditions, v1.ConditionReady)
		if c == nil {
			return fmt.Errorf("no Ready condition")
		}
		if c.Status != status || c.Reason != reason || c.ObservedGeneration != st.Generation {
			return fmt.Errorf("Ready is %s/%s for generation %d (store at %d): %s", c.Status, c.Reason, c.ObservedGeneration, st.Generation, c.Message)
		}
		return nil
	})
	return st
}

// TestStoreProbe probes stores that fail in each way the probe tells apart, against the
// real S3 server (and, for conditional writes, a proxy in front of it that acknowledges every
// create-if-absent without writing).
func TestStoreProbe(t *testing.T) {
	f := newFixture(t, testenv.ControlPlane(t))
	f.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "wrong-credentials", Namespace: f.ns},
		StringData: map[string]string{controller.EnvAccessKeyID: f.s3.AccessKey, controller.EnvSecretAccessKey: "not-the-secret"},
	})
	ignoring := testenv.NewS3Proxy(t, f.s3, 1)
	ignoring.Inject(testenv.Rule{Kind: testenv.Custom, Times: testenv.Always,
		Match: testenv.Match{Method: http.MethodPut, IfNoneMatch: true},
		Handler: func(w http.ResponseWriter, r *http.Request, _ http.Handler) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("ETag", `"d41d8cd98f00b204e9800998ecf8427e"`)
			w.WriteHeader(http.StatusOK)
		}})
	f.startStores()

	cases := []struct {
		name    string
		edit    func(*v1.CheckpointStore)
		status  metav1.ConditionStatus
		reason  string
		message string // a part of the condition's message
	}{
		{name: "ready", status: metav1.ConditionTrue, reason: v1.ReasonProbed, message: "refuse a second create-if-absent"},
		{name: "bucket", edit: func(st *v1.CheckpointStore) { st.Spec.S3.Bucket = "no-such-bucket-" + fmt.Sprint(nsCounter.Load()) },
			status: metav1.ConditionFalse, reason: v1.ReasonBucketMissing, message: "does not exist"},
		{name: "credentials", edit: func(st *v1.CheckpointStore) { st.Spec.CredentialsSecretName = "wrong-credentials" },
			status: metav1.ConditionFalse, reason: v1.ReasonCredentialsRejected, message: "rejected the credentials"},
		{name: "unreachable", edit: func(st *v1.CheckpointStore) { st.Spec.S3.Endpoint = "http://" + testenv.ClosedAddr(t) },
			status: metav1.ConditionFalse, reason: v1.ReasonUnreachable, message: "connection refused"},
		{name: "conditional", edit: func(st *v1.CheckpointStore) { st.Spec.S3.Endpoint = ignoring.Server().URL },
			status: metav1.ConditionFalse, reason: v1.ReasonConditionalWritesIgnored, message: "If-None-Match"},
		{name: "cabundle", edit: func(st *v1.CheckpointStore) { st.Spec.S3.CABundle = []byte("not a certificate") },
			status: metav1.ConditionFalse, reason: v1.ReasonInvalidSettings, message: "caBundle"},
		{name: "nosecret", edit: func(st *v1.CheckpointStore) { st.Spec.CredentialsSecretName = "absent" },
			status: metav1.ConditionUnknown, reason: v1.ReasonNoCredentials, message: "looked in " + f.ns},
		{name: "nonamespace", edit: func(st *v1.CheckpointStore) { st.Spec.AllowedNamespaces = nil },
			status: metav1.ConditionUnknown, reason: v1.ReasonNoCredentials, message: "no namespace is allowed yet"},
		{name: "selector", edit: func(st *v1.CheckpointStore) {
			st.Spec.AllowedNamespaces = nil
			st.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": f.ns}}
		}, status: metav1.ConditionTrue, reason: v1.ReasonProbed, message: "With Secret " + f.ns + "/s3-credentials"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := f.newStore(tc.name, tc.edit)
			st = f.eventuallyStoreReady(st.Name, tc.status, tc.reason)
			c := meta.FindStatusCondition(st.Status.Conditions, v1.ConditionReady)
			if !strings.Contains(c.Message, tc.message) {
				t.Errorf("Ready message = %q, want it to contain %q", c.Message, tc.message)
			}
			if strings.Contains(c.Message, f.s3.SecretKey) || strings.Contains(c.Message, "not-the-secret") {
				t.Errorf("Ready message %q shows a secret", c.Message)
			}
			if st.Status.LastProbeTime == nil || !slices.Contains(st.Finalizers, controller.StoreFinalizer) {
				t.Errorf("status = %+v, finalizers %v; want a probe time and %s", st.Status, st.Finalizers, controller.StoreFinalizer)
			}
			if tc.status != metav1.ConditionUnknown && st.Status.ProbedNamespace != f.ns {
				t.Errorf("probed namespace = %q, want %q", st.Status.ProbedNamespace, f.ns)
			}
		})
	}

	// The probe leaves nothing behind in the bucket. The Ready stores go on being probed, so
	// a listing may catch one probe's object between its create and its delete: a leftover is
	// one that stays.
	eventually(t, "the probes' objects to be gone from the bucket", func() error {
		for obj := range f.s3.Client(t).ListObjectsIter(context.Background(), f.s3.Bucket, minio.ListObjectsOptions{Recursive: true}) {
			return fmt.Errorf("the probe left %s (err %v)", obj.Key, obj.Err)
		}
		return nil
	})

	// A fixed store is Ready after its next probe: a spec change probes at once.
	st := f.getStore(f.ns + "-bucket")
	st.Spec.S3.Bucket = f.s3.Bucket
	if err := f.c.Update(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	f.eventuallyStoreReady(st.Name, metav1.ConditionTrue, v1.ReasonProbed)
}

// TestStoreWatchesItsSecret: a store created before its credentials Secret is probed as soon
// as the Secret is created, not at its next probe (2 minutes here); deleting the Secret it was
// probed with probes it again at once.
func TestStoreWatchesItsSecret(t *testing.T) {
	f := newFixture(t, testenv.ControlPlane(t))
	f.startStores()
	st := f.newStore("late", func(st *v1.CheckpointStore) { st.Spec.CredentialsSecretName = "late-credentials" })
	f.eventuallyStoreReady(st.Name, metav1.ConditionUnknown, v1.ReasonNoCredentials)

	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "late-credentials", Namespace: f.ns},
		StringData: map[string]string{controller.EnvAccessKeyID: f.s3.AccessKey, controller.EnvSecretAccessKey: f.s3.SecretKey},
	}
	f.create(sec)
	f.eventuallyStoreReady(st.Name, metav1.ConditionTrue, v1.ReasonProbed)

	if err := f.c.Delete(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	f.eventuallyStoreReady(st.Name, metav1.ConditionUnknown, v1.ReasonNoCredentials)
}

// TestStoreInUse counts a store's queries and holds its deletion while one names it; the
// deletion stops the query's engine meanwhile, and deleting the query lets the store go.
func TestStoreInUse(t *testing.T) {
	f := newFixture(t, testenv.ControlPlane(t))
	f.startManager(nil)
	f.startStores()
	ctx := context.Background()
	f.create(f.query("orders").Obj())
	f.create(f.query("clicks").Obj())
	_, d := f.engine("orders")
	f.runPod(d)
	f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionTrue, v1.ReasonRunning)
	eventually(t, "the store counts 2 queries", func() error {
		if n := f.getStore(f.store.Name).Status.Queries; n != 2 {
			return fmt.Errorf("queries = %d", n)
		}
		return nil
	})

	if err := f.c.Delete(ctx, f.store); err != nil {
		t.Fatal(err)
	}
	st := f.eventuallyStoreReady(f.store.Name, metav1.ConditionFalse, v1.ReasonDeleting)
	if msg := meta.FindStatusCondition(st.Status.Conditions, v1.ConditionReady).Message; !strings.Contains(msg, f.ns+"/orders") {
		t.Errorf("Deleting message = %q, want it to name %s/orders", msg, f.ns)
	}
	q := f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionFalse, v1.ReasonStoreRefused)
	if q.Status.Phase != v1.PhaseBlocked || !strings.Contains(condition(q, v1.ConditionReady).Message, "is being deleted") {
		t.Errorf("status = %s / %+v, want Blocked saying the store is being deleted", q.Status.Phase, condition(q, v1.ConditionReady))
	}
	f.eventuallyReplicas("orders", 0)

	// One query goes: the deletion still waits for the other.
	for _, name := range []string{"orders", "clicks"} {
		if err := f.c.Delete(ctx, f.get(name)); err != nil {
			t.Fatal(err)
		}
		if name == "orders" {
			eventually(t, "the store counts 1 query", func() error {
				if n := f.getStore(f.store.Name).Status.Queries; n != 1 {
					return fmt.Errorf("queries = %d", n)
				}
				return nil
			})
		}
	}
	eventually(t, "the store is gone", func() error {
		err := f.c.Get(ctx, client.ObjectKey{Name: f.store.Name}, &v1.CheckpointStore{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("get = %v", err)
	})
}

// TestRevokedStoreStopsEngine: a store that stops allowing a namespace, or is deleted
// outright (no StoreReconciler holds it), stops the namespace's engines; allowed again, they
// run again.
func TestRevokedStoreStopsEngine(t *testing.T) {
	f := newFixture(t, testenv.ControlPlane(t))
	f.startManager(nil)
	ctx := context.Background()
	f.create(f.query("orders").Obj())
	_, d := f.engine("orders")
	f.runPod(d)
	f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionTrue, v1.ReasonRunning)

	f.editStore(func(st *v1.CheckpointStore) { st.Spec.AllowedNamespaces = []string{"someone-else"} })
	q := f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionFalse, v1.ReasonStoreRefused)
	msg := condition(q, v1.ConditionReady).Message
	if q.Status.Phase != v1.PhaseBlocked || !strings.Contains(msg, "may not use CheckpointStore") || !strings.Contains(msg, "no engine runs") {
		t.Errorf("status = %s / %q, want Blocked saying the namespace may not use the store and no engine runs", q.Status.Phase, msg)
	}
	f.eventuallyReplicas("orders", 0)

	f.editStore(func(st *v1.CheckpointStore) { st.Spec.AllowedNamespaces = []string{f.ns} })
	f.eventuallyReplicas("orders", 1)

	if err := f.c.Delete(ctx, f.store); err != nil {
		t.Fatal(err)
	}
	// The refusal that names the deleted store: the status may still hold the earlier refusal
	// (the namespace not allowed) if the controller has not yet written the status of the store
	// allowing it again.
	f.eventuallyConditionSaying("orders", v1.ConditionReady, metav1.ConditionFalse, v1.ReasonStoreRefused, "Not found")
	f.eventuallyReplicas("orders", 0)
}

// TestCredentialsSecretWatched: deleting the store's credentials Secret stops the query's
// engine at once, not at the next resync (an hour here) nor when a cached read of the Secret
// expires, with Ready=False SecretMissing naming the Secret and a Warning Event; creating it
// again runs the engine again.
func TestCredentialsSecretWatched(t *testing.T) {
	f := newFixture(t, testenv.ControlPlane(t))
	f.startManager(nil, controller.WithResync(time.Hour))
	ctx := context.Background()
	f.create(f.query("orders").Obj())
	f.eventuallyCondition("orders", v1.ConditionCheckpointReachable, metav1.ConditionTrue, v1.ReasonNoCheckpoint)
	f.eventuallyReplicas("orders", 1)

	var sec corev1.Secret
	if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "s3-credentials"}, &sec); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Delete(ctx, &sec); err != nil {
		t.Fatal(err)
	}
	q := f.eventuallyCondition("orders", v1.ConditionReady, metav1.ConditionFalse, v1.ReasonSecretMissing)
	if msg := condition(q, v1.ConditionReady).Message; q.Status.Phase != v1.PhasePending || !strings.Contains(msg, "Secret "+f.ns+"/s3-credentials") {
		t.Errorf("phase %s, Ready message %q; want Pending, naming the Secret", q.Status.Phase, msg)
	}
	f.eventuallyReplicas("orders", 0)
	if e := f.event("orders", v1.ReasonSecretMissing); e.Type != corev1.EventTypeWarning || !strings.Contains(e.Note, "s3-credentials") {
		t.Errorf("SecretMissing event = %s %q, want a Warning naming the Secret", e.Type, e.Note)
	}

	f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3-credentials", Namespace: f.ns}, Data: sec.Data})
	f.eventuallyReplicas("orders", 1)
	f.eventuallyCondition("orders", v1.ConditionCheckpointReachable, metav1.ConditionTrue, v1.ReasonNoCheckpoint)
}

func (f *fixture) editStore(edit func(*v1.CheckpointStore)) {
	f.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		st := f.getStore(f.store.Name)
		edit(st)
		return f.c.Update(context.Background(), st)
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// eventuallyReplicas waits until the query's engine Deployment asks for n replicas.
func (f *fixture) eventuallyReplicas(name string, n int32) {
	f.t.Helper()
	eventually(f.t, fmt.Sprintf("the engine of %s scaled to %d", name, n), func() error {
		var d appsv1.Deployment
		if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: controller.EngineName(name)}, &d); err != nil {
			return err
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != n {
			return fmt.Errorf("replicas = %v", d.Spec.Replicas)
		}
		return nil
	})
}
