package stateful_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/stateful"
)

func sessionOp(t *testing.T, mode v1.OutputMode, gap v1.Duration, aggs ...v1.Aggregation) *stateful.Session {
	t.Helper()
	s, err := stateful.NewSession(withDurations(t, stateful.AggregateConfig{
		Name: "0", Input: orders, EventTime: "ts", Mode: mode,
		Spec: &v1.Aggregate{GroupBy: []v1.GroupKey{{Column: "country"}, {Session: &v1.SessionWindow{Column: "ts", Gap: gap}}}, Aggregates: aggs},
	}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var sessionAggs = []v1.Aggregation{
	{Name: "n", Function: v1.AggCount},
	{Name: "revenue", Function: v1.AggSum, Column: "amount"},
	{Name: "last", Function: v1.AggMax, Column: "id"},
	{Name: "mean", Function: v1.AggAvg, Column: "qty"},
}

// sessionBatches are four batches of rows for a 10s gap and a 5s watermark
// delay; the comments give each key's sessions after the batch.
var sessionBatches = [][]stateful.Row{
	// FR [0,15) 2 rows, DE [0,10) 1 row; the watermark moves to 0s.
	{order("a", "FR", 1, 1, at(0)), order("b", "FR", 2, 3, at(5)), order("c", "DE", 4, 1, at(0))},
	// FR [20,30) is new; then the row at 14s bridges it with [0,15): FR [0,30)
	// with 4 rows. DE [12,22) stays apart from DE [0,10). Watermark: 15s.
	{order("d", "FR", 8, 1, at(20)), order("e", "FR", 16, 1, at(14)), order("f", "DE", 32, 1, at(12))},
	// The watermark is 15s, the late-event watermark (the batch before's)
	// 0s. DE at 3s is not late (its own session ends at 13s > 0s): it
	// bridges DE [0,10) and [12,22) into DE [0,22) with 3 rows, which stays
	// open (22s > 15s), although DE [0,10) alone would have closed. DE at
	// -10s is late (its session ends at 0s). FR [40,50) opens. Next
	// watermark: 35s.
	{order("g", "DE", 64, 1, at(3)), order("i", "DE", 256, 1, at(-10)), order("h", "FR", 128, 1, at(40))},
	// No rows: FR [0,30) and DE [0,22) close. FR [40,50) stays open.
	{},
}

func sess(country string, start, end int, n int64, revenue float64, last string, mean float64) stateful.Row {
	return stateful.Row{country, at(start), at(end), n, revenue, last, mean}
}

func TestSessionAppend(t *testing.T) {
	s := sessionOp(t, v1.OutputAppend, "10s", sessionAggs...)
	if got, want := s.Columns().Names(), []string{"country", "window_start", "window_end", "n", "revenue", "last", "mean"}; !slices.Equal(got, want) {
		t.Fatalf("Columns() = %v, want %v", got, want)
	}
	r := newRunner(t, s, &v1.Watermark{Column: "ts", Delay: "5s"})
	r.wmMs = t0.UnixMilli() - 60_000
	want := [][]stateful.Row{
		nil,
		nil,
		nil,
		{sess("DE", 0, 22, 3, 100, "g", 1), sess("FR", 0, 30, 4, 27, "e", 1.5)},
	}
	late := []int64{0, 0, 1, 0}
	for i, rows := range sessionBatches {
		if i == 2 {
			r.restart() // sessions resume from the checkpoint
		}
		out, m := r.run(rows...)
		if diff := cmp.Diff(want[i], out, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("batch %d (-want +got):\n%s", i, diff)
		}
		if m.DroppedByWatermark != late[i] {
			t.Errorf("batch %d dropped %d late rows, want %d", i, m.DroppedByWatermark, late[i])
		}
	}
	if r.st.Rows() != 1 {
		t.Errorf("state rows = %d, want 1 (FR's open session)", r.st.Rows())
	}
	// The watermark passes FR [40,50): it closes, and the state is empty.
	r.wmMs = at(50).UnixMilli()
	out, _ := r.run()
	if diff := cmp.Diff([]stateful.Row{sess("FR", 40, 50, 1, 128, "h", 1)}, out); diff != "" {
		t.Errorf("last batch (-want +got):\n%s", diff)
	}
	if r.st.Rows() != 0 {
		t.Errorf("state rows = %d, want 0", r.st.Rows())
	}
}

func TestSessionUpdate(t *testing.T) {
	s := sessionOp(t, v1.OutputUpdate, "10s", sessionAggs...)
	r := newRunner(t, s, &v1.Watermark{Column: "ts", Delay: "5s"})
	r.wmMs = t0.UnixMilli() - 60_000
	want := [][]stateful.Row{
		{sess("DE", 0, 10, 1, 4, "c", 1), sess("FR", 0, 15, 2, 3, "b", 2)},
		{sess("DE", 12, 22, 1, 32, "f", 1), sess("FR", 0, 30, 4, 27, "e", 1.5)},
		{sess("DE", 0, 22, 3, 100, "g", 1), sess("FR", 40, 50, 1, 128, "h", 1)},
		nil,
	}
	for i, rows := range sessionBatches {
		r.restart()
		out, _ := r.run(rows...)
		if diff := cmp.Diff(want[i], out, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("batch %d (-want +got):\n%s", i, diff)
		}
	}
	if r.st.Rows() != 1 {
		t.Errorf("state rows = %d, want 1: closed sessions are evicted", r.st.Rows())
	}
}

// TestSessionMergesMany merges sessions of one key in every order: the
// result does not depend on how rows fall into batches.
func TestSessionMergesMany(t *testing.T) {
	secs := []int{0, 3, 30, 9, 21, 12, 45, 60, 51, 33}
	// With a 10s gap: [0,22) from 0,3,9,12 ; 21 touches 12+10=22? 21 ≤ 22:
	// [0,31); 30 joins: [0,40); 33 joins: [0,43); 45 ≤ 43? no: [45,55);
	// 51 joins: [45,61); 60 joins: [45,70).
	want := []stateful.Row{
		{"FR", at(0), at(43), int64(7)},
		{"FR", at(45), at(70), int64(3)},
	}
	for _, perBatch := range []int{1, 2, 3, 10} {
		s := sessionOp(t, v1.OutputAppend, "10s", v1.Aggregation{Name: "n", Function: v1.AggCount})
		r := newRunner(t, s, nil)
		r.wmMs = t0.UnixMilli() - 60_000
		var got []stateful.Row
		for i := 0; i < len(secs); i += perBatch {
			var rows []stateful.Row
			for _, sec := range secs[i:min(i+perBatch, len(secs))] {
				rows = append(rows, order("x", "FR", 1, 1, at(sec)))
			}
			out, _ := r.run(rows...)
			got = append(got, out...)
		}
		r.wmMs = at(100).UnixMilli()
		out, _ := r.run()
		got = append(got, out...)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%d rows a batch (-want +got):\n%s", perBatch, diff)
		}
	}
}

func TestSessionFingerprint(t *testing.T) {
	a := sessionOp(t, v1.OutputAppend, "10s", sessionAggs...)
	b := sessionOp(t, v1.OutputAppend, "20s", sessionAggs...)
	c := sessionOp(t, v1.OutputUpdate, "10s", sessionAggs...)
	w := aggregate(t, v1.OutputAppend, "ts", []v1.GroupKey{{Column: "country"}, {Window: &v1.Window{Column: "ts", Duration: "10s"}}}, sessionAggs...)
	if a.Metadata().Fingerprint == b.Metadata().Fingerprint {
		t.Error("a gap change keeps the fingerprint; stored session ends would be wrong")
	}
	if a.Metadata().Fingerprint != c.Metadata().Fingerprint {
		t.Error("the output mode changed the fingerprint; the state is the same")
	}
	if a.Metadata().Fingerprint == w.Metadata().Fingerprint {
		t.Error("a session and a tumbling window share a fingerprint")
	}
}

// TestSessionGapPerRow gives FR rows a 10s gap and DE rows a 2s one; a row
// without a gap joins no session.
func TestSessionGapPerRow(t *testing.T) {
	s, err := stateful.NewSession(stateful.AggregateConfig{
		Name: "0", Input: orders, EventTime: "ts", Mode: v1.OutputAppend,
		Spec: &v1.Aggregate{
			GroupBy:    []v1.GroupKey{{Column: "country"}, {Session: &v1.SessionWindow{Column: "ts", GapExpr: "country == 'FR' ? duration('10s') : duration('2s')"}}},
			Aggregates: []v1.Aggregation{{Name: "n", Function: v1.AggCount}},
		},
		GapOf: func(r stateful.Row) (time.Duration, bool) {
			switch r[1] {
			case "FR":
				return 10 * time.Second, true
			case "DE":
				return 2 * time.Second, true
			case "XX":
				return 0, true
			}
			return 0, false
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, s, nil)
	r.wmMs = t0.UnixMilli() - 60_000
	r.run(order("a", "FR", 1, 1, at(0)), order("b", "FR", 1, 1, at(8)), order("c", "DE", 1, 1, at(0)), order("d", "DE", 1, 1, at(3)),
		stateful.Row{"e", nil, 1.0, int64(1), at(0)}, order("f", "XX", 1, 1, at(0)))
	r.wmMs = at(100).UnixMilli()
	out, _ := r.run()
	want := []stateful.Row{
		{"DE", at(0), at(2), int64(1)},
		{"DE", at(3), at(5), int64(1)},
		{"FR", at(0), at(18), int64(2)},
	}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
