package engine_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
)

// sessions counts and sums each country's sessions (a 10s gap) with a 5s
// watermark delay.
func sessions(mode v1.OutputMode) func(q *querytest.Query) *querytest.Query {
	return func(q *querytest.Query) *querytest.Query {
		return q.Watermark("ts", "5s").
			Aggregate("sessions", []v1.GroupKey{querytest.Key("country"), querytest.Session("ts", "10s")},
				querytest.Agg("orders", v1.AggCount, ""), querytest.Agg("revenue", v1.AggSum, "amount"),
				querytest.Agg("first", v1.AggMin, "id")).
			OutputMode(mode)
	}
}

func TestSessionWindowAppend(t *testing.T) {
	e := newEvents(t)
	e.add(t, event{"a", "FR", 1, 0}, event{"b", "FR", 2, 5}, event{"c", "DE", 4, 0})
	e.add(t, event{"d", "FR", 8, 20}, event{"e", "FR", 16, 14}, event{"f", "DE", 32, 12}) // e bridges FR's two sessions
	// Watermark 15s, late-event watermark 0s (the batch before's, as Spark): g's
	// own session [3,13) is not late and bridges DE's two sessions; i's
	// [-10,0) is.
	e.add(t, event{"g", "DE", 64, 3}, event{"i", "DE", 256, -10}, event{"h", "FR", 128, 40})
	rec := enginetest.NewRecorder()
	sum := run(t, sessions(v1.OutputAppend)(e.query()).Obj(), engine.WithObserver(rec))
	if sum.Batches != 4 {
		t.Fatalf("Summary = %+v, want 4 batches (the last without data)", sum)
	}
	s := func(country string, start, end int, n int64, revenue float64, first string) engine.Row {
		return engine.Row{country, eventT0.Add(time.Duration(start) * time.Second), eventT0.Add(time.Duration(end) * time.Second), n, revenue, first}
	}
	// FR [40,50) stays open: the watermark (35s) has not reached its end.
	want := []engine.Row{s("DE", 0, 22, 3, 100, "c"), s("FR", 0, 30, 4, 27, "a")}
	enginetest.SortRows(want)
	if diff := cmp.Diff(fmt.Sprint(want), fmt.Sprint(e.output(t))); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	var late int64
	for _, b := range rec.Batches() {
		for _, op := range b.StateOperators {
			late += op.NumRowsDroppedByWatermark
		}
	}
	if last := rec.Batches()[3].StateOperators[0]; late != 1 || last.NumRowsTotal != 1 || last.Kind != "aggregate" {
		t.Errorf("late rows = %d, last batch's state = %+v; want 1 late row and FR's open session left", late, last)
	}
}

// TestSessionWindowAcrossRuns runs the same input in one run and in a run
// per file: sessions resume from the checkpoint and the output is the same.
func TestSessionWindowAcrossRuns(t *testing.T) {
	for _, mode := range []v1.OutputMode{v1.OutputAppend, v1.OutputUpdate} {
		t.Run(string(mode), func(t *testing.T) {
			build := sessions(mode)
			ref := newEvents(t)
			ref.generate(t, 8)
			run(t, build(ref.query()).Obj())
			want := ref.output(t)
			if len(want) == 0 {
				t.Fatal("reference run wrote nothing")
			}
			e := newEvents(t)
			for range 8 {
				e.generateNext(t)
				run(t, build(e.query()).Obj())
			}
			if diff := cmp.Diff(fmt.Sprint(want), fmt.Sprint(e.output(t))); diff != "" {
				t.Errorf("output of a run per file (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSessionWindowGapExpr computes the gap per row with CEL: FR sessions
// close 10s after their newest row, the others 2s after.
func TestSessionWindowGapExpr(t *testing.T) {
	e := newEvents(t)
	e.add(t, event{"a", "FR", 1, 0}, event{"b", "FR", 2, 8}, event{"c", "DE", 4, 0}, event{"d", "DE", 8, 3})
	e.add(t, event{"z", "FR", 0, 100}) // moves the watermark past every session above
	q := e.query().Watermark("ts", "5s").
		Aggregate("sessions", []v1.GroupKey{querytest.Key("country"),
			{Session: &v1.SessionWindow{Column: "ts", GapExpr: "country == 'FR' ? duration('10s') : duration('2s')"}}},
			querytest.Agg("orders", v1.AggCount, "")).
		OutputMode(v1.OutputAppend)
	run(t, q.Obj())
	s := func(country string, start, end int, n int64) engine.Row {
		return engine.Row{country, eventT0.Add(time.Duration(start) * time.Second), eventT0.Add(time.Duration(end) * time.Second), n}
	}
	want := []engine.Row{s("DE", 0, 2, 1), s("DE", 3, 5, 1), s("FR", 0, 18, 2)}
	enginetest.SortRows(want)
	if diff := cmp.Diff(fmt.Sprint(want), fmt.Sprint(e.output(t))); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
