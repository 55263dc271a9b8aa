package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/storetest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
)

// stateChanges are the stateful changes of the compat rule table the built-in runtime
// runs, named by their compat rule: each an old query and the new one a rebuild switches to.
// A stream–stream join's rules (join-type, join-keys, join-time-bound) need a second source:
// TestRebuildStreamJoin has them.
func stateChanges() map[string][2]func(*querytest.Query) *querytest.Query {
	keyed := func(keys ...string) func(*querytest.Query) *querytest.Query {
		return func(q *querytest.Query) *querytest.Query {
			var gk []v1.GroupKey
			for _, k := range keys {
				gk = append(gk, querytest.Key(k))
			}
			return q.Aggregate("", gk, querytest.Agg("orders", v1.AggCount, ""), querytest.Agg("revenue", v1.AggSum, "amount")).OutputMode(v1.OutputUpdate)
		}
	}
	aggs := func(a ...v1.Aggregation) func(*querytest.Query) *querytest.Query {
		return func(q *querytest.Query) *querytest.Query {
			return q.Aggregate("", []v1.GroupKey{querytest.Key("country")}, a...).OutputMode(v1.OutputUpdate)
		}
	}
	window := func(size v1.Duration) func(*querytest.Query) *querytest.Query {
		return func(q *querytest.Query) *querytest.Query {
			return q.Watermark("ts", "5s").Aggregate("revenue", []v1.GroupKey{querytest.Window("ts", size)},
				querytest.Agg("orders", v1.AggCount, "")).OutputMode(v1.OutputAppend)
		}
	}
	session := func(gap v1.Duration) func(*querytest.Query) *querytest.Query {
		return func(q *querytest.Query) *querytest.Query {
			return q.Watermark("ts", "5s").Aggregate("sessions", []v1.GroupKey{querytest.Key("country"), querytest.Session("ts", gap)},
				querytest.Agg("orders", v1.AggCount, "")).OutputMode(v1.OutputAppend)
		}
	}
	dedup := func(cols ...string) func(*querytest.Query) *querytest.Query {
		return func(q *querytest.Query) *querytest.Query {
			return q.DropDuplicates("", cols...).OutputMode(v1.OutputAppend)
		}
	}
	partitions := func(n int32) func(*querytest.Query) *querytest.Query {
		return func(q *querytest.Query) *querytest.Query { return keyed("country")(q).StatePartitions(n) }
	}
	count, sum := querytest.Agg("orders", v1.AggCount, ""), querytest.Agg("revenue", v1.AggSum, "amount")
	return map[string][2]func(*querytest.Query) *querytest.Query{
		"key-columns":        {keyed("country"), keyed("id")},
		"key-order":          {keyed("country", "id"), keyed("id", "country")},
		"window-size":        {window("10s"), window("20s")},
		"aggregate-added":    {aggs(count), aggs(count, sum)},
		"aggregate-removed":  {aggs(count, sum), aggs(count)},
		"aggregate-function": {aggs(sum), aggs(querytest.Agg("revenue", v1.AggMax, "amount"))},
		"aggregate-input":    {aggs(querytest.Agg("lo", v1.AggMin, "amount")), aggs(querytest.Agg("lo", v1.AggMin, "id"))},
		"operator-added":     {func(q *querytest.Query) *querytest.Query { return q.OutputMode(v1.OutputAppend) }, dedup("id")},
		"operator-removed": {func(q *querytest.Query) *querytest.Query {
			return dedup("id")(q).Aggregate("", []v1.GroupKey{querytest.Key("country")}, count).OutputMode(v1.OutputUpdate)
		}, keyed("country")},
		"key-columns (dropDuplicates)": {dedup("id"), dedup("id", "country")},
		"session-gap":                  {session("3s"), session("1s")},
		"state-partitions":             {partitions(4), partitions(7)},
	}
}

// consoleRun runs q with a console sink and returns what it printed, each batch's rows
// sorted (a batch's row order is not part of its output).
func consoleRun(t *testing.T, q *querytest.Query, opts ...engine.Option) string {
	t.Helper()
	var out bytes.Buffer
	run(t, q.ConsoleSink().Obj(), append(opts, engine.WithStdout(&out))...)
	return sortedBatches(out.String())
}

func sortedBatches(s string) string {
	var b strings.Builder
	for _, block := range strings.Split(s, "-------------------------------------------\nBatch: ")[1:] {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if len(lines) > 2 {
			slices.Sort(lines[2:]) // after the batch number and the rule
		}
		fmt.Fprintf(&b, "Batch: %s\n", strings.Join(lines, "\n"))
	}
	return b.String()
}

// TestRebuildOracle runs, for every stateful change, the old query over batches 0–3,
// rebuilds the state for the new query, and runs the new query over batches 4–7: its
// output equals that of the new query run from the start over the same batches.
func TestRebuildOracle(t *testing.T) {
	for name, change := range stateChanges() {
		t.Run(name, func(t *testing.T) {
			old, nu := change[0], change[1]
			ref := newEvents(t)
			ref.generate(t, 4)
			consoleRun(t, nu(ref.query()))
			ref.generate(t, 4)
			want := consoleRun(t, nu(ref.query()))

			e := oldCommitted(t, old, 4)
			rebuild(t, nu(e.query()).ConsoleSink())
			e.generate(t, 4)
			got := consoleRun(t, nu(e.query()))
			if rows := strings.Count(want, "\n|") - strings.Count(want, "Batch:"); rows < 1 {
				t.Fatalf("the reference's second run wrote no rows: the case tests nothing:\n%s", want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("batches 4–7 after the rebuild (-uninterrupted +rebuilt):\n%s", diff)
			}
		})
	}
}

func rebuild(t *testing.T, q *querytest.Query, opts ...engine.Option) engine.RebuildSummary {
	t.Helper()
	sum, err := newQuery(t, q.Obj(), opts...).Rebuild(context.Background(), engine.RebuildOptions{Reason: t.Name()})
	if err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	return sum
}

// TestRebuildCrashes crashes a rebuild at every phase of its batches: the old generation
// stays current and unchanged, and a retried rebuild ends as an uninterrupted one.
func TestRebuildCrashes(t *testing.T) {
	old, nu := stateChanges()["key-columns"][0], stateChanges()["key-columns"][1]
	ref := oldCommitted(t, old, 4)
	rebuild(t, nu(ref.query()).ConsoleSink())
	ref.generate(t, 2)
	want := consoleRun(t, nu(ref.query()))
	for _, batch := range []int64{0, 2, 3} {
		// A rebuild writes no output: no sink phase but the engine's own.
		for _, phase := range []engine.Phase{engine.PhaseOffsetsWritten, engine.PhaseSinkCommitted, engine.PhaseCommitted} {
			t.Run(fmt.Sprintf("%s-%d", phase, batch), func(t *testing.T) {
				e := oldCommitted(t, old, 4)
				before := generationZero(t, e.ckpt)
				crashRebuild(t, newQuery(t, nu(e.query()).ConsoleSink().Obj(), crashAt(phase, batch)))
				if diff := cmp.Diff(before, generationZero(t, e.ckpt)); diff != "" {
					t.Fatalf("a crashed rebuild changed the old generation (-before +after):\n%s", diff)
				}
				sum := rebuild(t, nu(e.query()).ConsoleSink())
				if sum.Generation != 1 || sum.Plan.Batches != 4 {
					t.Errorf("retried Rebuild = %+v, want generation 1 of 4 batches", sum)
				}
				e.generate(t, 2)
				if diff := cmp.Diff(want, consoleRun(t, nu(e.query()))); diff != "" {
					t.Errorf("after a rebuild retried from %s of batch %d (-uninterrupted +got):\n%s", phase, batch, diff)
				}
			})
		}
	}
}

// crashRebuild runs q's rebuild until the phase hook ends its goroutine.
func crashRebuild(t *testing.T, q *engine.Query) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := q.Rebuild(context.Background(), engine.RebuildOptions{})
		t.Errorf("Rebuild returned %v; want a crash", err)
	}()
	<-done
}

// generationZero reads the objects of the checkpoint's generation 0 in dir.
func generationZero(t *testing.T, dir string) map[string]string {
	t.Helper()
	st, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return storetest.Objects(t, st, storetest.GenerationZero)
}

// keyColumnsCommitted is oldCommitted for the "key-columns" change, and returns its new query
// too.
func keyColumnsCommitted(t *testing.T, files int) (*events, func(*querytest.Query) *querytest.Query) {
	t.Helper()
	change := stateChanges()["key-columns"]
	return oldCommitted(t, change[0], files), change[1]
}

// oldCommitted generates files input files and runs the query old makes over them to its
// end, on the console.
func oldCommitted(t *testing.T, old func(*querytest.Query) *querytest.Query, files int) *events {
	t.Helper()
	e := newEvents(t)
	e.generate(t, files)
	consoleRun(t, old(e.query()))
	return e
}

// TestRebuildNeedsTheWholeLog: with the first batches purged, the plan says which batches
// are lost and Rebuild refuses.
func TestRebuildNeedsTheWholeLog(t *testing.T) {
	e, nu := keyColumnsCommitted(t, 4)
	if err := os.Remove(filepath.Join(e.ckpt, checkpoint.OffsetsKey(0))); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(e.ckpt, checkpoint.CommitKey(0))); err != nil {
		t.Fatal(err)
	}
	q := newQuery(t, nu(e.query()).ConsoleSink().Obj())
	_, err := q.PlanRebuild(context.Background())
	if !errors.Is(err, engine.ErrRebuildImpossible) || !strings.Contains(err.Error(), "keeps batches 1–3 only") {
		t.Errorf("PlanRebuild = %v, want ErrRebuildImpossible naming batches 1–3", err)
	}
	if _, err := q.Rebuild(context.Background(), engine.RebuildOptions{}); !errors.Is(err, engine.ErrRebuildImpossible) {
		t.Errorf("Rebuild = %v, want ErrRebuildImpossible", err)
	}
}

// TestRebuildNeedsTheInput: a file a committed batch read is gone, so the rebuild is not
// possible, and the plan and the rebuild say which file of which batch.
func TestRebuildNeedsTheInput(t *testing.T) {
	e, nu := keyColumnsCommitted(t, 3)
	if err := os.Remove(filepath.Join(e.in, "events-0001.json")); err != nil {
		t.Fatal(err)
	}
	q := newQuery(t, nu(e.query()).ConsoleSink().Obj())
	want := "source events no longer holds what batches 0–2 read: the file " + e.in + "/events-0001.json that batch 1 read is gone"
	_, err := q.PlanRebuild(context.Background())
	if !errors.Is(err, engine.ErrRebuildImpossible) || err.Error() != want {
		t.Errorf("PlanRebuild = %v, want ErrRebuildImpossible: %s", err, want)
	}
	if _, err := q.Rebuild(context.Background(), engine.RebuildOptions{}); !errors.Is(err, engine.ErrRebuildImpossible) || err.Error() != want {
		t.Errorf("Rebuild = %v, want ErrRebuildImpossible: %s", err, want)
	}
	if _, err := os.Stat(filepath.Join(e.ckpt, "generation-1")); !os.IsNotExist(err) {
		t.Errorf("a rebuild that cannot be done wrote a generation: %v", err)
	}
}

// TestRebuildPlan: the plan counts the batches and rows the rebuild replays; a rebuild
// switches the generation, and the old writer is fenced at its next batch.
func TestRebuildPlan(t *testing.T) {
	e, nu := keyColumnsCommitted(t, 3)
	p, err := newQuery(t, nu(e.query()).ConsoleSink().Obj()).PlanRebuild(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if p.Batches != 3 || p.Records != 38 || p.From != 0 || p.To != 1 || p.Pending != -1 {
		t.Errorf("PlanRebuild = %+v, want 3 batches of 38 rows from generation 0 to 1", p)
	}
	sum := rebuild(t, nu(e.query()).ConsoleSink())
	if sum.Replayed != 3 || sum.InputRows != 38 || sum.Generation != 1 {
		t.Errorf("Rebuild = %+v", sum)
	}
	c := enginetest.LoadCheckpoint(t, e.ckpt)
	if g := c.Generation(); g.Number != 1 || g.Batches != 3 || !strings.HasSuffix(c.Location(), "generation-1") {
		t.Errorf("current generation %+v at %s", g, c.Location())
	}
	// The old generation is sealed at batch 3: a writer still on it is fenced there.
	if _, err := os.Stat(filepath.Join(e.ckpt, checkpoint.OffsetsKey(3))); err != nil {
		t.Errorf("the old generation is not sealed: %v", err)
	}
	// The old query no longer fits the checkpoint's generation: the start guard is the
	// caller's (cmd/lockstep); here the new query simply continues.
	e.generate(t, 1)
	if out := consoleRun(t, nu(e.query())); !strings.Contains(out, "Batch: 3") {
		t.Errorf("the new query after the rebuild:\n%s", out)
	}
}

// BenchmarkRebuild compares, in rows per CPU-second of the whole process, a rebuild of a
// keyed aggregate's state (its grouping keys changed) with a normal run of the new query over
// the same 20 batches of 2,000 rows (local checkpoints, console sink discarded): x-run-cpu is
// the rebuild's rate over the run's.
func BenchmarkRebuild(b *testing.B) {
	var runCPU, rebuildCPU time.Duration
	var rows int64
	runOnce := func(q *querytest.Query) engine.Summary {
		eq, err := engine.New(q.ConsoleSink().Obj(), enginetest.Registry(b), engine.WithStdout(io.Discard))
		if err != nil {
			b.Fatal(err)
		}
		sum, err := eq.Run(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		return sum
	}
	for range b.N {
		b.StopTimer()
		e := &events{in: b.TempDir(), ckpt: filepath.Join(b.TempDir(), "ckpt")}
		for f := range 20 {
			var lines []string
			for j := range 2000 {
				ts := eventT0.Add(time.Duration(f*2000+j) * time.Millisecond).Format(time.RFC3339Nano)
				lines = append(lines, fmt.Sprintf(`{"id":"o-%d","country":"c%d","amount":%d.5,"ts":%q}`, j%500, j%40, j%9, ts))
			}
			p := filepath.Join(e.in, fmt.Sprintf("events-%04d.json", f))
			if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
				b.Fatal(err)
			}
			at := eventT0.Add(time.Duration(f) * time.Second)
			_ = os.Chtimes(p, at, at)
		}
		change := stateChanges()["key-columns"]
		runOnce(change[0](e.query()))
		b.StartTimer()

		began := enginetest.CPU(false)
		eq, err := engine.New(change[1](e.query()).ConsoleSink().Obj(), enginetest.Registry(b))
		if err != nil {
			b.Fatal(err)
		}
		rs, err := eq.Rebuild(context.Background(), engine.RebuildOptions{})
		if err != nil {
			b.Fatal(err)
		}
		mid := enginetest.CPU(false)
		fresh := *e
		fresh.ckpt = filepath.Join(b.TempDir(), "ckpt")
		sum := runOnce(change[1](fresh.query()))
		rebuildCPU += mid - began
		runCPU += enginetest.CPU(false) - mid
		rows += sum.NumInputRows
		if rs.InputRows != sum.NumInputRows {
			b.Fatalf("the rebuild read %d rows, the run %d", rs.InputRows, sum.NumInputRows)
		}
	}
	enginetest.ReportRebuild(b, rows, rebuildCPU, runCPU)
}

// TestRebuildStreamJoin is TestRebuildOracle for the stream–stream join's rules: the join's
// type, its time bound and its keys change; the join's state (both sides' buffered rows, the outer side's
// unmatched ones) is rebuilt for the new join, and its output after the switch equals the new
// join's run from the start.
func TestRebuildStreamJoin(t *testing.T) {
	for name, edit := range map[string]func(*v1.StreamingQuerySpec){
		"join-type":       func(s *v1.StreamingQuerySpec) { s.Transform[1].Join.Type = v1.JoinInner },
		"join-time-bound": func(s *v1.StreamingQuerySpec) { s.Transform[1].Join.Stream.TimeBound.UpperBound = "10s" },
		// Keyed by the impression's user: the old state, keyed by ad, would match clicks of
		// ad "a" to impressions the new key never pairs them with.
		"join-keys": func(s *v1.StreamingQuerySpec) { s.Transform[1].Join.Keys = querytest.Keys("user", "ad_id") },
	} {
		t.Run(name, func(t *testing.T) {
			twice := func(e *adEvents, first, second func() *querytest.Query, between func()) string {
				for _, b := range adStream[:2] {
					e.add(t, b[0], b[1])
				}
				consoleRun(t, first())
				between()
				for _, b := range adStream[2:] {
					e.add(t, b[0], b[1])
				}
				return consoleRun(t, second())
			}
			ref := newAdEvents(t)
			nu := func() *querytest.Query { return ref.query().Edit(edit) }
			want := twice(ref, nu, nu, func() {})

			e := newAdEvents(t)
			nuE := func() *querytest.Query { return e.query().Edit(edit) }
			got := twice(e, e.query, nuE, func() { rebuild(t, nuE().ConsoleSink()) })
			if rows := strings.Count(want, "\n|") - strings.Count(want, "Batch:"); rows < 1 {
				t.Fatalf("the reference's second run wrote no rows:\n%s", want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the second run after the rebuild (-uninterrupted +rebuilt):\n%s", diff)
			}
		})
	}
}

// TestRebuildSealedAndPending: the old generation has a batch planned and not committed (the
// old query died after its sink wrote batch 3); the rebuild carries it over and seals the old
// generation after it. When the switch is lost (its record deleted, as a crash between the seal
// and the switch leaves it), the old generation reads whole — its head is the pending batch,
// the seal apart —, the old query is refused with what to do, and a retried rebuild switches.
// The new query then runs batch 3 first.
func TestRebuildSealedAndPending(t *testing.T) {
	ctx := context.Background()
	old, nu := stateChanges()["key-columns"][0], stateChanges()["key-columns"][1]
	e := newEvents(t)
	e.generate(t, 5)
	crash(t, newQuery(t, old(e.query()).ConsoleSink().Obj(), crashAt(engine.PhaseSinkCommitted, 3)))
	sum := rebuild(t, nu(e.query()).ConsoleSink())
	if sum.Plan.Pending != 3 || sum.Plan.Batches != 3 || sum.Generation != 1 {
		t.Fatalf("Rebuild = %+v, want 3 batches replayed and batch 3 carried over", sum)
	}
	if err := os.Remove(filepath.Join(e.ckpt, checkpoint.GenerationKey(1))); err != nil {
		t.Fatal(err)
	}
	c := enginetest.LoadCheckpoint(t, e.ckpt)
	h, err := c.Head(ctx)
	if err != nil || h.Planned.BatchID != 3 || h.Sealed == nil || h.Sealed.BatchID != 4 || !h.Replay() {
		t.Fatalf("the sealed old generation's head = %+v, %v; want batch 3 pending and the seal at 4", h, err)
	}
	var out bytes.Buffer
	_, err = newQuery(t, old(e.query()).ConsoleSink().Obj(), engine.WithStdout(&out)).Run(ctx)
	if !errors.Is(err, engine.ErrRefused) || !strings.Contains(err.Error(), "run the rebuild again") {
		t.Errorf("the old query on its sealed generation: %v, want a refusal saying to run the rebuild again", err)
	}
	if sum := rebuild(t, nu(e.query()).ConsoleSink()); sum.Generation != 1 || sum.Replayed != 0 {
		t.Errorf("the retried rebuild = %+v, want generation 1 with nothing left to replay", sum)
	}
	rec := enginetest.NewRecorder()
	run(t, nu(e.query()).ConsoleSink().Obj(), engine.WithObserver(rec), engine.WithStdout(io.Discard))
	if b := rec.Batches(); len(b) < 2 || b[0].Batch != 3 || !b[0].Replay {
		t.Errorf("the new query's batches after the rebuild: %+v, want batch 3 replayed first", b)
	}
}
