package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
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
	// now is the writer's clock, which times its hint writes; every commit moves it on by
	// every, the time between the query's batches.
	now   time.Time
	every time.Duration
	// history holds the status a whole read showed after each write of the writer: a
	// poll's status must be one of them.
	history []v1.StreamingQueryStatus
}

func newPollWorld(t *testing.T) *pollWorld {
	t.Helper()
	ctx := context.Background()
	c := testenv.Client(t, testenv.ControlPlane(t))
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
	w := &pollWorld{t: t, proxy: &counter{proxy: proxy}, cps: checkpoints{reader: c},
		now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), every: 2 * checkpoint.HintMaxAge}
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
	var err error
	if w.direct, err = s3.Open(ctx, srv.Bucket, ns+"/orders",
		s3.WithEndpoint(srv.URL), s3.WithRegion(srv.Region), s3.WithCredentials(srv.AccessKey, srv.SecretKey, "")); err != nil {
		t.Fatal(err)
	}
	if w.writer, err = checkpoint.Claim(ctx, w.direct, checkpoint.Owner{Namespace: ns, Name: "orders", UID: "uid-1"},
		checkpoint.WithClock(func() time.Time { return w.now })); err != nil {
		t.Fatal(err)
	}
	shape, err := compat.ShapeOf(&w.q.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := compat.RecordShape(ctx, w.writer, 0, shape); err != nil {
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
	w.record()
}

func (w *pollWorld) commit(b int64) {
	w.t.Helper()
	w.now = w.now.Add(w.every)
	lag := 100 - b
	err := w.writer.AddCommit(context.Background(), checkpoint.Commit{BatchID: b, Progress: checkpoint.Progress{
		Timestamp: time.UnixMilli(1_700_000_001_000 + b).UTC(), NumInputRows: 10 + b, NumOutputRows: 7,
		DurationMs: map[string]int64{"triggerExecution": 500},
		Sources:    []checkpoint.SourceProgress{{Source: "orders", EndOffset: json.RawMessage(fmt.Sprintf(`{"files":%d}`, b+1)), NumInputRows: 10 + b, Lag: &lag}},
	}})
	if err != nil {
		w.t.Fatal(err)
	}
	w.record()
}

// batches plans and commits batches [from, to), and plans batch to when planNext is set.
func (w *pollWorld) batches(from, to int64, planNext bool) {
	w.t.Helper()
	for b := from; b < to; b++ {
		w.plan(b)
		w.commit(b)
	}
	if planNext {
		w.plan(to)
	}
}

// record appends the status a whole read shows now to the history.
func (w *pollWorld) record() {
	w.t.Helper()
	_, snap, err := read(context.Background(), w.direct)
	if err != nil {
		w.t.Fatal(err)
	}
	w.history = append(w.history, statusOf(snap))
}

// statusOf is what the status shows of a snapshot.
func statusOf(s snapshot) v1.StreamingQueryStatus {
	var st v1.StreamingQueryStatus
	fromCheckpoint(&st, &s)
	return st
}

// poll polls once; it returns what the status would show and the requests the poll made.
// It checks the metadata and shape the poll holds against a whole read made directly.
func (w *pollWorld) poll(pl *poller, pods []corev1.Pod) (v1.StreamingQueryStatus, requests) {
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
	if diff := cmp.Diff(want.shape, got.shape); diff != "" || got.meta != want.meta {
		w.t.Errorf("poll read metadata %+v, shape diff %s; want %+v", got.meta, diff, want.meta)
	}
	return statusOf(got), n
}

// check polls once and compares what the status would show with a whole read of the
// checkpoint made directly; it returns the requests the poll made.
func (w *pollWorld) check(pl *poller, pods []corev1.Pod) requests {
	w.t.Helper()
	got, n := w.poll(pl, pods)
	if diff := cmp.Diff(w.history[len(w.history)-1], got); diff != "" {
		w.t.Errorf("status from the poll (-whole read +poll):\n%s", diff)
	}
	return n
}

// checkRecent polls once and checks that the status shows one the checkpoint went
// through, at most HintInterval-1 batches behind its newest commit; it returns the
// requests the poll made, whether the status is the current one, and by how many batches
// its commit is behind.
func (w *pollWorld) checkRecent(pl *poller) (_ requests, exact bool, behind int64) {
	w.t.Helper()
	got, n := w.poll(pl, nil)
	now := w.history[len(w.history)-1]
	i := slices.IndexFunc(w.history, func(st v1.StreamingQueryStatus) bool { return cmp.Equal(st, got) })
	switch {
	case i < 0:
		w.t.Errorf("status from the poll is none the checkpoint went through: planned %v committed %v, progress %+v",
			ptrValue(got.LatestPlannedBatch), ptrValue(got.LatestCommittedBatch), got.LastProgress)
	case *got.LatestCommittedBatch < *now.LatestCommittedBatch-(checkpoint.HintInterval-1):
		w.t.Errorf("status from the poll shows batch %d committed, the newest is %d: more than %d behind",
			*got.LatestCommittedBatch, *now.LatestCommittedBatch, checkpoint.HintInterval-1)
	}
	if got.LatestCommittedBatch != nil {
		behind = *now.LatestCommittedBatch - *got.LatestCommittedBatch
	}
	return n, i == len(w.history)-1 || cmp.Equal(now, got), behind
}

func ptrValue(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// steady checks that a poll made at most 2 GETs of small objects and nothing else.
func steady(t *testing.T, what string, n requests) {
	t.Helper()
	t.Logf("%s: %v", what, n)
	if n["GET"] > 2 || n["LIST"] > 0 || n["PUT"] > 0 || n["HEAD"] > 0 || n["DELETE"] > 0 {
		t.Errorf("%s: requests %v, want at most 2 GETs and nothing else", what, n)
	}
}

// TestPollReadsAtMostTwoObjects counts the S3 requests of status polls through a proxy in
// front of a real S3 server, while a writer adds batches as an engine would: slowly (a
// batch every 2 s: the hint is exact) and busily (a batch every 100 ms: the hint is
// rewritten every HintInterval batches).
func TestPollReadsAtMostTwoObjects(t *testing.T) {
	w := newPollWorld(t)
	w.batches(0, 3, true)
	pl := &poller{}

	first := w.check(pl, nil)
	t.Logf("first poll (every poll before polls remembered): %v", first)

	steady(t, "unchanged", w.check(pl, nil))
	steady(t, "unchanged again", w.check(pl, nil))
	w.commit(3)
	// The first commit after a whole read also reads the shape entry of the batch after
	// the one that read saw committed (TestPollFollowsAShapeOnceItsBatchCommits): one GET more.
	if n := w.check(pl, nil); n["GET"] > 3 || len(n) > 1 {
		t.Errorf("the running batch committed, the first commit since the whole read: requests %v, want at most 3 GETs and nothing else", n)
	}
	steady(t, "unchanged", w.check(pl, nil))
	w.plan(4)
	steady(t, "the next batch started", w.check(pl, nil))
	w.commit(4)
	steady(t, "that batch committed", w.check(pl, nil))

	// A slow query that ran several batches since the last poll: its hint is exact.
	w.batches(5, 8, false)
	steady(t, "three slow batches later", w.check(pl, nil))
	w.batches(8, 11, true)
	// The hint and the commit it names show the logs as they stood when it committed, without
	// the batch that started since; the next poll's probe finds it.
	n, exact, _ := w.checkRecent(pl)
	steady(t, "three slow batches later, the next one running", n)
	if exact {
		t.Errorf("the poll after three slow batches shows the running batch: want the logs as the commit left them")
	}
	steady(t, "unchanged, the batch running", w.check(pl, nil))

	// A busy query: many batches between polls, the hint rewritten every 4th. Every poll
	// reads the hint and the commit it names, and shows the logs as they stood then.
	w.every = 100 * time.Millisecond
	next := int64(11) // the running batch
	lagged := false
	for round, n := range []int64{6, 7, 5, 9, 4, 8} {
		w.commit(next)
		w.batches(next+1, next+n, true)
		next += n
		got, _, behind := w.checkRecent(pl)
		steady(t, fmt.Sprintf("busy, %d batches since the last poll (round %d, %d behind)", n, round, behind), got)
		lagged = lagged || behind > 0
	}
	if !lagged {
		t.Errorf("no busy poll found the hint behind the newest commit: the test does not cover that case")
	}
	// It stops: the hint stays where the last burst left it, and polls catch up one log
	// entry at a time.
	w.commit(next)
	next++
	caughtUp := false
	for i := 0; i < 2*(checkpoint.HintInterval-1)+1 && !caughtUp; i++ {
		var n requests
		n, caughtUp, _ = w.checkRecent(pl)
		steady(t, fmt.Sprintf("stopped after a burst, poll %d", i+1), n)
	}
	if !caughtUp {
		t.Errorf("the status did not catch up with a stopped query within %d polls", 2*(checkpoint.HintInterval-1)+1)
	}
	steady(t, "stopped, caught up", w.check(pl, nil))

	// Someone deletes the newest commit to have its batch replayed: the hint names a missing
	// commit, so the poll reads the head afresh, and later polls do not trust that hint.
	w.every = 2 * checkpoint.HintMaxAge
	w.plan(next)
	w.commit(next)
	if err := w.direct.Delete(context.Background(), checkpoint.CommitKey(next)); err != nil {
		t.Fatal(err)
	}
	w.record()
	if n := w.check(pl, nil); n["GET"] <= 2 {
		t.Errorf("after the newest commit was deleted: requests %v, want the head read afresh", n)
	} else {
		t.Logf("the hinted commit was deleted: %v", n)
	}
	steady(t, "unchanged after the deletion", w.check(pl, nil))
	w.commit(next) // the replay
	steady(t, "the replayed batch committed", w.check(pl, nil))

	// An engine that starts may record a new shape: the next poll reads the checkpoint whole.
	pods := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{UID: "pod-1"}, Status: corev1.PodStatus{
		ContainerStatuses: []corev1.ContainerStatus{{Name: EngineContainer, Ready: true}}}}}
	if n := w.check(pl, pods); n["LIST"] == 0 {
		t.Errorf("after an engine start: requests %v, want a whole read (with the shape listing)", n)
	}
	steady(t, "unchanged engine", w.check(pl, pods))

	// So does a new generation: the controller judges it against a fresh shape.
	w.q.Generation++
	if n := w.check(pl, pods); n["LIST"] == 0 {
		t.Errorf("after a spec change: requests %v, want a whole read", n)
	}
	steady(t, "unchanged spec", w.check(pl, pods))

	// A quiet query with no batch in flight: after quietPolls polls that found nothing, a poll
	// reads only the next offsets entry; when it appears, the poll goes on as a normal one.
	for i := range quietPolls {
		steady(t, fmt.Sprintf("quiet, poll %d", i+1), w.check(pl, pods))
	}
	if n := w.check(pl, pods); n["GET"] != 1 || len(n) != 1 {
		t.Errorf("a quiet query's poll: requests %v, want one GET", n)
	}
	w.plan(next + 1)
	if n := w.check(pl, pods); n["GET"] > 3 || len(n) != 1 {
		t.Errorf("the poll that finds the quiet query's next batch: requests %v, want at most 3 GETs", n)
	}
	steady(t, "the next batch running", w.check(pl, pods))
}

// TestPollFollowsAShapeOnceItsBatchCommits: a shape an engine records for its first batch is
// not the committed batches' until that batch commits; the poll holds the old one until then
// and reads the new one at the commit, once (w.poll compares both with a whole read).
func TestPollFollowsAShapeOnceItsBatchCommits(t *testing.T) {
	w := newPollWorld(t)
	w.batches(0, 3, false)
	pl := &poller{}
	w.check(pl, nil)
	held := func() compat.Shape {
		e := pl.entry(types.NamespacedName{Namespace: w.q.Namespace, Name: w.q.Name})
		if e == nil {
			t.Fatal("the poll holds nothing")
		}
		return e.snap.shape
	}
	old := held()

	changed := w.q.DeepCopy()
	changed.Spec.Sources[0].Files.MaxFilesPerTrigger = ptr.To[int32](7)
	shape, err := compat.ShapeOf(&changed.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := compat.RecordShape(context.Background(), w.writer, 3, shape); err != nil {
		t.Fatal(err)
	}
	w.poll(pl, nil)
	if !held().Equal(old) {
		t.Fatalf("before batch 3 commits the poll holds %+v, want the committed batches' shape", held())
	}
	w.batches(3, 4, false)
	w.poll(pl, nil)
	if !held().Equal(shape) {
		t.Errorf("after batch 3 committed the poll holds %+v, want the shape recorded for it", held())
	}
	w.batches(4, 5, false)
	steady(t, "the next commit", w.check(pl, nil))
}

func TestNextPoll(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	r := &QueryReconciler{clock: clocktesting.NewFakePassiveClock(now), resync: 30 * time.Second, follow: 5 * time.Second}
	status := func(phase v1.Phase, planned, committed int64, at time.Time) v1.StreamingQueryStatus {
		return v1.StreamingQueryStatus{Phase: phase, LatestPlannedBatch: &planned, LatestCommittedBatch: &committed,
			LastProgress: &v1.BatchProgress{Batch: committed, Timestamp: metav1.NewTime(at), DurationMs: map[string]int64{"triggerExecution": 2000}}}
	}
	idle := status(v1.PhaseRunning, 7, 7, now.Add(-time.Hour))
	tests := []struct {
		name     string
		trigger  string
		old, now v1.StreamingQueryStatus
		want     time.Duration
	}{
		{"not running", "", idle, status(v1.PhaseSuspended, 7, 7, now), 30 * time.Second},
		{"nothing committed yet", "", v1.StreamingQueryStatus{}, v1.StreamingQueryStatus{Phase: v1.PhaseRunning}, 30 * time.Second},
		{"a batch in flight", "", idle, status(v1.PhaseRunning, 8, 7, now.Add(-time.Hour)), 5 * time.Second},
		{"a new commit, back to back", "", idle, status(v1.PhaseRunning, 8, 8, now.Add(-time.Second)), 5 * time.Second},
		{"idle", "", idle, idle, 30 * time.Second},
		// Batch 8 started 10 s ago and took 2 s: batch 9 starts in 10 s and commits 2 s later.
		{"a 20s trigger", "20s", idle, status(v1.PhaseRunning, 8, 8, now.Add(-10*time.Second)), 13 * time.Second},
		{"a 1s trigger", "1s", idle, status(v1.PhaseRunning, 8, 8, now.Add(-time.Second)), 5 * time.Second},
		{"a 10m trigger", "10m", idle, status(v1.PhaseRunning, 8, 8, now.Add(-time.Minute)), 30 * time.Second},
		{"a trigger with nothing to do", "20s", idle, idle, 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := querytest.Make("q", "ns").RateSource("ticks", 5).ConsoleSink().Obj()
			q.Spec.Trigger.ProcessingTime = v1.Duration(tt.trigger)
			q.Status = tt.now
			if got := r.nextPoll(q, &tt.old); got != tt.want {
				t.Errorf("nextPoll() = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestEngineFingerprintChangesWhenTheEngineEnds: the poll reads the checkpoint whole when an
// engine starts, restarts, becomes ready, and when it ends — an unready engine may still be
// committing its last batches, so a Completed query's status comes from a read after the end.
func TestEngineFingerprintChangesWhenTheEngineEnds(t *testing.T) {
	pod := func(ready bool, state corev1.ContainerState) []corev1.Pod {
		return []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{UID: "p1"}, Status: corev1.PodStatus{
			ContainerStatuses: []corev1.ContainerStatus{{Name: EngineContainer, Ready: ready, State: state}}}}}
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	ended := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
	seen := map[string]string{}
	for name, pods := range map[string][]corev1.Pod{
		"ready": pod(true, running), "unready": pod(false, running), "ended": pod(false, ended),
	} {
		fp := engineFingerprint(pods)
		if other, ok := seen[fp]; ok {
			t.Errorf("%s and %s have one fingerprint %q", name, other, fp)
		}
		seen[fp] = name
	}
}
