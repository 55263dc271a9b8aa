package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/compat"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// requests counts S3 requests by kind: GET (of an object), LIST, PUT, HEAD, DELETE.
type requests map[string]int

// counter counts the requests through a testenv S3 proxy since the last take.
type counter struct {
	proxy *testenv.S3Proxy
	seen  int
}

func (c *counter) take() requests {
	log := c.proxy.Log()
	n := requests{}
	for _, r := range log[c.seen:] {
		kind := r.Method
		if r.List {
			kind = "LIST"
		}
		n[kind]++
	}
	c.seen = len(log)
	return n
}

// pollWorld is a query whose checkpoint store sits behind a counting proxy, and a writer
// that writes its checkpoint directly, as its engine would.
type pollWorld struct {
	t      *testing.T
	proxy  *counter
	cps    checkpoints
	q      *v1.StreamingQuery
	p      placement
	writer *checkpoint.Checkpoint
	direct checkpoint.Store
}

func newPollWorld(t *testing.T) *pollWorld {
	t.Helper()
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(testenv.ControlPlane(t), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	srv := testenv.S3(t)
	ns := fmt.Sprintf("poll-%d", time.Now().UnixNano())
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: ns},
			StringData: map[string]string{EnvAccessKeyID: srv.AccessKey, EnvSecretAccessKey: srv.SecretKey}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	proxy := testenv.NewS3Proxy(t, srv, 1) // it injects nothing: it counts
	w := &pollWorld{t: t, proxy: &counter{proxy: proxy}, cps: checkpoints{reader: c}}
	w.q = querytest.Make("orders", ns).
		FilesSource("orders", "s3://"+srv.Bucket+"/landing/orders", v1.FormatJSON, querytest.Col("id", v1.TypeString)).
		FilesSink("s3://"+srv.Bucket+"/out/orders", v1.FormatJSON).
		Checkpoint("s3://" + srv.Bucket + "/" + ns + "/orders").Obj()
	w.q.UID, w.q.Generation = "uid-1", 1
	w.p = placement{location: w.q.Spec.Checkpoint.Location, store: &v1.CheckpointStore{
		ObjectMeta: metav1.ObjectMeta{Name: "poll", Generation: 1},
		Spec: v1.CheckpointStoreSpec{
			S3:                    v1.S3Store{Endpoint: proxy.Server().URL, Bucket: srv.Bucket, Region: srv.Region},
			CredentialsSecretName: "s3",
		},
	}}
	if w.direct, err = s3.Open(ctx, srv.Bucket, ns+"/orders",
		s3.WithEndpoint(srv.URL), s3.WithRegion(srv.Region), s3.WithCredentials(srv.AccessKey, srv.SecretKey, "")); err != nil {
		t.Fatal(err)
	}
	if w.writer, err = checkpoint.Claim(ctx, w.direct, checkpoint.Owner{Namespace: ns, Name: "orders", UID: "uid-1"}); err != nil {
		t.Fatal(err)
	}
	shape, err := compat.ShapeOf(&w.q.Spec)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(shape)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.writer.AddShape(ctx, 0, data); err != nil {
		t.Fatal(err)
	}
	return w
}

// plan and commit write batch b's offsets entry and commit as an engine does.
func (w *pollWorld) plan(b int64) {
	w.t.Helper()
	err := w.writer.AddOffsets(context.Background(), checkpoint.Offsets{BatchID: b, BatchTimestampMs: 1_700_000_000_000 + b, BatchWatermarkMs: 1_600_000_000_000 + b,
		Sources: []checkpoint.SourceOffset{{Source: "orders", Offset: json.RawMessage(fmt.Sprintf(`{"files":%d}`, b+1))}}})
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *pollWorld) commit(b int64) {
	w.t.Helper()
	lag := 100 - b
	err := w.writer.AddCommit(context.Background(), checkpoint.Commit{BatchID: b, Progress: checkpoint.Progress{
		Timestamp: time.UnixMilli(1_700_000_001_000 + b).UTC(), NumInputRows: 10 + b, NumOutputRows: 7,
		DurationMs: map[string]int64{"triggerExecution": 500},
		Sources:    []checkpoint.SourceProgress{{Source: "orders", EndOffset: json.RawMessage(fmt.Sprintf(`{"files":%d}`, b+1)), NumInputRows: 10 + b, Lag: &lag}},
	}})
	if err != nil {
		w.t.Fatal(err)
	}
}

// statusOf is what the status shows of a snapshot.
func statusOf(s snapshot) v1.StreamingQueryStatus {
	var st v1.StreamingQueryStatus
	(&QueryReconciler{}).fromCheckpoint(&st, &s)
	return st
}

// check polls once and compares what the status would show with a whole read of the
// checkpoint made directly; it returns the requests the poll made.
func (w *pollWorld) check(pl *poller, pods []corev1.Pod) requests {
	w.t.Helper()
	w.proxy.take()
	got, err := pl.poll(context.Background(), w.cps, w.q, w.p, pods)
	if err != nil {
		w.t.Fatalf("poll = %v", err)
	}
	n := w.proxy.take()
	_, want, err := read(context.Background(), w.direct)
	if err != nil {
		w.t.Fatal(err)
	}
	if diff := cmp.Diff(statusOf(want), statusOf(got)); diff != "" {
		w.t.Errorf("status from the poll (-whole read +poll):\n%s", diff)
	}
	if diff := cmp.Diff(want.shape, got.shape); diff != "" || got.meta != want.meta {
		w.t.Errorf("poll read metadata %+v, shape diff %s; want %+v", got.meta, diff, want.meta)
	}
	return n
}

// TestPollReadsAtMostTwoObjects counts the S3 requests of status polls through a proxy in
// front of a real S3 server, while a writer adds batches as an engine would.
func TestPollReadsAtMostTwoObjects(t *testing.T) {
	w := newPollWorld(t)
	for b := range int64(3) {
		w.plan(b)
		w.commit(b)
	}
	w.plan(3)
	pl := &poller{}

	first := w.check(pl, nil)
	t.Logf("first poll (every poll before polls remembered): %v", first)

	steady := func(what string, pods []corev1.Pod) {
		t.Helper()
		n := w.check(pl, pods)
		t.Logf("%s: %v", what, n)
		if n["GET"] > 2 || n["LIST"] > 0 || n["PUT"] > 0 || n["HEAD"] > 0 {
			t.Errorf("%s: requests %v, want at most 2 GETs and nothing else", what, n)
		}
	}
	steady("unchanged", nil)
	steady("unchanged again", nil)
	w.commit(3)
	steady("the running batch committed", nil)
	steady("unchanged", nil)
	w.plan(4)
	steady("the next batch started", nil)
	w.commit(4)
	steady("that batch committed", nil)

	// Several batches since the last poll: the two reads do not pin the logs down, so the
	// head is read afresh from the hint (metadata, hint, 6 entries of each log, the offsets of
	// the newest commit); the next poll does that at once, then the polls are cheap again.
	for b := int64(5); b < 11; b++ {
		w.plan(b)
		w.commit(b)
	}
	w.plan(11)
	for _, what := range []string{"six batches later", "after a jump"} {
		n := w.check(pl, nil)
		t.Logf("%s: %v", what, n)
		if n["LIST"] > 0 || n["GET"] > 17 {
			t.Errorf("%s: requests %v, want no LIST and at most 17 GETs", what, n)
		}
	}
	steady("unchanged after the jump", nil)

	// An engine that starts may record a new shape: the next poll reads the checkpoint whole.
	pods := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{UID: "pod-1"}, Status: corev1.PodStatus{
		ContainerStatuses: []corev1.ContainerStatus{{Name: EngineContainer, Ready: true}}}}}
	if n := w.check(pl, pods); n["LIST"] == 0 {
		t.Errorf("after an engine start: requests %v, want a whole read (with the shape listing)", n)
	}
	steady("unchanged engine", pods)

	// So does a new generation: the controller judges it against a fresh shape.
	w.q.Generation++
	if n := w.check(pl, pods); n["LIST"] == 0 {
		t.Errorf("after a spec change: requests %v, want a whole read", n)
	}
	steady("unchanged spec", pods)
}
