package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/checkpoint/sparkckpt"
	"github.com/lockstep-dev/lockstep/compat"
	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// Waits in these tests: how long for the controller to act, and how often to look.
const (
	timeout  = 30 * time.Second
	interval = 100 * time.Millisecond
	// resync is the reconciler's status refresh in tests.
	resync = 500 * time.Millisecond
	// testEngineImage is the engine image the tests' reconcilers render (no pod pulls it).
	testEngineImage = "ghcr.io/lockstep-dev/lockstep:v0.0.0-test"
)

func TestMain(m *testing.M) {
	// LOCKSTEP_TEST_LOG=1 shows the controller's logs.
	log := logr.Discard()
	if os.Getenv("LOCKSTEP_TEST_LOG") != "" {
		log = funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{Verbosity: 1})
	}
	ctrl.SetLogger(log)
	testenv.Main(m)
}

var nsCounter atomic.Int64

// fixture is one test's world: a namespace, a bucket, a credentials Secret and a
// CheckpointStore that allows the namespace.
type fixture struct {
	t     testing.TB
	cfg   *rest.Config
	c     client.Client // talks to the API server directly, never through a cache
	ns    string
	s3    *testenv.S3Server
	store *v1.CheckpointStore
}

func newFixture(t testing.TB, cfg *rest.Config) *fixture {
	t.Helper()
	c := testenv.Client(t, cfg)
	f := &fixture{t: t, cfg: cfg, c: c, s3: testenv.S3(t)}
	f.ns = fmt.Sprintf("t%d-%s", nsCounter.Add(1), strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())))
	if len(f.ns) > 60 {
		f.ns = f.ns[:60]
	}
	f.ns = strings.TrimRight(f.ns, "-")
	ctx := context.Background()
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns, Labels: map[string]string{"team": f.ns}}})
	f.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s3-credentials", Namespace: f.ns},
		StringData: map[string]string{controller.EnvAccessKeyID: f.s3.AccessKey, controller.EnvSecretAccessKey: f.s3.SecretKey},
	})
	f.store = &v1.CheckpointStore{
		ObjectMeta: metav1.ObjectMeta{Name: f.ns},
		Spec: v1.CheckpointStoreSpec{
			S3:                    v1.S3Store{Endpoint: f.s3.URL, Bucket: f.s3.Bucket, Region: f.s3.Region},
			CredentialsSecretName: "s3-credentials",
			AllowedNamespaces:     []string{f.ns},
		},
	}
	f.create(f.store)
	t.Cleanup(func() { _ = c.Delete(ctx, f.store) })
	return f
}

func (f *fixture) create(obj client.Object, opts ...client.CreateOption) {
	f.t.Helper()
	if err := f.c.Create(context.Background(), obj, opts...); err != nil {
		f.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// startManager runs a manager with the reconciler (and, when webhooks is set, the webhooks
// served for cp) until the test ends.
func (f *fixture) startManager(wh *testenv.WebhookControlPlane, opts ...controller.Option) {
	f.t.Helper()
	f.startManagerWith(wh, nil, opts...)
}

// startManagerWith is startManager with options for the webhooks too.
func (f *fixture) startManagerWith(wh *testenv.WebhookControlPlane, whOpts []controller.WebhookOption, opts ...controller.Option) {
	f.t.Helper()
	mo := ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  controller.CacheOptions(),
		Controller:             controllerConfig(),
	}
	mo.Cache.DefaultNamespaces = map[string]cache.Config{f.ns: {}}
	if wh != nil {
		mo.WebhookServer = wh.Server()
	}
	mgr, err := ctrl.NewManager(f.cfg, mo)
	if err != nil {
		f.t.Fatal(err)
	}
	opts = append([]controller.Option{controller.WithResync(resync), controller.WithEngine(controller.EngineSettings{Image: testEngineImage})}, opts...)
	if err := controller.NewQueryReconciler(mgr, opts...).SetupWithManager(mgr); err != nil {
		f.t.Fatal(err)
	}
	if wh != nil {
		if err := controller.NewQueryWebhook(mgr, whOpts...).SetupWithManager(mgr); err != nil {
			f.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	f.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			f.t.Errorf("manager: %v", err)
		}
	})
	if wh != nil {
		eventually(f.t, "the webhook server serves", func() error {
			return mgr.GetWebhookServer().StartedChecker()(nil)
		})
	}
}

// query returns a query in the fixture's namespace on its store: rate → filter → console, the
// smallest spec the engine supports.
func (f *fixture) query(name string) *querytest.Query {
	return querytest.Make(name, f.ns).
		FilesSource("orders", "s3://"+f.s3.Bucket+"/landing/orders", v1.FormatJSON,
			querytest.Col("id", v1.TypeString), querytest.Col("amount", v1.TypeDouble)).
		Filter("amount > 0.0").
		FilesSink("s3://"+f.s3.Bucket+"/out/"+name, v1.FormatJSON).
		CheckpointStore(f.store.Name)
}

func (f *fixture) get(name string) *v1.StreamingQuery {
	f.t.Helper()
	var q v1.StreamingQuery
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, &q); err != nil {
		f.t.Fatal(err)
	}
	return &q
}

// location is the default checkpoint location of a query of the fixture.
func (f *fixture) location(name string) string {
	return "s3://" + f.s3.Bucket + "/" + f.ns + "/" + name
}

// openCheckpoint opens a query's checkpoint location for writing, as the engine would.
func (f *fixture) openCheckpoint(name string) checkpoint.Store {
	f.t.Helper()
	st, err := s3.Open(context.Background(), f.s3.Bucket, f.ns+"/"+name,
		s3.WithEndpoint(f.s3.URL), s3.WithRegion(f.s3.Region), s3.WithCredentials(f.s3.AccessKey, f.s3.SecretKey, ""))
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

// writeCheckpoint writes what an engine running q would have written after batches
// 0..committed (and planned up to planned): metadata, shape, offsets and commits. opts are
// what the engine adds to the shape from its environment (a postgres sink's server).
func (f *fixture) writeCheckpoint(q *v1.StreamingQuery, planned, committed int64, commitTime time.Time, opts ...compat.Option) checkpoint.Metadata {
	f.t.Helper()
	ctx := context.Background()
	cp := f.claim(q, 0, opts...)
	for b := int64(0); b <= planned; b++ {
		off := checkpoint.Offsets{BatchID: b, BatchTimestampMs: commitTime.UnixMilli() - 1000, Sources: []checkpoint.SourceOffset{
			{Source: "orders", Offset: json.RawMessage(fmt.Sprintf(`{"files":%d}`, b+1))},
		}}
		if err := cp.AddOffsets(ctx, off); err != nil {
			f.t.Fatal(err)
		}
		if b > committed {
			continue
		}
		lag, lagMs := 3-b, (3-b)*1500
		cm := checkpoint.Commit{BatchID: b, Progress: checkpoint.Progress{
			Timestamp: commitTime, NumInputRows: 10, NumOutputRows: 7,
			DurationMs: map[string]int64{"triggerExecution": 500},
			Sources: []checkpoint.SourceProgress{{Source: "orders", EndOffset: json.RawMessage(fmt.Sprintf(`{"files":%d}`, b+1)),
				NumInputRows: 10, Lag: &lag, LagMs: &lagMs}},
		}}
		if err := cp.AddCommit(ctx, cm); err != nil {
			f.t.Fatal(err)
		}
	}
	return cp.Metadata()
}

// claim claims q's checkpoint as its engine does and records the shape of q's spec from batch
// shapeAt.
func (f *fixture) claim(q *v1.StreamingQuery, shapeAt int64, opts ...compat.Option) *checkpoint.Checkpoint {
	f.t.Helper()
	ctx := context.Background()
	records := q.Name
	if q.Spec.Runtime.Spark != nil {
		records += "/" + sparkckpt.RecordsDir // the spark runtime's records, beside Spark's files
	}
	cp, err := checkpoint.Claim(ctx, f.openCheckpoint(records), checkpoint.Owner{Namespace: q.Namespace, Name: q.Name, UID: string(q.UID)})
	if err != nil {
		f.t.Fatal(err)
	}
	shape, err := compat.ShapeOf(&q.Spec, opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := compat.RecordShape(ctx, cp, shapeAt, shape); err != nil {
		f.t.Fatal(err)
	}
	return cp
}

// eventually polls check every interval until it returns nil, failing the test with its last
// error after timeout.
func eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	eventuallyWithin(t, what, timeout, interval, check)
}

// eventuallyWithin is eventually with its own limit and pace, for long waits whose check is
// costly (listing 1,000 queries should not load the server under measurement).
func eventuallyWithin(t testing.TB, what string, limit, every time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s: %v", limit, what, err)
		}
		time.Sleep(every)
	}
}

// update changes the query named name with edit and writes it, retrying on conflicts with
// the controller's own writes.
func (f *fixture) update(name string, edit func(*v1.StreamingQuery), opts ...client.UpdateOption) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		q := f.get(name)
		edit(q)
		return f.c.Update(context.Background(), q, opts...)
	})
}
