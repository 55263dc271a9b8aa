package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/compat"
	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// lockstepCluster is a test's namespace on the control plane whose API server calls
// Lockstep's admission webhooks, served by the real controller in this test binary, with a
// bucket on a real S3 server, a credentials Secret, and a CheckpointStore for the namespace.
type lockstepCluster struct {
	*testCluster
	s3    *testenv.S3Server
	store string
}

// newLockstepCluster starts a lockstepCluster; more registers more of the controller's reconcilers with its manager (the CheckpointStore
// reconciler, for a test of the store's status).
func newLockstepCluster(t testing.TB, more ...func(ctrl.Manager) error) *lockstepCluster {
	t.Helper()
	wh := testenv.ControlPlaneWithWebhooks(t)
	c := &lockstepCluster{testCluster: newTestCluster(t, wh.Config), s3: testenv.S3(t)}
	c.store = c.namespace
	ctx := context.Background()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s3-credentials", Namespace: c.namespace},
		StringData: map[string]string{controller.EnvAccessKeyID: c.s3.AccessKey, controller.EnvSecretAccessKey: c.s3.SecretKey},
	}
	if _, err := c.kube.CoreV1().Secrets(c.namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.createStore(t, c.store, map[string]any{
		"s3":                    map[string]any{"endpoint": c.s3.URL, "bucket": c.s3.Bucket, "region": c.s3.Region},
		"credentialsSecretName": "s3-credentials",
		"allowedNamespaces":     []any{c.namespace},
	})
	c.startController(t, wh, more...)
	return c
}

// startController runs the controller's manager, reconciler and webhooks, until the test
// ends.
func (c *lockstepCluster) startController(t testing.TB, wh *testenv.WebhookControlPlane, more ...func(ctrl.Manager) error) {
	t.Helper()
	opts := ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  controller.CacheOptions(),
		Controller:             config.Controller{SkipNameValidation: ptrTo(true)},
		WebhookServer:          wh.Server(),
	}
	opts.Cache.DefaultNamespaces = map[string]cache.Config{c.namespace: {}}
	mgr, err := ctrl.NewManager(wh.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := controller.NewQueryReconciler(mgr, controller.WithResync(500*time.Millisecond), controller.WithEngine(controller.EngineSettings{Image: "ghcr.io/lockstep-dev/lockstep:v0.0.0-test"})).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := controller.NewQueryWebhook(mgr).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	for _, setup := range more {
		if err := setup(mgr); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	deadline := time.Now().Add(eventually)
	for mgr.GetWebhookServer().StartedChecker()(nil) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the webhook server did not start")
		}
		time.Sleep(tick)
	}
}

func ptrTo[T any](v T) *T { return &v }

// location is where the store puts a query's checkpoint: its default location.
func (c *lockstepCluster) location(name string) string {
	return fmt.Sprintf("s3://%s/%s/%s", c.s3.Bucket, c.namespace, name)
}

// path is an S3 folder of the test's bucket, for sources and sinks.
func (c *lockstepCluster) path(folder string) string {
	return fmt.Sprintf("s3://%s/%s/", c.s3.Bucket, folder)
}

// query is baseQuery on the test's store and bucket.
func (c *lockstepCluster) query() queryConfig {
	q := baseQuery()
	q.Source = c.path("landing/orders")
	q.Sink = c.path("out/orders")
	q.Location = ""
	q.Store = c.store
	return q
}

// writeCheckpoint writes, at the query's checkpoint location, what an engine running the
// query as it is stored now would have written after batch 0: metadata claiming the
// checkpoint for the query, the query's shape, and batch 0's offsets and commit.
func (c *lockstepCluster) writeCheckpoint(t testing.TB, name string) {
	t.Helper()
	ctx := context.Background()
	u, err := c.get(t, name)
	if err != nil {
		t.Fatal(err)
	}
	var q v1.StreamingQuery
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &q); err != nil {
		t.Fatal(err)
	}
	prefix := c.namespace + "/" + name
	if q.Spec.Checkpoint.Location != c.location(name) {
		t.Fatalf("checkpoint location %q, want the store's %q", q.Spec.Checkpoint.Location, c.location(name))
	}
	store, err := s3.Open(ctx, c.s3.Bucket, prefix,
		s3.WithEndpoint(c.s3.URL), s3.WithRegion(c.s3.Region), s3.WithCredentials(c.s3.AccessKey, c.s3.SecretKey, ""))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := checkpoint.Claim(ctx, store, checkpoint.Owner{Namespace: q.Namespace, Name: q.Name, UID: string(q.UID)})
	if err != nil {
		t.Fatal(err)
	}
	shape, err := compat.ShapeOf(&q.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := compat.RecordShape(ctx, cp, 0, shape); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	offsets := checkpoint.Offsets{BatchID: 0, BatchTimestampMs: now.UnixMilli(), Sources: []checkpoint.SourceOffset{
		{Source: "orders", Offset: json.RawMessage(`{"files":1}`)},
	}}
	if err := cp.AddOffsets(ctx, offsets); err != nil {
		t.Fatal(err)
	}
	commit := checkpoint.Commit{BatchID: 0, Progress: checkpoint.Progress{Timestamp: now, NumInputRows: 10, NumOutputRows: 7}}
	if err := cp.AddCommit(ctx, commit); err != nil {
		t.Fatal(err)
	}
}
