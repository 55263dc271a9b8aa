package stateful_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/stateful"
)

// lateBatch is one batch of TestLateByThePreviousWatermark: its watermark and
// late-event watermark (seconds after t0), its rows, and what it must do.
type lateBatch struct {
	wm, late  int
	rows      []stateful.Row
	want      []stateful.Row
	dropped   int64
	stateRows int64
}

// TestLateByThePreviousWatermark checks each operator against Spark's two
// watermarks (SPARK-40925): a row at or behind the late-event watermark (the
// batch before's) is dropped, a row between it and the batch's watermark is
// kept, and state is evicted by the batch's watermark.
func TestLateByThePreviousWatermark(t *testing.T) {
	n := v1.Aggregation{Name: "n", Function: v1.AggCount}
	win := func(start, end int, n int64) stateful.Row { return stateful.Row{at(start), at(end), n} }
	row := func(id string, sec int) stateful.Row { return order(id, "DE", 1, 1, at(sec)) }
	for _, tc := range []struct {
		name    string
		op      func(t *testing.T) stateful.Operator
		batches []lateBatch
	}{{
		name: "tumbling window, append",
		op: func(t *testing.T) stateful.Operator {
			return aggregate(t, v1.OutputAppend, "ts", tumbling("10s"), n)
		},
		batches: []lateBatch{
			{wm: -100, late: -100, rows: []stateful.Row{row("a", 1), row("b", 12)}, stateRows: 2},
			// [0,10) ends after 5s: the row at 8s is counted before the
			// window closes at 15s. [-10,0) ended by 5s: the row at -1s is late.
			{wm: 15, late: 5, rows: []stateful.Row{row("c", 8), row("d", -1)},
				want: []stateful.Row{win(0, 10, 2)}, dropped: 1, stateRows: 1},
		},
	}, {
		name: "tumbling window, update",
		op: func(t *testing.T) stateful.Operator {
			return aggregate(t, v1.OutputUpdate, "ts", tumbling("10s"), n)
		},
		batches: []lateBatch{
			{wm: -100, late: -100, rows: []stateful.Row{row("a", 1), row("b", 12)},
				want: []stateful.Row{win(0, 10, 1), win(10, 20, 1)}, stateRows: 2},
			// [0,10) is written with the row at 8s, then evicted silently.
			{wm: 15, late: 5, rows: []stateful.Row{row("c", 8), row("d", -1)},
				want: []stateful.Row{win(0, 10, 2)}, dropped: 1, stateRows: 1},
		},
	}, {
		name: "sliding window, append",
		op: func(t *testing.T) stateful.Operator {
			return aggregate(t, v1.OutputAppend, "ts", []v1.GroupKey{{Window: &v1.Window{Column: "ts", Duration: "10s", Slide: "5s"}}}, n)
		},
		batches: []lateBatch{
			{wm: -100, late: -100, rows: []stateful.Row{row("a", 1), row("b", 4)}, stateRows: 2},
			// The row at 3s joins [-5,5) and [0,10): both end after 0s.
			// [-5,5) closes at 9s with it. The row at -6s is late: its
			// windows [-15,-5) and [-10,0) ended by 0s (at it counts).
			{wm: 9, late: 0, rows: []stateful.Row{row("c", 3), row("d", -6)},
				want: []stateful.Row{win(-5, 5, 3)}, dropped: 1, stateRows: 1},
		},
	}, {
		name: "event-time key, append",
		op: func(t *testing.T) stateful.Operator {
			return aggregate(t, v1.OutputAppend, "ts", []v1.GroupKey{{Column: "ts"}}, n)
		},
		batches: []lateBatch{
			{wm: -100, late: -100, rows: []stateful.Row{row("a", 1), row("b", 9)}, stateRows: 2},
			// 4s is the late-event watermark: late. 6s is not, and the
			// watermark (8s) closes its group at once, with 1s's.
			{wm: 8, late: 4, rows: []stateful.Row{row("c", 4), row("d", 6), row("e", 10)},
				want: []stateful.Row{{at(1), int64(1)}, {at(6), int64(1)}}, dropped: 1, stateRows: 2},
		},
	}, {
		name: "dropDuplicates",
		op: func(t *testing.T) stateful.Operator {
			d, err := stateful.NewDropDuplicates(stateful.DropDuplicatesConfig{
				Name: "dedup", Spec: &v1.DropDuplicates{Columns: []string{"id", "ts"}}, Input: orders, EventTime: "ts",
			})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		batches: []lateBatch{
			{wm: -100, late: -100, rows: []stateful.Row{row("a", 8), row("z", 30)},
				want: []stateful.Row{row("a", 8), row("z", 30)}, stateRows: 2},
			// (a, 8s) is still known, though 15s evicts it after the batch;
			// (b, 7s) is after 5s and passes; (c, 5s) is late.
			{wm: 15, late: 5, rows: []stateful.Row{row("a", 8), row("b", 7), row("c", 5), row("d", 20)},
				want: []stateful.Row{row("b", 7), row("d", 20)}, dropped: 1, stateRows: 2},
		},
	}, {
		name: "session window, append",
		op: func(t *testing.T) stateful.Operator {
			return sessionOp(t, v1.OutputAppend, "10s", n)
		},
		batches: []lateBatch{
			{wm: -100, late: -100, rows: []stateful.Row{row("a", 0)}, stateRows: 1},
			// The row at 3s ([3,13) ends after 12s) extends DE [0,10) to
			// [0,13), which 25s closes. The row at 2s ([2,12)) is late.
			{wm: 25, late: 12, rows: []stateful.Row{row("b", 3), row("c", 2), order("d", "FR", 1, 1, at(20))},
				want: []stateful.Row{{"DE", at(0), at(13), int64(2)}}, dropped: 1, stateRows: 1},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRunner(t, tc.op(t), nil)
			for i, b := range tc.batches {
				r.wmMs, r.lateMs = at(b.wm).UnixMilli(), at(b.late).UnixMilli()
				out, m := r.run(b.rows...)
				if diff := cmp.Diff(sorted(b.want), sorted(out), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("batch %d (-want +got):\n%s", i, diff)
				}
				if m.DroppedByWatermark != b.dropped {
					t.Errorf("batch %d: DroppedByWatermark = %d, want %d", i, m.DroppedByWatermark, b.dropped)
				}
				if got := r.st.Rows(); got != b.stateRows {
					t.Errorf("batch %d: state rows = %d, want %d", i, got, b.stateRows)
				}
			}
		})
	}
}

// TestStreamJoinLateByThePreviousWatermark: a row between the late-event
// watermark and the batch's watermark is buffered, joins, and is evicted in
// the same batch (an unmatched outer row emitted with nulls); a row at or
// behind the late-event watermark is dropped.
func TestStreamJoinLateByThePreviousWatermark(t *testing.T) {
	r := newJoinRunner(t, newJoin(t, v1.JoinLeftOuter))
	r.run(10, rows(imp("a", "u1", 30)), nil) // the next batch's late-event watermark: 10s
	out, m := r.run(40,
		rows(imp("b", "between", 15), imp("d", "alone", 14), imp("c", "late", 10)),
		rows(click("a", 32, 1), click("b", 12, 2), click("c", 9, 3)))
	want := rows(
		joined(imp("a", "u1", 30), click("a", 32, 1)),
		joined(imp("b", "between", 15), click("b", 12, 2)),
		joined(imp("d", "alone", 14), nil), // 14s + 20s ≤ 40s: evicted at once
	)
	if diff := cmp.Diff(sorted(want), sorted(out)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if m.LeftDroppedByWatermark != 1 || m.RightDroppedByWatermark != 1 {
		t.Errorf("dropped by watermark = %d left, %d right; want 1, 1 (the rows at 10s and 9s)", m.LeftDroppedByWatermark, m.RightDroppedByWatermark)
	}
	// Evicted by 40s: every row but the impression at 30s (until 50s).
	if l, rr := r.rows(); l != 1 || rr != 0 {
		t.Errorf("buffered rows = %d left, %d right; want 1, 0", l, rr)
	}
}
