package stateful_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/state"
	"github.com/lockstep-dev/lockstep/engine/stateful"
	"github.com/lockstep-dev/lockstep/plan"
)

// t0 is an event time on a 10s window boundary.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

// orders are the input columns of the tests.
var orders = v1.Columns{
	{Name: "id", Type: v1.TypeString},
	{Name: "country", Type: v1.TypeString},
	{Name: "amount", Type: v1.TypeDouble},
	{Name: "qty", Type: v1.TypeLong},
	{Name: "ts", Type: v1.TypeTimestamp},
}

func order(id, country string, amount float64, qty int64, ts time.Time) stateful.Row {
	return stateful.Row{id, country, amount, qty, ts}
}

// runner runs batches of one operator the way the engine does: load the
// version, observe the watermark, process, commit, advance the watermark.
type runner struct {
	t     *testing.T
	cs    checkpoint.Store
	op    stateful.Operator
	wm    *stateful.Watermark
	parts int
	st    *state.Store
	batch int64
	// wmMs is the watermark of the next batch, lateMs the one the batch
	// before it ran with (its late-event watermark).
	wmMs, lateMs int64
}

func newRunner(t *testing.T, op stateful.Operator, wm *v1.Watermark) *runner {
	t.Helper()
	cs, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{t: t, cs: cs, op: op, parts: 4}
	if wm != nil {
		if r.wm, err = stateful.NewWatermark(wm.Column, durationsOf(t, &v1.Step{Watermark: wm}).Delay, orders); err != nil {
			t.Fatal(err)
		}
	}
	r.restart()
	return r
}

// restart drops the in-memory state and loads it from the checkpoint.
func (r *runner) restart() {
	r.t.Helper()
	if r.st != nil {
		r.st.Close()
	}
	st, err := state.Open(r.t.Context(), r.cs, r.op.Metadata(), state.Options{Partitions: r.parts, SnapshotEvery: 3})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { st.Close() })
	if err := st.Load(r.t.Context(), r.batch); err != nil {
		r.t.Fatal(err)
	}
	r.st = st
}

func (r *runner) run(rows ...stateful.Row) ([]stateful.Row, stateful.Metrics) {
	r.t.Helper()
	if r.wm != nil {
		for _, row := range rows {
			r.wm.Observe(row)
		}
	}
	out, m, err := r.op.Process(r.st, rows, stateful.Batch{WatermarkMs: r.wmMs, LateWatermarkMs: r.lateMs})
	if err != nil {
		r.t.Fatalf("batch %d: Process() error = %v", r.batch, err)
	}
	if _, err := r.st.Commit(r.t.Context()); err != nil {
		r.t.Fatalf("batch %d: Commit() error = %v", r.batch, err)
	}
	r.batch++
	r.lateMs = r.wmMs
	if r.wm != nil {
		r.wmMs = r.wm.Next(r.wmMs)
		r.wm.Forget()
	}
	return out, m
}

func sorted(rows []stateful.Row) []stateful.Row {
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b stateful.Row) int {
		for i := range a {
			if c := cmpAny(a[i], b[i]); c != 0 {
				return c
			}
		}
		return 0
	})
	return rows
}

func cmpAny(a, b any) int {
	sa, sb := fmt.Sprint(a), fmt.Sprint(b)
	switch {
	case sa < sb:
		return -1
	case sa > sb:
		return 1
	}
	return 0
}

// durationsOf parses the durations of step st, as the plan does.
func durationsOf(t testing.TB, st *v1.Step) plan.Durations {
	t.Helper()
	d, err := plan.DurationsOf(st, field.NewPath("step"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// withDurations sets cfg's window and session durations from its spec, as the plan does.
func withDurations(t testing.TB, cfg stateful.AggregateConfig) stateful.AggregateConfig {
	t.Helper()
	d := durationsOf(t, &v1.Step{Aggregate: cfg.Spec})
	cfg.Size, cfg.Slide, cfg.Gap = d.Size, d.Slide, d.Gap
	return cfg
}

func aggregate(t *testing.T, mode v1.OutputMode, eventTime string, groupBy []v1.GroupKey, aggs ...v1.Aggregation) *stateful.Aggregate {
	t.Helper()
	a, err := stateful.NewAggregate(withDurations(t, stateful.AggregateConfig{
		Name: "0", Spec: &v1.Aggregate{GroupBy: groupBy, Aggregates: aggs}, Input: orders, EventTime: eventTime, Mode: mode,
	}))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var byCountry = []v1.GroupKey{{Column: "country"}}

func tumbling(d string) []v1.GroupKey {
	return []v1.GroupKey{{Window: &v1.Window{Column: "ts", Duration: v1.Duration(d)}}}
}

func TestAggregateUpdate(t *testing.T) {
	a := aggregate(t, v1.OutputUpdate, "", byCountry,
		v1.Aggregation{Name: "n", Function: v1.AggCount},
		v1.Aggregation{Name: "revenue", Function: v1.AggSum, Column: "amount"},
		v1.Aggregation{Name: "items", Function: v1.AggSum, Column: "qty"},
		v1.Aggregation{Name: "lo", Function: v1.AggMin, Column: "amount"},
		v1.Aggregation{Name: "hi", Function: v1.AggMax, Column: "id"},
		v1.Aggregation{Name: "mean", Function: v1.AggAvg, Column: "qty"},
		v1.Aggregation{Name: "buyers", Function: v1.AggCountDistinct, Column: "id"},
	)
	wantCols := []string{"country", "n", "revenue", "items", "lo", "hi", "mean", "buyers"}
	if got := a.Columns().Names(); !slices.Equal(got, wantCols) {
		t.Fatalf("Columns() = %v, want %v", got, wantCols)
	}
	r := newRunner(t, a, nil)
	out, _ := r.run(
		order("a", "FR", 10, 1, at(0)),
		order("b", "FR", 5, 3, at(1)),
		order("a", "DE", 7, 2, at(2)),
	)
	want := []stateful.Row{
		{"DE", int64(1), 7.0, int64(2), 7.0, "a", 2.0, int64(1)},
		{"FR", int64(2), 15.0, int64(4), 5.0, "b", 2.0, int64(2)},
	}
	if diff := cmp.Diff(want, sorted(out)); diff != "" {
		t.Fatalf("batch 0 (-want +got):\n%s", diff)
	}
	r.restart() // the next batch starts from the committed state
	out, _ = r.run(order("a", "FR", 1, 6, at(3)), stateful.Row{"c", "FR", 4.0, nil, at(4)})
	want = []stateful.Row{{"FR", int64(4), 20.0, int64(10), 1.0, "c", 10.0 / 3, int64(3)}}
	if diff := cmp.Diff(want, sorted(out)); diff != "" {
		t.Fatalf("batch 1 (-want +got):\n%s", diff)
	}
	if _, _ = r.run(); r.st.Rows() != 2 {
		t.Fatalf("state rows = %d, want 2 (no eviction without a watermark)", r.st.Rows())
	}
}

func TestAggregateNulls(t *testing.T) {
	a := aggregate(t, v1.OutputUpdate, "", byCountry,
		v1.Aggregation{Name: "rows", Function: v1.AggCount},
		v1.Aggregation{Name: "amounts", Function: v1.AggCount, Column: "amount"},
		v1.Aggregation{Name: "revenue", Function: v1.AggSum, Column: "amount"},
		v1.Aggregation{Name: "lo", Function: v1.AggMin, Column: "amount"},
		v1.Aggregation{Name: "mean", Function: v1.AggAvg, Column: "amount"},
		v1.Aggregation{Name: "distinct", Function: v1.AggCountDistinct, Column: "amount"},
	)
	r := newRunner(t, a, nil)
	out, _ := r.run(stateful.Row{"a", "FR", nil, int64(1), at(0)}, stateful.Row{"b", nil, nil, int64(1), at(0)})
	want := []stateful.Row{
		{nil, int64(1), int64(0), nil, nil, nil, int64(0)},
		{"FR", int64(1), int64(0), nil, nil, nil, int64(0)},
	}
	if diff := cmp.Diff(want, sorted(out)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestAggregateAppendWindowWatermark(t *testing.T) {
	a := aggregate(t, v1.OutputAppend, "ts", tumbling("10s"),
		v1.Aggregation{Name: "n", Function: v1.AggCount},
		v1.Aggregation{Name: "revenue", Function: v1.AggSum, Column: "amount"})
	r := newRunner(t, a, &v1.Watermark{Column: "ts", Delay: "5s"})
	win := func(start int, n int64, sum float64) stateful.Row {
		return stateful.Row{at(start), at(start + 10), n, sum}
	}
	steps := []struct {
		rows     []stateful.Row
		want     []stateful.Row
		late     int64
		stateLen int64
	}{
		// Watermark 0: nothing closes. Next watermark: 12-5 = 7s.
		{rows: []stateful.Row{order("a", "FR", 1, 1, at(1)), order("b", "FR", 2, 1, at(12))}, stateLen: 2},
		// Watermark 7s: [0,10) is open (end 10 > 7). Next: 26-5 = 21s.
		{rows: []stateful.Row{order("c", "FR", 4, 1, at(8)), order("d", "FR", 8, 1, at(26))}, stateLen: 3},
		// Watermark 21s, late-event watermark 7s (the batch before's):
		// [0,10) and [10,20) close and are written once. A row at 9s is not
		// late, as its window ends after 7s: it is counted in [0,10) before
		// it closes (as Spark). A row at -1s is late (its window [-10,0)
		// ended by 7s) and dropped; one at 20s is not.
		{
			rows:     []stateful.Row{order("e", "FR", 16, 1, at(9)), order("f", "FR", 32, 1, at(20)), order("h", "FR", 128, 1, at(-1))},
			want:     []stateful.Row{win(0, 3, 21), win(10, 1, 2)},
			late:     1,
			stateLen: 1,
		},
		// A no-data batch with the same watermark writes nothing.
		{stateLen: 1},
		// Event time moves on: 60-5 = 55s next.
		{rows: []stateful.Row{order("g", "FR", 64, 1, at(60))}, stateLen: 2},
		// The no-data batch the engine runs when the watermark moved closes [20,30).
		{want: []stateful.Row{win(20, 2, 40)}, stateLen: 1},
	}
	for i, s := range steps {
		if i == 3 {
			r.restart()
		}
		out, m := r.run(s.rows...)
		if diff := cmp.Diff(s.want, sorted(out)); diff != "" {
			t.Fatalf("batch %d (watermark %d) (-want +got):\n%s", i, r.wmMs, diff)
		}
		if m.DroppedByWatermark != s.late {
			t.Errorf("batch %d: DroppedByWatermark = %d, want %d", i, m.DroppedByWatermark, s.late)
		}
		if got := r.st.Rows(); got != s.stateLen {
			t.Errorf("batch %d: state rows = %d, want %d", i, got, s.stateLen)
		}
	}
}

func TestAggregateUpdateEvictsByWatermark(t *testing.T) {
	a := aggregate(t, v1.OutputUpdate, "ts", append(slices.Clone(byCountry), tumbling("10s")...),
		v1.Aggregation{Name: "n", Function: v1.AggCount})
	if got := a.Columns().Names(); !slices.Equal(got, []string{"country", "window_start", "window_end", "n"}) {
		t.Fatalf("Columns() = %v", got)
	}
	r := newRunner(t, a, &v1.Watermark{Column: "ts", Delay: "0s"})
	out, _ := r.run(order("a", "FR", 1, 1, at(1)), order("b", "DE", 1, 1, at(2)))
	if len(out) != 2 {
		t.Fatalf("batch 0 wrote %v, want both groups", out)
	}
	out, _ = r.run(order("c", "FR", 1, 1, at(15)))
	want := []stateful.Row{{"FR", at(10), at(20), int64(1)}}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Fatalf("batch 1 (-want +got):\n%s", diff)
	}
	if out, _ = r.run(); len(out) != 0 || r.st.Rows() != 1 { // watermark 15s: [0,10) closes
		t.Fatalf("no-data batch wrote %v and kept %d state rows, want nothing written and 1 row", out, r.st.Rows())
	}
}

func TestAggregateSlidingComplete(t *testing.T) {
	a := aggregate(t, v1.OutputComplete, "ts", []v1.GroupKey{{Window: &v1.Window{Column: "ts", Duration: "10s", Slide: "5s"}}},
		v1.Aggregation{Name: "n", Function: v1.AggCount})
	r := newRunner(t, a, &v1.Watermark{Column: "ts", Delay: "0s"})
	r.run(order("a", "FR", 1, 1, at(7)))
	out, m := r.run(order("b", "FR", 1, 1, at(12)), order("c", "FR", 1, 1, at(1))) // watermark 7s: nothing is late in complete mode
	want := []stateful.Row{
		{at(-5), at(5), int64(1)},
		{at(0), at(10), int64(2)},
		{at(5), at(15), int64(2)},
		{at(10), at(20), int64(1)},
	}
	if diff := cmp.Diff(want, sorted(out)); diff != "" || m.DroppedByWatermark != 0 {
		t.Fatalf("complete output (-want +got):\n%s\ndropped %d", diff, m.DroppedByWatermark)
	}
}

func TestAggregateEventTimeKeyColumn(t *testing.T) {
	a := aggregate(t, v1.OutputAppend, "ts", []v1.GroupKey{{Column: "ts"}}, v1.Aggregation{Name: "n", Function: v1.AggCount})
	r := newRunner(t, a, &v1.Watermark{Column: "ts", Delay: "1s"})
	r.run(order("a", "FR", 1, 1, at(1)), order("b", "FR", 1, 1, at(1)), order("c", "FR", 1, 1, at(5)))
	// Watermark 4s, late-event watermark 0: at(4) and at(3) are not late;
	// they make groups that the watermark closes at once.
	out, m := r.run(order("d", "FR", 1, 1, at(4)), order("e", "FR", 1, 1, at(3)))
	want := []stateful.Row{{at(1), int64(2)}, {at(3), int64(1)}, {at(4), int64(1)}}
	if diff := cmp.Diff(want, out); diff != "" || m.DroppedByWatermark != 0 {
		t.Fatalf("batch 1 (-want +got):\n%s\ndropped %d, want 0", diff, m.DroppedByWatermark)
	}
	// Watermark and late-event watermark 4s: at(4) is late, at(6) is not.
	out, m = r.run(order("f", "FR", 1, 1, at(4)), order("g", "FR", 1, 1, at(6)))
	if len(out) != 0 || m.DroppedByWatermark != 1 || r.st.Rows() != 2 {
		t.Fatalf("batch 2 wrote %v, dropped %d and kept %d state rows; want nothing written, 1 dropped, 2 rows (5s and 6s)", out, m.DroppedByWatermark, r.st.Rows())
	}
}

func TestDropDuplicates(t *testing.T) {
	d, err := stateful.NewDropDuplicates(stateful.DropDuplicatesConfig{Name: "dedup", Spec: &v1.DropDuplicates{Columns: []string{"id"}}, Input: orders})
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, d, nil)
	out, _ := r.run(order("a", "FR", 1, 1, at(0)), order("b", "FR", 2, 1, at(0)), order("a", "DE", 3, 1, at(0)))
	want := []stateful.Row{order("a", "FR", 1, 1, at(0)), order("b", "FR", 2, 1, at(0))}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Fatalf("batch 0 (-want +got):\n%s", diff)
	}
	r.restart()
	out, _ = r.run(order("b", "DE", 1, 1, at(0)), order("c", "FR", 2, 1, at(0)), order("c", "FR", 5, 1, at(0)))
	want = []stateful.Row{order("c", "FR", 2, 1, at(0))}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Fatalf("batch 1 (-want +got):\n%s", diff)
	}
	if d.Evicts() || r.st.Rows() != 3 {
		t.Fatalf("state rows = %d, evicts %v; want 3 rows kept forever", r.st.Rows(), d.Evicts())
	}
}

func TestDropDuplicatesWatermark(t *testing.T) {
	d, err := stateful.NewDropDuplicates(stateful.DropDuplicatesConfig{
		Name: "dedup", Spec: &v1.DropDuplicates{Columns: []string{"id", "ts"}}, Input: orders, EventTime: "ts",
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, d, &v1.Watermark{Column: "ts", Delay: "10s"})
	maxRows := int64(0)
	for b := range 100 {
		var rows []stateful.Row
		for i := range 20 {
			sec := b*5 + i%5
			rows = append(rows, order(fmt.Sprint("id", i%7), "FR", 1, 1, at(sec)))
		}
		rows = append(rows, order("late", "FR", 1, 1, at(b*5-30)))
		out, m := r.run(rows...)
		if b > 10 && m.DroppedByWatermark != 1 {
			t.Fatalf("batch %d: DroppedByWatermark = %d, want 1", b, m.DroppedByWatermark)
		}
		for _, o := range out {
			if o[0] == "late" && b > 10 {
				t.Fatalf("batch %d wrote a late row", b)
			}
		}
		maxRows = max(maxRows, r.st.Rows())
	}
	if maxRows > 61 {
		t.Fatalf("state grew to %d rows, want it bounded by the watermark", maxRows)
	}
}

// Over a long run with advancing event time, state stays bounded.
func TestAggregateStateBounded(t *testing.T) {
	a := aggregate(t, v1.OutputAppend, "ts", append(slices.Clone(byCountry), tumbling("10s")...),
		v1.Aggregation{Name: "n", Function: v1.AggCount})
	r := newRunner(t, a, &v1.Watermark{Column: "ts", Delay: "20s"})
	var total, written, late int64
	for b := range 300 {
		var rows []stateful.Row
		for i := range 50 {
			rows = append(rows, order("x", fmt.Sprint("c", i%10), 1, 1, at(b*3+i%3)))
		}
		rows = append(rows, order("x", "late", 1, 1, at(b*3-100)))
		total += int64(len(rows))
		out, m := r.run(rows...)
		late += m.DroppedByWatermark
		for _, o := range out {
			written += o[3].(int64)
		}
		if r.st.Rows() > 10*5 {
			t.Fatalf("batch %d: %d state rows, want at most 50", b, r.st.Rows())
		}
	}
	r.run(order("x", "c0", 1, 1, at(10_000))) // moves the watermark past every window
	out, _ := r.run()                         // the no-data batch closes them
	for _, o := range out {
		written += o[3].(int64)
	}
	if late < 290 || written+late != total || r.st.Rows() != 1 {
		t.Fatalf("written %d + late %d, want %d rows accounted for, about 300 late; %d state rows, want 1", written, late, total, r.st.Rows())
	}
}

func TestFingerprint(t *testing.T) {
	base := func(mut func(*v1.Aggregate), eventTime string) string {
		spec := &v1.Aggregate{GroupBy: append(slices.Clone(byCountry), tumbling("10s")...),
			Aggregates: []v1.Aggregation{{Name: "revenue", Function: v1.AggSum, Column: "amount"}}}
		if mut != nil {
			mut(spec)
		}
		a, err := stateful.NewAggregate(withDurations(t, stateful.AggregateConfig{Name: "0", Spec: spec, Input: orders, EventTime: eventTime, Mode: v1.OutputUpdate}))
		if err != nil {
			t.Fatal(err)
		}
		return a.Metadata().Fingerprint
	}
	orig := base(nil, "ts")
	if got := base(func(a *v1.Aggregate) { a.Aggregates[0].Name = "total" }, "ts"); got != orig {
		t.Errorf("renaming an output changed the fingerprint")
	}
	for name, mut := range map[string]func(*v1.Aggregate){
		"function": func(a *v1.Aggregate) { a.Aggregates[0].Function = v1.AggMax },
		"input":    func(a *v1.Aggregate) { a.Aggregates[0].Column = "qty" },
		"window":   func(a *v1.Aggregate) { a.GroupBy[1].Window.Duration = "5s" },
		"slide":    func(a *v1.Aggregate) { a.GroupBy[1].Window.Slide = "5s" },
		"keyOrder": func(a *v1.Aggregate) { a.GroupBy[0], a.GroupBy[1] = a.GroupBy[1], a.GroupBy[0] },
		"key":      func(a *v1.Aggregate) { a.GroupBy[0].Column = "id" },
	} {
		if got := base(mut, "ts"); got == orig {
			t.Errorf("changing the %s kept the fingerprint", name)
		}
	}
	if got := base(nil, ""); got == orig {
		t.Errorf("removing the watermark kept the fingerprint")
	}
}

func TestWatermark(t *testing.T) {
	w, err := stateful.NewWatermark("ts", 10*time.Second, orders)
	if err != nil {
		t.Fatal(err)
	}
	cur := int64(0)
	for i, tc := range []struct {
		rows []stateful.Row
		want int64
	}{
		{[]stateful.Row{order("a", "", 0, 0, at(30)), order("a", "", 0, 0, at(20))}, at(20).UnixMilli()},
		{nil, at(20).UnixMilli()},
		{[]stateful.Row{order("a", "", 0, 0, at(5))}, at(20).UnixMilli()}, // never backwards
		{[]stateful.Row{{"a", "", 0.0, int64(0), nil}}, at(20).UnixMilli()},
		{[]stateful.Row{order("a", "", 0, 0, at(31).Add(time.Microsecond))}, at(21).UnixMilli()},
	} {
		for _, row := range tc.rows {
			w.Observe(row)
		}
		if cur = w.Next(cur); cur != tc.want {
			t.Fatalf("step %d: Next() = %d, want %d", i, cur, tc.want)
		}
		if again := w.Next(cur); again != cur {
			t.Fatalf("step %d: Next() again = %d, want %d: it must change nothing", i, again, cur)
		}
		w.Forget()
	}
}
