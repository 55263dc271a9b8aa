package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/sink"
	"github.com/lockstep-dev/lockstep/engine/source"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// wait bounds how long a test waits for the engine's goroutine.
const wait = 20 * time.Second

// orders is a folder of JSON order files, an output folder and a
// checkpoint location for one files→files query.
type orders struct {
	in, out, ckpt string
	files         int
	want          []engine.Row
}

func newOrders(t *testing.T) *orders {
	t.Helper()
	return &orders{in: t.TempDir(), out: t.TempDir(), ckpt: filepath.Join(t.TempDir(), "ckpt")}
}

// add writes n files of 3 orders each, newer than the ones before, and
// records the rows the query must output for them.
func (o *orders) add(t *testing.T, n int) {
	t.Helper()
	base := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	for range n {
		i := o.files
		o.files++
		var lines []string
		for j := range 3 {
			id := fmt.Sprintf("o-%03d-%d", i, j)
			amount := float64(j) - 0.5 // -0.5 is filtered out
			lines = append(lines, fmt.Sprintf(`{"id":%q,"country":"de","amount":%g,"qty":2}`, id, amount))
			if amount > 0 {
				o.want = append(o.want, engine.Row{id, "DE", amount * 2})
			}
		}
		p := filepath.Join(o.in, fmt.Sprintf("orders-%03d.json", i))
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		at := base.Add(time.Duration(i) * time.Second)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
}

// query is files→files with a filter and a projection, two files a batch.
func (o *orders) query() *querytest.Query {
	return querytest.Make("orders", "shop").
		FilesSource("orders", o.in, v1.FormatJSON,
			querytest.Col("id", v1.TypeString), querytest.Col("country", v1.TypeString),
			querytest.Col("amount", v1.TypeDouble), querytest.Col("qty", v1.TypeLong)).
		EditSource("orders", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = new(int32(2)) }).
		Filter("amount > 0.0").
		Select(querytest.As("id", "id"), querytest.As("country", "country.upperAscii()"), querytest.As("total", "amount * double(qty)")).
		FilesSink(o.out, v1.FormatJSON).
		Checkpoint(o.ckpt)
}

func (o *orders) check(t *testing.T) {
	t.Helper()
	got := enginetest.OutputRowsAt(t, o.out)
	want := append([]engine.Row(nil), o.want...)
	enginetest.SortRows(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

func newQuery(t *testing.T, q *v1.StreamingQuery, opts ...engine.Option) *engine.Query {
	t.Helper()
	eq, err := engine.New(q, enginetest.Registry(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return eq
}

func run(t *testing.T, q *v1.StreamingQuery, opts ...engine.Option) engine.Summary {
	t.Helper()
	sum, err := newQuery(t, q, opts...).Run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return sum
}

func TestAvailableNow(t *testing.T) {
	o := newOrders(t)
	o.add(t, 5)
	rec := enginetest.NewRecorder()
	sum := run(t, o.query().AvailableNow().Obj(), engine.WithObserver(rec))
	if sum.Reason != engine.StopTriggerDone || sum.Batches != 3 || sum.LastCommitted != 2 {
		t.Errorf("Summary = %+v, want 3 batches (2+2+1 files), trigger done", sum)
	}
	if sum.NumInputRows != 15 || sum.NumOutputRows != int64(len(o.want)) {
		t.Errorf("Summary rows = %d in, %d out; want 15, %d", sum.NumInputRows, sum.NumOutputRows, len(o.want))
	}
	if s := rec.Starts(); len(s) != 1 || !s[0].New || s[0].NextBatch != 0 || s[0].Guarantee.Level != v1.GuaranteeExactlyOnce {
		t.Errorf("Start = %+v", s)
	}
	o.check(t)

	// Nothing new: no batch. A new file: one batch, resuming after batch 2.
	if sum := run(t, o.query().AvailableNow().Obj()); sum.Batches != 0 || sum.LastCommitted != 2 {
		t.Errorf("second run = %+v, want no batch", sum)
	}
	o.add(t, 1)
	rec = enginetest.NewRecorder()
	if sum := run(t, o.query().AvailableNow().Obj(), engine.WithObserver(rec)); sum.Batches != 1 || sum.LastCommitted != 3 {
		t.Errorf("third run = %+v, want batch 3", sum)
	}
	if s := rec.Starts()[0]; s.New || s.Replay || s.NextBatch != 3 || s.LastCommitted != 2 {
		t.Errorf("third Start = %+v, want resuming at batch 3", s)
	}
	o.check(t)
}

func TestOnceIgnoresLimits(t *testing.T) {
	o := newOrders(t)
	o.add(t, 5)
	sum := run(t, o.query().Once().Obj())
	if sum.Batches != 1 || sum.NumInputRows != 15 || sum.Reason != engine.StopTriggerDone {
		t.Errorf("Summary = %+v, want one batch of all 15 rows", sum)
	}
	o.check(t)
}

// runAsync runs q in a goroutine; the returned function waits for Run.
func runAsync(t *testing.T, q *engine.Query) func() (engine.Summary, error) {
	t.Helper()
	type result struct {
		sum engine.Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := q.Run(context.Background())
		done <- result{sum, err}
	}()
	return func() (engine.Summary, error) {
		select {
		case r := <-done:
			return r.sum, r.err
		case <-time.After(wait):
			t.Fatalf("Run did not return within %s", wait)
			return engine.Summary{}, nil
		}
	}
}

func TestDefaultTriggerPollsWhenIdle(t *testing.T) {
	o := newOrders(t)
	o.add(t, 3)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	rec := enginetest.NewRecorder()
	q := newQuery(t, o.query().Obj(), engine.WithClock(clk), engine.WithObserver(rec), engine.WithIdlePoll(time.Second))
	result := runAsync(t, q)
	// Batches follow each other at once while there is data.
	for want := range int64(2) {
		if p := rec.Next(t, wait); p.Batch != want {
			t.Fatalf("batch %d committed, want %d", p.Batch, want)
		}
	}
	// Idle: the engine waits for the poll; a new file is read after it.
	o.add(t, 1)
	enginetest.Step(t, clk, time.Second, wait)
	if p := rec.Next(t, wait); p.Batch != 2 || p.NumInputRows != 3 {
		t.Fatalf("after the poll: %+v, want batch 2 with the new file", p)
	}
	enginetest.Step(t, clk, 0, wait) // idle again
	q.Stop()
	sum, err := result()
	if err != nil || sum.Reason != engine.StopRequested || sum.Batches != 3 {
		t.Fatalf("Run = %+v, %v; want stopped after 3 batches", sum, err)
	}
	o.check(t)
}

func TestProcessingTime(t *testing.T) {
	// 10:00:03: the first batch runs at once, the next on the boundary
	// 10:00:10, and so on; a batch that overruns a boundary is followed at
	// once.
	start := time.Date(2026, 1, 5, 10, 0, 3, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	out := t.TempDir()
	rec := enginetest.NewRecorder()
	overrun := func(p engine.Phase, batch int64) {
		if p == engine.PhaseCommitted && batch == 2 {
			clk.Step(25 * time.Second) // batch 2 took 25s: past 10:00:30
		}
	}
	obj := querytest.Make("ticks", "default").RateSource("ticks", 10).
		FilesSink(out, v1.FormatJSON).ProcessingTime("10s").Checkpoint(filepath.Join(t.TempDir(), "ckpt")).Obj()
	q := newQuery(t, obj, engine.WithClock(clk), engine.WithObserver(rec), engine.WithPhaseHook(overrun))
	result := runAsync(t, q)

	if p := rec.Next(t, wait); !p.Timestamp.Equal(start) || p.NumInputRows != 1 {
		t.Fatalf("batch 0 = %+v, want 1 row at %s", p, start)
	}
	enginetest.Step(t, clk, 7*time.Second, wait) // to 10:00:10
	p := rec.Next(t, wait)
	if want := start.Add(7 * time.Second); !p.Timestamp.Equal(want) || p.NumInputRows != 70 {
		t.Fatalf("batch 1 = %v with %d rows, want %v with 70", p.Timestamp, p.NumInputRows, want)
	}
	enginetest.Step(t, clk, 10*time.Second, wait) // to 10:00:20; batch 2 overruns to 10:00:45
	if p := rec.Next(t, wait); p.Batch != 2 {
		t.Fatalf("batch %d, want 2", p.Batch)
	}
	// Batch 3 starts at once, without the clock moving.
	if p := rec.Next(t, wait); p.Batch != 3 || !p.Timestamp.Equal(start.Add(42*time.Second)) {
		t.Fatalf("batch %d at %v, want batch 3 at once at 10:00:45", p.Batch, p.Timestamp)
	}
	// Then the next boundary, 10:00:50.
	enginetest.Step(t, clk, 4*time.Second, wait) // 10:00:49: not yet
	enginetest.Step(t, clk, time.Second, wait)
	if p := rec.Next(t, wait); p.Batch != 4 || !p.Timestamp.Equal(start.Add(47*time.Second)) {
		t.Fatalf("batch %d at %v, want batch 4 at 10:00:50", p.Batch, p.Timestamp)
	}
	q.Stop()
	if _, err := result(); err != nil {
		t.Fatal(err)
	}
	// The rate source's values are consecutive across batches.
	rows := enginetest.OutputRowsAt(t, out)
	seen := map[int64]bool{}
	for _, r := range rows {
		seen[r[1].(int64)] = true
	}
	for i := range int64(len(rows)) {
		if !seen[i] {
			t.Fatalf("value %d missing from %d rows", i, len(rows))
		}
	}
}

// crashAt returns a phase hook that ends the engine's goroutine at a phase of
// a batch, as a crash would: nothing after that point runs.
func crashAt(phase engine.Phase, batch int64) engine.Option {
	return engine.WithPhaseHook(func(p engine.Phase, b int64) {
		if p == phase && b == batch {
			runtime.Goexit()
		}
	})
}

// crash runs q until the hook ends its goroutine.
func crash(t *testing.T, q *engine.Query) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := q.Run(context.Background())
		t.Errorf("Run returned %v; want a crash", err)
	}()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("no crash")
	}
}

func TestRecoveryAtEveryPhase(t *testing.T) {
	for _, phase := range engine.Phases() {
		t.Run(string(phase), func(t *testing.T) {
			o := newOrders(t)
			o.add(t, 5)
			crash(t, newQuery(t, o.query().AvailableNow().Obj(), crashAt(phase, 1)))
			rec := enginetest.NewRecorder()
			sum := run(t, o.query().AvailableNow().Obj(), engine.WithObserver(rec))
			st := rec.Starts()[0]
			replay := phase != engine.PhaseCommitted
			wantNext := int64(1)
			if !replay {
				wantNext = 2
			}
			if st.Replay != replay || st.NextBatch != wantNext {
				t.Errorf("restart Start = replay %t at %d, want replay %t at %d", st.Replay, st.NextBatch, replay, wantNext)
			}
			if b := rec.Batches(); replay && (!b[0].Replay || b[0].Batch != 1) {
				t.Errorf("first batch after restart = %+v, want batch 1 replayed", b[0])
			}
			if sum.LastCommitted != 2 {
				t.Errorf("LastCommitted = %d, want 2", sum.LastCommitted)
			}
			o.check(t)
		})
	}
}

// TestReplayKeepsLoggedTimestampAndRange crashes a rate query after offsets/1
// and restarts it much later, with another rate: the replayed batch has the
// logged timestamp and exactly the logged rows.
func TestReplayKeepsLoggedTimestampAndRange(t *testing.T) {
	start := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	out, ckpt := t.TempDir(), filepath.Join(t.TempDir(), "ckpt")
	obj := func(rps int64) *v1.StreamingQuery {
		return querytest.Make("ticks", "default").RateSource("ticks", rps).Filter("value % 2 == 0").
			FilesSink(out, v1.FormatJSON).Checkpoint(ckpt).Obj()
	}
	rec := enginetest.NewRecorder()
	q := newQuery(t, obj(10), engine.WithClock(clk), engine.WithObserver(rec), engine.WithIdlePoll(time.Second), crashAt(engine.PhaseOffsetsWritten, 1))
	done := make(chan struct{})
	go func() { defer close(done); _, _ = q.Run(context.Background()) }()
	rec.Next(t, wait)
	enginetest.Step(t, clk, time.Second, wait)
	<-done
	logged := start.Add(time.Second)

	clk.SetTime(start.Add(time.Hour))
	rec = enginetest.NewRecorder()
	q = newQuery(t, obj(1000), engine.WithClock(clk), engine.WithObserver(rec), engine.WithIdlePoll(time.Second))
	result := runAsync(t, q)
	p := rec.Next(t, wait)
	if !p.Replay || p.Batch != 1 || !p.Timestamp.Equal(logged) || p.NumInputRows != 10 {
		t.Fatalf("replayed batch = %+v, want batch 1 at %v with the 10 logged rows", p, logged)
	}
	q.Stop()
	if _, err := result(); err != nil {
		t.Fatal(err)
	}
	var values []int64
	for _, r := range enginetest.OutputRowsAt(t, out) {
		values = append(values, r[1].(int64))
	}
	if len(values) < 6 || values[5] != 10 {
		t.Errorf("values %v, want 0, 2, …, 10 first", values)
	}
}

func TestPinnedSettingsComeFromTheCheckpoint(t *testing.T) {
	o := newOrders(t)
	o.add(t, 1)
	run(t, o.query().AvailableNow().StatePartitions(8).Obj())
	o.add(t, 1)
	rec := enginetest.NewRecorder()
	run(t, o.query().AvailableNow().StatePartitions(4).Obj(), engine.WithObserver(rec))
	if got := rec.Starts()[0].Pinned[engine.ConfStatePartitions]; got != "8" {
		t.Errorf("pinned partitions = %q, want 8 from the checkpoint", got)
	}
	ck := enginetest.LoadCheckpoint(t, o.ckpt)
	off, err := ck.Offsets(context.Background(), 1)
	if err != nil || off.Conf[engine.ConfStatePartitions] != "8" {
		t.Errorf("offsets/1 conf = %v, %v; want partitions 8", off.Conf, err)
	}
}

func TestOwnerMismatchIsRefused(t *testing.T) {
	o := newOrders(t)
	o.add(t, 1)
	run(t, o.query().AvailableNow().Obj())
	other := o.query().AvailableNow().Obj()
	other.Name = "someone-else"
	_, err := newQuery(t, other).Run(context.Background())
	if !errors.Is(err, engine.ErrRefused) || !errors.Is(err, checkpoint.ErrOwnerMismatch) {
		t.Fatalf("Run = %v, want ErrRefused and ErrOwnerMismatch", err)
	}
}

// TestSecondEngineIsFenced runs two engines on one checkpoint: the first
// pauses after its sink committed batch 0; the second replays batch 0 (its
// sink finds the manifest entry) and finishes; the first then loses the
// commit entry and stops. The output has no duplicate.
func TestSecondEngineIsFenced(t *testing.T) {
	o := newOrders(t)
	o.add(t, 5)
	paused, resume := make(chan struct{}), make(chan struct{})
	first := newQuery(t, o.query().AvailableNow().Obj(), engine.WithPhaseHook(func(p engine.Phase, b int64) {
		if p == engine.PhaseSinkCommitted && b == 0 {
			close(paused)
			<-resume
		}
	}))
	result := runAsync(t, first)
	<-paused
	rec := enginetest.NewRecorder()
	sum := run(t, o.query().AvailableNow().Obj(), engine.WithObserver(rec))
	if st := rec.Starts()[0]; !st.Replay || st.NextBatch != 0 || sum.LastCommitted != 2 {
		t.Errorf("second engine: Start %+v, Summary %+v", st, sum)
	}
	close(resume)
	_, err := result()
	if !errors.Is(err, engine.ErrOwnedByAnotherWriter) || !errors.Is(err, engine.ErrRefused) || !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("first engine: %v; want ErrOwnedByAnotherWriter", err)
	}
	if !strings.Contains(err.Error(), "owned by another writer") {
		t.Errorf("error %q does not say it", err)
	}
	o.check(t)
}

func TestMalformedRecordsAreCounted(t *testing.T) {
	o := newOrders(t)
	o.add(t, 1)
	bad := filepath.Join(o.in, "zz-bad.json")
	if err := os.WriteFile(bad, []byte("{not json\n{\"id\":\"x\",\"amount\":\"lots\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := run(t, o.query().AvailableNow().EditSource("orders", func(s *v1.Source) { s.OnMalformed = v1.MalformedSkip }).Obj())
	if sum.NumMalformedRows != 2 || sum.NumInputRows != 3 {
		t.Errorf("Summary = %+v, want 3 rows and 2 malformed", sum)
	}
	o.check(t)
	// The count is in the commit log too, where status and describe read it.
	ck := enginetest.LoadCheckpoint(t, o.ckpt)
	var logged int64
	for b := int64(0); b <= sum.LastCommitted; b++ {
		cm, err := ck.Commit(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range cm.Progress.Sources {
			logged += sp.NumMalformedRows
		}
	}
	if logged != 2 {
		t.Errorf("commits log %d malformed rows, want 2", logged)
	}

	// With fail, the run stops naming the file and line, and commits nothing.
	o2 := newOrders(t)
	if err := os.WriteFile(filepath.Join(o2.in, "bad.json"), []byte("{\"id\":\"a\",\"amount\":1,\"qty\":1}\n{oops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := newQuery(t, o2.query().AvailableNow().Obj()).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), filepath.Join(o2.in, "bad.json")+" line 2") {
		t.Fatalf("Run = %v, want the file and line 2", err)
	}
}

func TestInvalidSpecListsEveryProblem(t *testing.T) {
	obj := querytest.Make("q", "default").
		FilesSource("in", "/data", v1.FormatJSON, querytest.Col("id", v1.TypeString)).
		Filter("nope > 1").
		Select(querytest.As("x", "id +")).
		KafkaSink("k:9092", "t").
		Checkpoint("/tmp/c").Obj()
	// The registry has no kafka sink.
	_, err := engine.New(obj, enginetest.Registry(t))
	var ise *engine.InvalidSpecError
	if !errors.As(err, &ise) {
		t.Fatalf("New = %v, want *InvalidSpecError", err)
	}
	var fields []string
	for _, e := range ise.Errs {
		fields = append(fields, e.Field)
	}
	want := []string{"spec.transform[0].filter", "spec.transform[1].select[0].expr", "spec.sink.kafka"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("fields (-want +got):\n%s\n%v", diff, err)
	}
}

func TestNewRefusesKindsNotRegistered(t *testing.T) {
	o := newOrders(t)
	_, err := engine.New(o.query().Obj(), engine.NewRegistry())
	var ise *engine.InvalidSpecError
	if !errors.As(err, &ise) || len(ise.Errs) != 2 {
		t.Fatalf("New = %v, want the source and the sink kinds refused", err)
	}
}

// TestWithEnvReachesEveryComponent: the environment given with WithEnv is the
// one sources and sinks read their credentials from (it once never reached
// the sources, so a Kafka source's SASL settings were read from the process).
func TestWithEnvReachesEveryComponent(t *testing.T) {
	getenv := func(k string) string {
		if k == "SECRET" {
			return "from-WithEnv:" + k
		}
		return ""
	}
	var seen []string
	rate := func(fail bool) engine.SourceConstructor {
		return func(ctx context.Context, spec *v1.Source, env engine.SourceEnv) (engine.Source, error) {
			seen = append(seen, "source "+env.Getenv("SECRET"))
			if fail {
				return nil, errors.New("stop here")
			}
			return source.NewRate(ctx, spec, env)
		}
	}
	sink := func(context.Context, *v1.Sink, engine.SinkEnv) (engine.Sink, error) {
		return nil, errors.New("stop here")
	}
	recordingSink := func(_ context.Context, _ *v1.Sink, env engine.SinkEnv) (engine.Sink, error) {
		seen = append(seen, "sink "+env.Getenv("SECRET"))
		return nil, errors.New("stop here")
	}
	for _, c := range []struct {
		source engine.SourceConstructor
		sink   engine.SinkConstructor
	}{{rate(true), sink}, {rate(false), recordingSink}} {
		reg := engine.NewRegistry()
		if err := errors.Join(reg.RegisterSource(v1.SourceRate, engine.ComponentSpec{}, c.source),
			reg.RegisterSink(v1.SinkConsole, engine.ComponentSpec{}, c.sink)); err != nil {
			t.Fatal(err)
		}
		eq, err := engine.New(querytest.Make("q", "ns").RateSource("r", 1).ConsoleSink().Checkpoint(t.TempDir()).Obj(), reg, engine.WithEnv(getenv))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eq.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "stop here") {
			t.Fatalf("Run = %v, want the component's error", err)
		}
	}
	if want := []string{"source from-WithEnv:SECRET", "source from-WithEnv:SECRET", "sink from-WithEnv:SECRET"}; !cmp.Equal(seen, want) {
		t.Errorf("components read %q, want %q", seen, want)
	}
}

func TestRegistryRefusesTakenKinds(t *testing.T) {
	reg := enginetest.Registry(t)
	if err := reg.RegisterSource(v1.SourceFiles, engine.ComponentSpec{}, func(context.Context, *v1.Source, engine.SourceEnv) (engine.Source, error) {
		return nil, nil
	}); err == nil {
		t.Error("RegisterSource(files) twice succeeded")
	}
	if err := reg.RegisterSink(v1.SinkConsole, engine.ComponentSpec{}, nil); err == nil {
		t.Error("RegisterSink(console) twice succeeded")
	}
}

func TestStartGuard(t *testing.T) {
	o := newOrders(t)
	o.add(t, 1)
	run(t, o.query().AvailableNow().Obj())
	var got engine.GuardRequest
	guardErr := errors.New("aggregate changed")
	_, err := newQuery(t, o.query().AvailableNow().Obj(), engine.WithStartGuard(func(_ context.Context, req engine.GuardRequest) error {
		got = req
		return guardErr
	})).Run(context.Background())
	if !errors.Is(err, engine.ErrRefused) || !errors.Is(err, guardErr) {
		t.Fatalf("Run = %v, want ErrRefused wrapping the guard's error", err)
	}
	if got.NextBatch != 1 || got.Checkpoint == nil || got.Spec == nil || got.Head.Committed == nil {
		t.Errorf("guard request = %+v", got)
	}
}

func TestSuspendedQueryDoesNothing(t *testing.T) {
	o := newOrders(t)
	o.add(t, 1)
	sum := run(t, o.query().Suspend(true).Obj())
	if sum.Reason != engine.StopSuspended || sum.Batches != 0 {
		t.Errorf("Summary = %+v, want suspended", sum)
	}
	if _, err := os.Stat(o.ckpt); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a suspended query touched its checkpoint: %v", err)
	}
}

func TestStopBeforeTheFirstBatch(t *testing.T) {
	o := newOrders(t)
	o.add(t, 1)
	q := newQuery(t, o.query().Obj())
	q.Stop()
	sum, err := q.Run(context.Background())
	if err != nil || sum.Reason != engine.StopRequested || sum.Batches != 0 {
		t.Fatalf("Run = %+v, %v; want stopped with no batch", sum, err)
	}
}

// TestQuickstartExample runs examples/queries/quickstart.yaml as the README
// says, twice: the second run resumes after the first one's last batch.
func TestQuickstartExample(t *testing.T) {
	obj := querytest.Load(t, "../examples/queries/quickstart.yaml")
	ckpt := filepath.Join(t.TempDir(), "quickstart")
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	runFor := func(batches int) (engine.Start, string) {
		var out bytes.Buffer
		rec := enginetest.NewRecorder()
		q := newQuery(t, obj, engine.WithCheckpoint(ckpt), engine.WithClock(clk), engine.WithStdout(&out), engine.WithObserver(rec))
		result := runAsync(t, q)
		rec.Next(t, wait)
		for range batches - 1 {
			enginetest.Step(t, clk, 2*time.Second, wait)
			rec.Next(t, wait)
		}
		q.Stop()
		if _, err := result(); err != nil {
			t.Fatal(err)
		}
		return rec.Starts()[0], out.String()
	}
	first, out := runFor(2)
	if !first.New || !strings.Contains(out, "Batch: 1") || !strings.Contains(out, "tick-18") {
		t.Fatalf("first run: %+v\n%s", first, out)
	}
	clk.Step(time.Minute)
	second, out := runFor(2)
	if second.New || second.NextBatch != 2 || second.LastCommitted != 1 {
		t.Errorf("second run Start = %+v, want resuming at batch 2", second)
	}
	if !strings.Contains(out, "Batch: 3") || !strings.Contains(out, "tick-22") || strings.Contains(out, "tick-0|") {
		t.Errorf("second run does not continue the values:\n%s", out)
	}
}

// TestFilesToFilesExample runs examples/queries/files-to-files.yaml on its
// bundled data.
func TestFilesToFilesExample(t *testing.T) {
	obj := querytest.Load(t, "../examples/queries/files-to-files.yaml")
	out := t.TempDir()
	obj.Spec.Sources[0].Files.Path = "../examples/queries/data/orders"
	obj.Spec.Sink.Files.Path = out
	sum := run(t, obj, engine.WithCheckpoint(filepath.Join(t.TempDir(), "ckpt")))
	if sum.Batches != 1 || sum.NumInputRows != 8 || sum.NumOutputRows != 6 {
		t.Errorf("Summary = %+v, want one batch, 8 rows in, 6 out", sum)
	}
	rows := enginetest.OutputRowsAt(t, out)
	if len(rows) != 6 || rows[0][0] != "o-1001" || rows[0][1] != "DE" || rows[0][2] != 19.99 {
		t.Errorf("output = %v", rows)
	}
}

// TestS3Checkpoint runs files→files with the checkpoint, input and output on
// S3.
func TestS3Checkpoint(t *testing.T) {
	s := testenv.S3(t)
	s.Setenv(t)
	ctx := context.Background()
	in, _ := s3.OpenFolder("s3://" + s.Bucket + "/in")
	for i := range 3 {
		line := fmt.Sprintf(`{"id":"o-%d","country":"fr","amount":%d,"qty":1}`+"\n", i, i)
		if err := in.Put(ctx, fmt.Sprintf("f%d.json", i), []byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	o := &orders{in: "s3://" + s.Bucket + "/in", out: "s3://" + s.Bucket + "/out", ckpt: "s3://" + s.Bucket + "/ckpt"}
	sum := run(t, o.query().AvailableNow().Obj())
	if sum.Batches != 2 || sum.NumOutputRows != 2 {
		t.Errorf("Summary = %+v, want 2 batches, 2 rows out", sum)
	}
	if rows := enginetest.OutputRowsAt(t, o.out); len(rows) != 2 {
		t.Errorf("output = %v", rows)
	}
	if sum := run(t, o.query().AvailableNow().Obj()); sum.Batches != 0 || sum.LastCommitted != 1 {
		t.Errorf("second run = %+v, want nothing new", sum)
	}
}

// TestS3DataOnAnotherServer keeps the checkpoint on one S3 server (the
// environment's settings) and the input and output on another, with its own
// keys named by spec.s3: the data locations must not use the checkpoint's
// server or keys.
func TestS3DataOnAnotherServer(t *testing.T) {
	kinds := testenv.S3Kinds()
	if len(kinds) < 2 {
		t.Skipf("needs two S3 servers; LOCKSTEP_TEST_S3=%v", kinds)
	}
	ckptSrv, dataSrv := testenv.S3Of(t, kinds[0]), testenv.S3Of(t, kinds[1])
	ckptSrv.Setenv(t)
	t.Setenv("LAKE_AWS_ACCESS_KEY_ID", dataSrv.AccessKey)
	t.Setenv("LAKE_AWS_SECRET_ACCESS_KEY", dataSrv.SecretKey)
	conn := &v1.S3Connection{Endpoint: dataSrv.URL, Region: dataSrv.Region, CredentialsEnvPrefix: "LAKE_"}

	ctx := context.Background()
	in, err := s3.OpenFolder("s3://"+dataSrv.Bucket+"/in", dataSrv.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		line := fmt.Sprintf(`{"id":"o-%d","country":"fr","amount":%d,"qty":1}`+"\n", i, i)
		if err := in.Put(ctx, fmt.Sprintf("f%d.json", i), []byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	o := &orders{in: "s3://" + dataSrv.Bucket + "/in", out: "s3://" + dataSrv.Bucket + "/out", ckpt: "s3://" + ckptSrv.Bucket + "/ckpt"}
	q := o.query().AvailableNow().
		EditSource("orders", func(s *v1.Source) { s.Files.S3 = conn }).
		Obj()
	q.Spec.Sink.Files.S3 = conn
	sum := run(t, q)
	if sum.Batches != 2 || sum.NumOutputRows != 2 {
		t.Errorf("Summary = %+v, want 2 batches, 2 rows out", sum)
	}
	if rows := enginetest.OutputRowsAt(t, o.out, dataSrv.Options()...); len(rows) != 2 {
		t.Errorf("output on the data server = %v, want 2 rows", rows)
	}
	ckpt, err := s3.OpenFolder(o.ckpt, ckptSrv.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	if objs, err := ckpt.List(ctx, "commits/"); err != nil || len(objs) != 2 {
		t.Errorf("commits on the checkpoint server = %v, %v; want 2", objs, err)
	}
}

// TestS3ConnectionNeedsAnS3Path refuses spec.s3 on a local path, naming the
// field.
func TestS3ConnectionNeedsAnS3Path(t *testing.T) {
	o := newOrders(t)
	q := o.query().Obj()
	q.Spec.Sink.Files.S3 = &v1.S3Connection{Endpoint: "ftp://x"}
	_, err := engine.New(q, enginetest.Registry(t))
	for _, want := range []string{"spec.sink.files.s3: Invalid value", "s3:// path only", "spec.sink.files.s3.endpoint"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New error = %v, want it to mention %q", err, want)
		}
	}
}

// backlogSource is a files source that reports a backlog when it plans and
// completes it when it reads, as a partitioned source does.
type backlogSource struct {
	engine.Source
	reads []*engine.Backlog // the Backlog each Read was handed
}

func (s *backlogSource) Plan(ctx context.Context, req engine.PlanRequest) (engine.Planned, error) {
	p, err := s.Source.Plan(ctx, req)
	p.Backlog = engine.Backlog{Lag: new(req.Batch + 10), Latest: engine.Offset(`"latest"`),
		Partitions: []engine.PartitionLag{{Topic: "t", Partition: 0, Lag: req.Batch + 10}}}
	return p, err
}

func (s *backlogSource) Read(ctx context.Context, req engine.ReadRequest) (engine.ReadResult, error) {
	s.reads = append(s.reads, req.Backlog)
	res, err := s.Source.Read(ctx, req)
	if req.Backlog != nil {
		b := *req.Backlog
		b.Partitions = []engine.PartitionLag{{Topic: "t", Partition: 0, Lag: b.Partitions[0].Lag, LagMs: new(int64(1000))}}
		res.Backlog = &b
	}
	return res, err
}

// TestSourceBacklogReachesProgress: what a source tells of its backlog when
// it plans a batch is handed to its Read, completed there, and reported in
// the batch's progress and commit; a batch replayed by a new process, whose
// plan ran in the old one, reports none.
func TestSourceBacklogReachesProgress(t *testing.T) {
	o := newOrders(t)
	o.add(t, 5) // three batches: 2, 2 and 1 files
	src := &backlogSource{}
	reg := engine.NewRegistry()
	if err := errors.Join(
		reg.RegisterSource(v1.SourceFiles, source.FilesSpec(), func(ctx context.Context, spec *v1.Source, env engine.SourceEnv) (engine.Source, error) {
			f, err := source.NewFiles(ctx, spec, env)
			src.Source = f
			return src, err
		}),
		reg.RegisterSink(v1.SinkFiles, sink.FilesSpec(), sink.NewFiles)); err != nil {
		t.Fatal(err)
	}
	newQ := func(opts ...engine.Option) *engine.Query {
		eq, err := engine.New(o.query().AvailableNow().Obj(), reg, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return eq
	}
	crash(t, newQ(crashAt(engine.PhaseOffsetsWritten, 1)))
	rec := enginetest.NewRecorder()
	if _, err := newQ(engine.WithObserver(rec)).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := rec.Batches()
	if len(b) != 2 || !b[0].Replay || b[1].Replay {
		t.Fatalf("batches %+v, want batch 1 replayed and batch 2", b)
	}
	if s := b[0].Sources[0]; s.Lag != nil || s.LatestOffset != nil || s.Partitions != nil || s.LagMs != nil {
		t.Errorf("replayed batch 1 reports a backlog %+v; its plan ran in the process that crashed", s)
	}
	want := engine.SourceProgress{Lag: new(int64(12)), LatestOffset: engine.Offset(`"latest"`), LagMs: new(int64(1000)),
		Partitions: []engine.PartitionLag{{Topic: "t", Partition: 0, Lag: 12, LagMs: new(int64(1000))}}}
	got := b[1].Sources[0]
	got.Name, got.StartOffset, got.EndOffset, got.NumInputRows, got.NumMalformedRows = "", nil, nil, 0, 0
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("batch 2's source progress (-want +got):\n%s", diff)
	}
	if n := len(src.reads); n != 3 || src.reads[1] != nil || src.reads[2] == nil || *src.reads[2].Lag != 12 {
		t.Errorf("Read was handed %v, want batch 0's and 2's backlogs and none for the replayed batch 1", src.reads)
	}
	ck := enginetest.LoadCheckpoint(t, o.ckpt)
	cm, err := ck.Commit(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if s := cm.Progress.Sources[0]; s.Lag == nil || *s.Lag != 12 || string(s.LatestOffset) != `"latest"` || s.LagMs == nil || *s.LagMs != 1000 {
		t.Errorf("commits/2 records %+v, want lag 12, latest \"latest\", lagMs 1000", s)
	}
}
