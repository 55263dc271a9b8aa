package engine_test

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/state"
)

// events is a folder of JSON event files for stateful queries, written one
// file per batch (maxFilesPerTrigger 1), an output folder and a checkpoint.
type events struct {
	in, out, ckpt string
	files         int
}

// eventT0 is the event time of second 0, on a window boundary.
var eventT0 = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

type event struct {
	id, country string
	amount      float64
	sec         float64 // event time, seconds after eventT0
}

func newEvents(t *testing.T) *events {
	t.Helper()
	return &events{in: t.TempDir(), out: t.TempDir(), ckpt: filepath.Join(t.TempDir(), "ckpt")}
}

// add writes one input file, newer than the ones before.
func (e *events) add(t *testing.T, evs ...event) {
	t.Helper()
	var lines []string
	for _, ev := range evs {
		ts := eventT0.Add(time.Duration(ev.sec * float64(time.Second))).Format(time.RFC3339Nano)
		lines = append(lines, fmt.Sprintf(`{"id":%q,"country":%q,"amount":%g,"ts":%q}`, ev.id, ev.country, ev.amount, ts))
	}
	p := filepath.Join(e.in, fmt.Sprintf("events-%04d.json", e.files))
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC).Add(time.Duration(e.files) * time.Second)
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
	e.files++
}

// generate writes n files of rows with advancing event time, some rows
// out of order, ids that repeat, and in every file but the second a row 60s
// behind the others: late from the third file on (the first has no
// watermark yet). Whether or not a batch without data runs between two files
// (as in a run per file), those rows are behind the late-event watermark,
// the watermark of the batch before, so every way of running the files drops
// the same rows. The second file has none: batch 1's late-event watermark is
// batch 0's, none yet, so in one run nothing in it is late, but a run per
// file runs a batch without data first that moves the watermark.
func (e *events) generate(t *testing.T, n int) {
	t.Helper()
	for range n {
		e.generateNext(t)
	}
}

// generateNext writes the next file of generate.
func (e *events) generateNext(t *testing.T) {
	t.Helper()
	countries := []string{"DE", "FR", "US"}
	f := e.files
	var evs []event
	for j := range 12 {
		evs = append(evs, event{
			id:      fmt.Sprintf("o-%d", (f*12+j)%50),
			country: countries[(f+j)%3],
			amount:  float64(j%5) + 0.25,
			sec:     float64(f*5) + float64(j%7) - 3,
		})
	}
	if f != 1 {
		evs = append(evs, event{id: "late", country: "DE", amount: 100, sec: float64(f*5 - 60)})
	}
	e.add(t, evs...)
}

func (e *events) query() *querytest.Query {
	return querytest.Make("events", "shop").
		FilesSource("events", e.in, v1.FormatJSON,
			querytest.Col("id", v1.TypeString), querytest.Col("country", v1.TypeString),
			querytest.Col("amount", v1.TypeDouble), querytest.Col("ts", v1.TypeTimestamp)).
		EditSource("events", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = new(int32(1)) }).
		FilesSink(e.out, v1.FormatJSON).
		StatePartitions(4).
		AvailableNow().
		Checkpoint(e.ckpt)
}

func (e *events) output(t *testing.T) []engine.Row {
	t.Helper()
	return enginetest.OutputRowsAt(t, e.out)
}

// windowed is a windowed count and sum with a watermark, in append mode.
func windowed(q *querytest.Query) *querytest.Query {
	return q.Watermark("ts", "5s").
		Aggregate("revenue", []v1.GroupKey{querytest.Window("ts", "10s")},
			querytest.Agg("orders", v1.AggCount, ""), querytest.Agg("revenue", v1.AggSum, "amount")).
		OutputMode(v1.OutputAppend)
}

func TestWindowedAggregateAppend(t *testing.T) {
	e := newEvents(t)
	e.add(t, event{"a", "FR", 1, 1}, event{"b", "FR", 2, 12})
	e.add(t, event{"c", "FR", 4, 8}, event{"d", "FR", 8, 26})
	// The batch runs with watermark 21s and late-event watermark 7s (the
	// batch before's, as Spark): e is not late, its window [0,10) ends after
	// 7s, and is counted before the window closes; h is late, its window
	// [-10,0) ended by 7s.
	e.add(t, event{"e", "FR", 16, 9}, event{"f", "FR", 32, 20}, event{"h", "FR", 128, -1})
	e.add(t, event{"g", "FR", 64, 60})
	rec := enginetest.NewRecorder()
	sum := run(t, windowed(e.query()).Obj(), engine.WithObserver(rec))
	// Four batches of data, then one without: the watermark moved to 55s.
	if sum.Batches != 5 {
		t.Fatalf("Summary = %+v, want 5 batches (the last without data)", sum)
	}
	win := func(start int, n int64, revenue float64) engine.Row {
		return engine.Row{eventT0.Add(time.Duration(start) * time.Second), eventT0.Add(time.Duration(start+10) * time.Second), n, revenue}
	}
	want := []engine.Row{win(0, 3, 21), win(10, 1, 2), win(20, 2, 40)}
	enginetest.SortRows(want)
	if diff := cmp.Diff(fmt.Sprint(want), fmt.Sprint(e.output(t))); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	batches := rec.Batches()
	wantWM := []int64{0, 7000, 21000, 21000, 55000}
	for i, b := range batches {
		if got := b.WatermarkMs - eventT0.UnixMilli(); i > 0 && got != wantWM[i] {
			t.Errorf("batch %d watermark = +%dms, want +%dms", i, got, wantWM[i])
		}
		if len(b.StateOperators) != 1 || b.StateOperators[0].Operator != "revenue" {
			t.Fatalf("batch %d StateOperators = %+v, want revenue", i, b.StateOperators)
		}
	}
	if op := batches[2].StateOperators[0]; op.NumRowsDroppedByWatermark != 1 || op.NumRowsRemoved != 2 || op.NumRowsTotal != 1 {
		t.Errorf("batch 2 state = %+v, want 1 late row, 2 windows evicted, 1 left", op)
	}
	if op := batches[4].StateOperators[0]; op.NumRowsTotal != 1 || batches[4].NumInputRows != 0 {
		t.Errorf("no-data batch: %+v, %d input rows; want one open window left", op, batches[4].NumInputRows)
	}

	// The checkpoint describes the operator; a restart with nothing new runs nothing.
	cs, err := checkpoint.OpenDir(e.ckpt)
	if err != nil {
		t.Fatal(err)
	}
	sums, err := state.Describe(context.Background(), cs, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 1 || sums[0].Operator != "revenue" || sums[0].Kind != "aggregate" || sums[0].Rows != 1 ||
		sums[0].Version != 5 || sums[0].Partitions != 4 || sums[0].Eviction != "ts" {
		t.Errorf("state.Describe() = %+v", sums)
	}
	if sum := run(t, windowed(e.query()).Obj()); sum.Batches != 0 {
		t.Errorf("restart with no new data ran %d batches", sum.Batches)
	}
}

// chained sums each country's amounts per 10 s window, then takes the
// largest sum and counts the sums per 30 s window of those windows.
func chained(q *querytest.Query) *querytest.Query {
	return q.Watermark("ts", "5s").
		Aggregate("per-country", []v1.GroupKey{querytest.Window("ts", "10s"), querytest.Key("country")},
			querytest.Agg("total", v1.AggSum, "amount")).
		Aggregate("best", []v1.GroupKey{querytest.Window("window_end", "30s")},
			querytest.Agg("top", v1.AggMax, "total"), querytest.Agg("windows", v1.AggCount, "")).
		OutputMode(v1.OutputAppend)
}

// TestChainedAggregates: an aggregate over an earlier aggregate's windows
// takes each window when the watermark closes it, at its last instant (a
// window ending at 30 s falls in [0 s, 30 s)), in the same batch, and is
// itself closed by the same watermark.
func TestChainedAggregates(t *testing.T) {
	e := newEvents(t)
	e.add(t, event{"a", "FR", 1, 1}, event{"b", "DE", 5, 2}, event{"c", "FR", 2, 9})
	e.add(t, event{"d", "FR", 4, 12}, event{"e", "DE", 10, 25})
	e.add(t, event{"f", "FR", 1, 40})
	e.add(t, event{"g", "FR", 1, 70})
	rec := enginetest.NewRecorder()
	sum := run(t, chained(e.query()).Obj(), engine.WithObserver(rec))
	if sum.Batches != 5 {
		t.Fatalf("Summary = %+v, want 5 batches (the last without data)", sum)
	}
	win := func(start, end int, top float64, n int64) engine.Row {
		return engine.Row{eventT0.Add(time.Duration(start) * time.Second), eventT0.Add(time.Duration(end) * time.Second), top, n}
	}
	// [0,10) FR 3 and DE 5, [10,20) FR 4, [20,30) DE 10 close by batch 3's
	// watermark 35 s, which closes [0,30) too; [40,50) FR 1 and [30,60) by
	// the batch without data (65 s); [70,80) stays open.
	want := []engine.Row{win(0, 30, 10, 4), win(30, 60, 1, 1)}
	if diff := cmp.Diff(fmt.Sprint(want), fmt.Sprint(e.output(t))); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	last := rec.Batches()[4]
	if len(last.StateOperators) != 2 || last.StateOperators[0].Operator != "per-country" || last.StateOperators[1].Operator != "best" {
		t.Fatalf("StateOperators = %+v, want per-country then best", last.StateOperators)
	}
	if a, b := last.StateOperators[0], last.StateOperators[1]; a.NumRowsTotal != 1 || b.NumRowsTotal != 0 {
		t.Errorf("after the last batch: per-country %d windows, best %d; want 1 ([70,80)) and 0", a.NumRowsTotal, b.NumRowsTotal)
	}
}

// statefulQueries are the queries of the crash tests.
func statefulQueries() map[string]func(*querytest.Query) *querytest.Query {
	return map[string]func(*querytest.Query) *querytest.Query{
		"windowed-append": windowed,
		"chained-windows": chained,
		"keyed-update": func(q *querytest.Query) *querytest.Query {
			return q.Aggregate("", []v1.GroupKey{querytest.Key("country")},
				querytest.Agg("orders", v1.AggCount, ""), querytest.Agg("revenue", v1.AggSum, "amount"),
				querytest.Agg("lo", v1.AggMin, "amount"), querytest.Agg("hi", v1.AggMax, "id"),
				querytest.Agg("mean", v1.AggAvg, "amount"), querytest.Agg("buyers", v1.AggCountDistinct, "id")).
				OutputMode(v1.OutputUpdate)
		},
		"session-append": sessions(v1.OutputAppend),
		"session-update": sessions(v1.OutputUpdate),
		"dedup": func(q *querytest.Query) *querytest.Query {
			return q.DropDuplicates("", "id").OutputMode(v1.OutputAppend)
		},
		"dedup-watermark-sliding-update": func(q *querytest.Query) *querytest.Query {
			return q.Watermark("ts", "4s").DropDuplicates("dedup", "id", "ts").
				Aggregate("", []v1.GroupKey{querytest.Key("country"), querytest.SlidingWindow("ts", "10s", "5s")},
					querytest.Agg("n", v1.AggCount, "")).
				OutputMode(v1.OutputUpdate)
		},
	}
}

// TestStatefulRecoveryAtEveryPhase crashes each stateful query at every
// phase of batches 1 and 3 and checks that the restarted run's output equals
// an uninterrupted run's, row for row.
func TestStatefulRecoveryAtEveryPhase(t *testing.T) {
	for name, build := range statefulQueries() {
		t.Run(name, func(t *testing.T) {
			ref := newEvents(t)
			ref.generate(t, 8)
			if sum := run(t, build(ref.query()).Obj()); sum.Batches < 8 {
				t.Fatalf("reference run: %+v", sum)
			}
			want := ref.output(t)
			if len(want) == 0 {
				t.Fatal("reference run wrote nothing")
			}
			for _, batch := range []int64{1, 3} {
				for _, phase := range engine.Phases() {
					t.Run(fmt.Sprintf("%s-%d", phase, batch), func(t *testing.T) {
						e := newEvents(t)
						e.generate(t, 8)
						crash(t, newQuery(t, build(e.query()).Obj(), crashAt(phase, batch)))
						rec := enginetest.NewRecorder()
						run(t, build(e.query()).Obj(), engine.WithObserver(rec))
						if replay := phase != engine.PhaseCommitted; rec.Starts()[0].Replay != replay {
							t.Errorf("restart Start = %+v, want replay %t", rec.Starts()[0], replay)
						}
						if diff := cmp.Diff(fmt.Sprint(want), fmt.Sprint(e.output(t))); diff != "" {
							t.Errorf("output after a crash at %s of batch %d (-want +got):\n%s", phase, batch, diff)
						}
					})
				}
			}
		})
	}
}

// TestLateWatermarkAfterACrash crashes a dedup with a watermark at every
// phase of the batches whose late-event watermark (the batch before's) is
// neither 0 nor their own watermark: the restarted run judges late rows as
// the uninterrupted run does, a replayed batch by the previous batch's
// offsets entry, not by what the new process holds.
func TestLateWatermarkAfterACrash(t *testing.T) {
	files := [][]event{
		{{"a", "FR", 1, 10}}, // batch 0: watermark none; next 5s
		{{"b", "FR", 1, 30}}, // batch 1: watermark 5s; next 25s
		// batch 2: watermark 25s, late-event watermark 5s: "between" is kept,
		// "late" (at the late-event watermark) dropped; next 35s.
		{{"c", "FR", 1, 40}, {"between", "FR", 1, 20}, {"late", "FR", 1, 5}},
		// batch 3: watermark 35s, late-event watermark 25s.
		{{"d", "FR", 1, 60}, {"between2", "FR", 1, 30}, {"late2", "FR", 1, 25}},
	}
	want := []string{"a", "b", "between", "between2", "c", "d"}
	query := func(e *events) *v1.StreamingQuery {
		return e.query().Watermark("ts", "5s").DropDuplicates("dedup", "id", "ts").SelectColumns("id").Obj()
	}
	ids := func(e *events) []string {
		var got []string
		for _, r := range e.output(t) {
			got = append(got, fmt.Sprint(r[0]))
		}
		slices.Sort(got)
		return got
	}
	for _, batch := range []int64{2, 3} {
		for _, phase := range engine.Phases() {
			t.Run(fmt.Sprintf("%s-%d", phase, batch), func(t *testing.T) {
				e := newEvents(t)
				for _, f := range files {
					e.add(t, f...)
				}
				crash(t, newQuery(t, query(e), crashAt(phase, batch)))
				rec := enginetest.NewRecorder()
				run(t, query(e), engine.WithObserver(rec))
				if diff := cmp.Diff(want, ids(e)); diff != "" {
					t.Errorf("output after a crash at %s of batch %d (-want +got):\n%s", phase, batch, diff)
				}
				for _, b := range rec.Batches() {
					if b.Batch != 2 && b.Batch != 3 {
						continue
					}
					if got := b.StateOperators[0].NumRowsDroppedByWatermark; got != 1 {
						t.Errorf("batch %d (replay %t) dropped %d rows as late, want 1", b.Batch, b.Replay, got)
					}
				}
			})
		}
	}
}

// TestStatefulStateBounded runs a windowed aggregation and a deduplication
// with a watermark over many batches of advancing event time: their state
// stays bounded, and late rows are counted.
func TestStatefulStateBounded(t *testing.T) {
	e := newEvents(t)
	e.generate(t, 60)
	q := e.query().Watermark("ts", "4s").DropDuplicates("dedup", "id", "ts").
		Aggregate("", []v1.GroupKey{querytest.Key("country"), querytest.Window("ts", "10s")}, querytest.Agg("n", v1.AggCount, "")).
		OutputMode(v1.OutputAppend).
		Edit(func(s *v1.StreamingQuerySpec) { s.Checkpoint.MinBatchesToRetain = 10 }) // the engine purges every 10 batches
	rec := enginetest.NewRecorder()
	run(t, q.Obj(), engine.WithObserver(rec))
	var late int64
	maxRows := map[string]int64{}
	for _, b := range rec.Batches() {
		for _, op := range b.StateOperators {
			late += op.NumRowsDroppedByWatermark
			maxRows[op.Operator] = max(maxRows[op.Operator], op.NumRowsTotal)
		}
	}
	// 12 rows a file, 5s of event time a file, a 4s delay: dedup keeps a
	// few files' rows, the aggregate a few windows per country.
	if maxRows["dedup"] > 60 || maxRows["1"] > 15 {
		t.Errorf("state grew to %v rows, want it bounded by the watermark", maxRows)
	}
	if late < 55 {
		t.Errorf("%d rows dropped as late, want about one per file", late)
	}
	cs, err := checkpoint.OpenDir(e.ckpt)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := cs.List(context.Background(), checkpoint.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 2*4*(10+2*state.DefaultSnapshotEvery) {
		t.Errorf("%d state files with 10 batches retained, want a bounded number", len(keys))
	}
}

func TestStatefulRefusesIncompatibleState(t *testing.T) {
	e := newEvents(t)
	e.generate(t, 2)
	run(t, windowed(e.query()).Obj())
	changed := e.query().Watermark("ts", "5s").
		Aggregate("revenue", []v1.GroupKey{querytest.Window("ts", "10s")},
			querytest.Agg("orders", v1.AggCount, ""), querytest.Agg("revenue", v1.AggMax, "amount")).
		OutputMode(v1.OutputAppend)
	_, err := newQuery(t, changed.Obj()).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "revenue") {
		t.Fatalf("Run with sum changed to max: error = %v, want a refusal naming the operator", err)
	}
	if !errors.Is(err, engine.ErrRefused) || !errors.Is(err, state.ErrIncompatible) {
		t.Fatalf("Run error = %v, want ErrRefused and state.ErrIncompatible", err)
	}
}
