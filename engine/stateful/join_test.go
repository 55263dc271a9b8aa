package stateful_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/state"
	"github.com/lockstep-dev/lockstep/engine/stateful"
)

// impressions (left) and clicks (right) are the sides of the join tests.
var (
	impressions = v1.Columns{{Name: "ad", Type: v1.TypeString}, {Name: "user", Type: v1.TypeString}, {Name: "its", Type: v1.TypeTimestamp}}
	clicks      = v1.Columns{{Name: "cad", Type: v1.TypeString}, {Name: "cts", Type: v1.TypeTimestamp}, {Name: "cost", Type: v1.TypeDouble}}
)

func imp(ad, user string, sec int) stateful.Row { return stateful.Row{ad, user, at(sec)} }
func click(ad string, sec int, cost float64) stateful.Row {
	return stateful.Row{ad, at(sec), cost}
}

// joined is an output row: an impression's columns, then a click's (nil
// for none).
func joined(l, r stateful.Row) stateful.Row {
	if l == nil {
		l = stateful.Row{nil, nil, nil}
	}
	if r == nil {
		r = stateful.Row{nil, nil, nil}
	}
	return append(append(stateful.Row{}, l...), r...)
}

// newJoin compiles a join of impressions and clicks on the ad, with
// cts BETWEEN its - 5s AND its + 20s.
func newJoin(t testing.TB, typ v1.JoinType) *stateful.StreamJoin {
	t.Helper()
	j, err := stateful.NewStreamJoin(stateful.StreamJoinConfig{
		Name: "j", Type: typ, Left: impressions, Right: clicks,
		LeftKeys: []string{"ad"}, RightKeys: []string{"cad"}, LeftTime: "its", RightTime: "cts",
		Lower: 5 * time.Second, Upper: 20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// joinRunner runs batches of a join the way the engine does: load both
// stores at the batch's version, process, commit both.
type joinRunner struct {
	t      testing.TB
	cs     checkpoint.Store
	j      *stateful.StreamJoin
	parts  int
	stores [2]*state.Store
	batch  int64
	// lateMs is the watermark the last committed batch ran with: the next
	// batch's late-event watermark (0 before the first).
	lateMs int64
}

func newJoinRunner(t testing.TB, j *stateful.StreamJoin) *joinRunner {
	t.Helper()
	cs, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &joinRunner{t: t, cs: cs, j: j, parts: 4}
	r.restart(j)
	return r
}

// restart drops the in-memory state (and the operator, for j) and loads
// the state of the next batch from the checkpoint.
func (r *joinRunner) restart(j *stateful.StreamJoin) {
	r.t.Helper()
	r.j = j
	for i, meta := range j.Metadata() {
		if r.stores[i] != nil {
			r.stores[i].Close()
		}
		st, err := state.Open(r.t.Context(), r.cs, meta, state.Options{Partitions: r.parts, SnapshotEvery: 3})
		if err != nil {
			r.t.Fatal(err)
		}
		r.t.Cleanup(func() { st.Close() })
		if err := st.Load(r.t.Context(), r.batch); err != nil {
			r.t.Fatal(err)
		}
		r.stores[i] = st
	}
}

// run runs one batch with watermark wm (seconds after t0); its late-event
// watermark is the one the batch before ran with.
func (r *joinRunner) run(wm int, left, right []stateful.Row) ([]stateful.Row, stateful.JoinMetrics) {
	r.t.Helper()
	out, m := r.process(wm, left, right)
	for _, st := range r.stores {
		if _, err := st.Commit(r.t.Context()); err != nil {
			r.t.Fatalf("batch %d: Commit() error = %v", r.batch, err)
		}
	}
	r.batch++
	r.lateMs = at(wm).UnixMilli()
	return out, m
}

// process runs a batch without committing it (a crash before the commit).
func (r *joinRunner) process(wm int, left, right []stateful.Row) ([]stateful.Row, stateful.JoinMetrics) {
	r.t.Helper()
	b := stateful.Batch{WatermarkMs: at(wm).UnixMilli(), LateWatermarkMs: r.lateMs}
	out, m, err := r.j.Process(r.stores[0], r.stores[1], left, right, b)
	if err != nil {
		r.t.Fatalf("batch %d: Process() error = %v", r.batch, err)
	}
	return out, m
}

func (r *joinRunner) rows() (left, right int64) { return r.stores[0].Rows(), r.stores[1].Rows() }

func rows(rs ...stateful.Row) []stateful.Row { return rs }

func TestStreamJoinMatchesWithinTheBound(t *testing.T) {
	r := newJoinRunner(t, newJoin(t, v1.JoinInner))
	// cts BETWEEN its - 5s AND its + 20s, both ends included.
	out, _ := r.run(-100, rows(imp("a", "u1", 10), imp("b", "u2", 10)),
		rows(click("a", 5, 1), click("a", 4, 2), click("a", 30, 3), click("a", 31, 4), click("c", 10, 5)))
	want := rows(joined(imp("a", "u1", 10), click("a", 5, 1)), joined(imp("a", "u1", 10), click("a", 30, 3)))
	if diff := cmp.Diff(sorted(want), sorted(out)); diff != "" {
		t.Errorf("batch 0 (-want +got):\n%s", diff)
	}
	// A later impression joins the buffered clicks in its own bound
	// [15s, 40s]; a later click joins the buffered impressions.
	out, _ = r.run(-100, rows(imp("a", "u3", 20)), rows(click("b", 25, 6)))
	want = rows(
		joined(imp("a", "u3", 20), click("a", 30, 3)), joined(imp("a", "u3", 20), click("a", 31, 4)),
		joined(imp("b", "u2", 10), click("b", 25, 6)),
	)
	if diff := cmp.Diff(sorted(want), sorted(out)); diff != "" {
		t.Errorf("batch 1 (-want +got):\n%s", diff)
	}
	if l, rr := r.rows(); l != 3 || rr != 6 {
		t.Errorf("buffered rows = %d left, %d right; want 3, 6 (nothing evicted at a low watermark)", l, rr)
	}
}

func TestStreamJoinNoMatchOutsideTheBound(t *testing.T) {
	r := newJoinRunner(t, newJoin(t, v1.JoinInner))
	if out, _ := r.run(-100, rows(imp("a", "u1", 100)), nil); len(out) != 0 {
		t.Fatalf("batch 0 emitted %v", out)
	}
	out, _ := r.run(-100, nil, rows(click("a", 94, 1), click("a", 121, 1), click("A", 100, 1)))
	if len(out) != 0 {
		t.Errorf("clicks outside the bound (or of another key) matched: %v", out)
	}
}

func TestStreamJoinOuterRowsOnceWhenTheWatermarkPassesTheBound(t *testing.T) {
	r := newJoinRunner(t, newJoin(t, v1.JoinLeftOuter))
	out, _ := r.run(0, rows(imp("a", "matched", 10), imp("b", "alone", 10), imp("c", "later", 50)), rows(click("a", 12, 1)))
	if diff := cmp.Diff(rows(joined(imp("a", "matched", 10), click("a", 12, 1))), out); diff != "" {
		t.Errorf("batch 0 (-want +got):\n%s", diff)
	}
	// The impressions at 10s can match clicks up to 30s: at a watermark of
	// 30s they wait (evicted once the bound is behind the watermark, as on
	// Spark); at 31s the unmatched one is emitted with nulls, the matched one
	// is dropped silently.
	if out, _ := r.run(30, nil, nil); len(out) != 0 {
		t.Errorf("watermark 30s emitted %v", out)
	}
	out, _ = r.run(31, nil, nil)
	if diff := cmp.Diff(rows(joined(imp("b", "alone", 10), nil)), out); diff != "" {
		t.Errorf("watermark 31s (-want +got):\n%s", diff)
	}
	// Never again. The impression at 50s still matches a click at 60s.
	out, _ = r.run(40, nil, rows(click("c", 60, 2)))
	if diff := cmp.Diff(rows(joined(imp("c", "later", 50), click("c", 60, 2))), out); diff != "" {
		t.Errorf("watermark 40s (-want +got):\n%s", diff)
	}
	for _, wm := range []int{70, 200, 1000} {
		if out, _ := r.run(wm, nil, nil); len(out) != 0 {
			t.Errorf("watermark %ds emitted %v; outer rows go once, matched rows never", wm, out)
		}
	}
	if l, rr := r.rows(); l != 0 || rr != 0 {
		t.Errorf("buffered rows = %d left, %d right after the watermark passed everything", l, rr)
	}
}

func TestStreamJoinRightOuter(t *testing.T) {
	r := newJoinRunner(t, newJoin(t, v1.JoinRightOuter))
	r.run(0, rows(imp("a", "u", 10)), rows(click("a", 12, 1), click("b", 12, 2)))
	// A click at 12s can match impressions in [-8s, 17s]: past 17s it is done.
	if out, _ := r.run(17, nil, nil); len(out) != 0 {
		t.Errorf("watermark 17s emitted %v", out)
	}
	out, _ := r.run(18, nil, nil)
	if diff := cmp.Diff(rows(joined(nil, click("b", 12, 2))), out); diff != "" {
		t.Errorf("watermark 18s (-want +got):\n%s", diff)
	}
	if out, _ := r.run(100, nil, nil); len(out) != 0 {
		t.Errorf("watermark 100s emitted %v", out)
	}
}

func TestStreamJoinEvictsByTheWatermark(t *testing.T) {
	r := newJoinRunner(t, newJoin(t, v1.JoinInner))
	r.run(0, rows(imp("a", "u", 10), imp("a", "u", 40)), rows(click("a", 10, 1), click("a", 40, 1)))
	if l, rr := r.rows(); l != 2 || rr != 2 {
		t.Fatalf("buffered rows = %d, %d; want 2, 2", l, rr)
	}
	// Left rows go once its + 20s < watermark, right rows cts + 5s: at the
	// bound they stay.
	for _, step := range []struct {
		wm          int   // the watermark, in seconds
		left, right int64 // the rows each side then holds
	}{{15, 2, 2}, {16, 2, 1}, {30, 2, 1}, {31, 1, 1}} {
		r.run(step.wm, nil, nil)
		if l, rr := r.rows(); l != step.left || rr != step.right {
			t.Errorf("at %ds: buffered rows = %d, %d; want %d, %d", step.wm, l, rr, step.left, step.right)
		}
	}
	// Rows at or behind the watermark are late: dropped and counted.
	out, m := r.run(31, rows(imp("a", "late", 30)), rows(click("a", 29, 1), click("a", 36, 1)))
	if m.LeftDroppedByWatermark != 1 || m.RightDroppedByWatermark != 1 {
		t.Errorf("dropped by watermark = %d left, %d right; want 1, 1", m.LeftDroppedByWatermark, m.RightDroppedByWatermark)
	}
	if diff := cmp.Diff(rows(joined(imp("a", "u", 40), click("a", 36, 1))), out); diff != "" {
		t.Errorf("late rows (-want +got):\n%s", diff)
	}
	r.run(100, nil, nil)
	if l, rr := r.rows(); l != 0 || rr != 0 {
		t.Errorf("at 100s: buffered rows = %d, %d; want 0, 0", l, rr)
	}
}

func TestStreamJoinNullsMatchNothing(t *testing.T) {
	r := newJoinRunner(t, newJoin(t, v1.JoinLeftOuter))
	out, _ := r.run(0, rows(stateful.Row{nil, "nokey", at(10)}, stateful.Row{"a", "notime", nil}),
		rows(stateful.Row{nil, at(10), 1.0}, stateful.Row{"a", nil, 2.0}))
	want := rows(joined(stateful.Row{nil, "nokey", at(10)}, nil), joined(stateful.Row{"a", "notime", nil}, nil))
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if l, rr := r.rows(); l != 0 || rr != 0 {
		t.Errorf("buffered rows = %d, %d; rows that can match nothing are not kept", l, rr)
	}
}

func TestStreamJoinStateRefusesAnotherBound(t *testing.T) {
	r := newJoinRunner(t, newJoin(t, v1.JoinInner))
	r.run(0, rows(imp("a", "u", 10)), nil)
	other, err := stateful.NewStreamJoin(stateful.StreamJoinConfig{
		Name: "j", Type: v1.JoinInner, Left: impressions, Right: clicks,
		LeftKeys: []string{"ad"}, RightKeys: []string{"cad"}, LeftTime: "its", RightTime: "cts",
		Lower: 5 * time.Second, Upper: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = state.Open(t.Context(), r.cs, other.Metadata()[0], state.Options{Partitions: r.parts})
	if !errors.Is(err, state.ErrIncompatible) {
		t.Errorf("Open() with another time bound: error = %v, want ErrIncompatible", err)
	}
}

func TestStreamJoinRefusesMismatchedKeyTypes(t *testing.T) {
	_, err := stateful.NewStreamJoin(stateful.StreamJoinConfig{
		Name: "j", Type: v1.JoinInner, Left: impressions, Right: clicks,
		LeftKeys: []string{"ad"}, RightKeys: []string{"cost"}, LeftTime: "its", RightTime: "cts",
	})
	if err == nil {
		t.Error("NewStreamJoin() joined a string key with a double")
	}
}

// joinBatch is one batch of a random impressions/clicks stream.
type joinBatch struct {
	wm          int
	left, right []stateful.Row
}

// randomJoinStream makes n batches over a few ads, with event times that
// move forward with some disorder, the watermark trailing them.
func randomJoinStream(seed uint64, n int) []joinBatch {
	rng := rand.New(rand.NewPCG(seed, 7))
	var out []joinBatch
	now := 0
	for b := range n {
		jb := joinBatch{wm: now - 30}
		for i := range rng.IntN(12) {
			jb.left = append(jb.left, imp(fmt.Sprintf("ad%d", rng.IntN(6)), fmt.Sprintf("u%d-%d", b, i), now-rng.IntN(40)))
		}
		for range rng.IntN(12) {
			jb.right = append(jb.right, click(fmt.Sprintf("ad%d", rng.IntN(6)), now-rng.IntN(40), float64(rng.IntN(100))))
		}
		out = append(out, jb)
		now += rng.IntN(15)
	}
	return out
}

// notLate returns the rows of each side of stream that were not late in
// their batch: after the watermark of the batch before (joinRunner.run).
func notLate(stream []joinBatch) (lefts, rights []stateful.Row) {
	late := time.UnixMilli(0)
	for _, b := range stream {
		for _, l := range b.left {
			if l[2].(time.Time).After(late) {
				lefts = append(lefts, l)
			}
		}
		for _, c := range b.right {
			if c[1].(time.Time).After(late) {
				rights = append(rights, c)
			}
		}
		late = at(b.wm)
	}
	return lefts, rights
}

func TestStreamJoinRecoveryGivesTheSameOutput(t *testing.T) {
	for _, typ := range v1.JoinTypes() {
		t.Run(string(typ), func(t *testing.T) {
			stream := randomJoinStream(uint64(len(typ)), 60)
			// Uninterrupted: one operator and one pair of stores throughout.
			ref := newJoinRunner(t, newJoin(t, typ))
			var want [][]stateful.Row
			total := 0
			for _, b := range stream {
				out, _ := ref.run(b.wm, b.left, b.right)
				want = append(want, out)
				total += len(out)
			}
			if total == 0 {
				t.Fatal("the stream joined nothing")
			}
			// Interrupted: every few batches a crash after Process and
			// before the commit, or between batches; each time a new
			// operator loads the state from the snapshots and deltas.
			rng := rand.New(rand.NewPCG(9, uint64(len(typ))))
			r := newJoinRunner(t, newJoin(t, typ))
			for i, b := range stream {
				switch rng.IntN(4) {
				case 0:
					r.process(b.wm, b.left, b.right)
					r.restart(newJoin(t, typ))
				case 1:
					r.restart(newJoin(t, typ))
				}
				out, _ := r.run(b.wm, b.left, b.right)
				if diff := cmp.Diff(want[i], out); diff != "" {
					t.Fatalf("batch %d after recovery (-uninterrupted +recovered):\n%s", i, diff)
				}
			}
		})
	}
}

// TestStreamJoinOuterRowsExactlyOnce checks over a random stream that the
// left outer join emits every impression exactly once unmatched or at least
// once matched, and each matching pair exactly once, against a brute-force
// join of all rows.
func TestStreamJoinOuterRowsExactlyOnce(t *testing.T) {
	stream := randomJoinStream(3, 80)
	r := newJoinRunner(t, newJoin(t, v1.JoinLeftOuter))
	got := map[string]int{}
	for _, b := range stream {
		out, _ := r.run(b.wm, b.left, b.right)
		for _, row := range out {
			got[fmt.Sprint(row)]++
		}
	}
	out, _ := r.run(1<<20, nil, nil) // the watermark passes everything
	for _, row := range out {
		got[fmt.Sprint(row)]++
	}
	// Brute force over the rows that were not late in their batch.
	lefts, rights := notLate(stream)
	want := map[string]int{}
	for _, l := range lefts {
		lt := l[2].(time.Time)
		matched := false
		for _, c := range rights {
			ct := c[1].(time.Time)
			if l[0] == c[0] && !ct.Before(lt.Add(-5*time.Second)) && !ct.After(lt.Add(20*time.Second)) {
				want[fmt.Sprint(joined(l, c))]++
				matched = true
			}
		}
		if !matched {
			want[fmt.Sprint(joined(l, nil))]++
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("left outer join of the stream (-brute force +join):\n%s", diff)
	}
}

// TestStreamJoinTypesExactlyOnce checks every join type over a random
// stream against a brute-force join of the rows that were not late: each
// matching pair once (inner, outer), each unmatched row of an outer side
// once with nulls, and for leftSemi each left row that has a match once,
// with nulls for the right columns.
func TestStreamJoinTypesExactlyOnce(t *testing.T) {
	for _, typ := range v1.JoinTypes() {
		t.Run(string(typ), func(t *testing.T) {
			stream := randomJoinStream(11, 80)
			r := newJoinRunner(t, newJoin(t, typ))
			got := map[string]int{}
			for _, b := range stream {
				out, _ := r.run(b.wm, b.left, b.right)
				for _, row := range out {
					got[fmt.Sprint(row)]++
				}
			}
			out, _ := r.run(1<<20, nil, nil) // the watermark passes everything
			for _, row := range out {
				got[fmt.Sprint(row)]++
			}
			if l, rr := r.rows(); l != 0 || rr != 0 {
				t.Errorf("buffered rows = %d left, %d right after the watermark passed everything", l, rr)
			}
			lefts, rights := notLate(stream)
			match := func(l, c stateful.Row) bool {
				lt, ct := l[2].(time.Time), c[1].(time.Time)
				return l[0] == c[0] && !ct.Before(lt.Add(-5*time.Second)) && !ct.After(lt.Add(20*time.Second))
			}
			want := map[string]int{}
			rightMatched := make([]bool, len(rights))
			for _, l := range lefts {
				matched := false
				for k, c := range rights {
					if !match(l, c) {
						continue
					}
					matched, rightMatched[k] = true, true
					if typ != v1.JoinLeftSemi {
						want[fmt.Sprint(joined(l, c))]++
					}
				}
				switch {
				case matched && typ == v1.JoinLeftSemi:
					want[fmt.Sprint(joined(l, nil))]++
				case !matched && typ.OuterLeft():
					want[fmt.Sprint(joined(l, nil))]++
				}
			}
			if typ.OuterRight() {
				for k, c := range rights {
					if !rightMatched[k] {
						want[fmt.Sprint(joined(nil, c))]++
					}
				}
			}
			if len(want) == 0 {
				t.Fatal("the stream joined nothing")
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s join of the stream (-brute force +join):\n%s", typ, diff)
			}
		})
	}
}

func TestStreamJoinLeftSemi(t *testing.T) {
	r := newJoinRunner(t, newJoin(t, v1.JoinLeftSemi))
	// u1 matches the buffered click of batch 0 at once and is never
	// buffered; u2 waits for its click.
	r.run(0, nil, rows(click("a", 12, 1)))
	out, _ := r.run(0, rows(imp("a", "u1", 10), imp("b", "u2", 10)), nil)
	if diff := cmp.Diff(rows(joined(imp("a", "u1", 10), nil)), out); diff != "" {
		t.Errorf("batch 1 (-want +got):\n%s", diff)
	}
	if l, _ := r.rows(); l != 1 {
		t.Errorf("buffered left rows = %d, want 1 (only the unmatched u2)", l)
	}
	// Two clicks match u2: it is emitted once, and leaves the state.
	out, _ = r.run(0, nil, rows(click("b", 15, 2), click("b", 16, 3)))
	if diff := cmp.Diff(rows(joined(imp("b", "u2", 10), nil)), out); diff != "" {
		t.Errorf("batch 2 (-want +got):\n%s", diff)
	}
	out, _ = r.run(0, nil, rows(click("b", 17, 4)))
	if len(out) != 0 {
		t.Errorf("a third click emitted %v; a semi join emits a left row once", out)
	}
	if l, _ := r.rows(); l != 0 {
		t.Errorf("buffered left rows = %d, want 0", l)
	}
}

func TestStreamJoinFullOuter(t *testing.T) {
	r := newJoinRunner(t, newJoin(t, v1.JoinFullOuter))
	r.run(0, rows(imp("a", "u", 10), imp("c", "alone", 10)), rows(click("a", 12, 1), click("b", 12, 2)))
	// The click at 12s is done past 17s, the impressions at 10s past 30s.
	out, _ := r.run(18, nil, nil)
	if diff := cmp.Diff(rows(joined(nil, click("b", 12, 2))), out); diff != "" {
		t.Errorf("watermark 18s (-want +got):\n%s", diff)
	}
	out, _ = r.run(31, nil, nil)
	if diff := cmp.Diff(rows(joined(imp("c", "alone", 10), nil)), out); diff != "" {
		t.Errorf("watermark 31s (-want +got):\n%s", diff)
	}
	if out, _ := r.run(100, nil, nil); len(out) != 0 {
		t.Errorf("watermark 100s emitted %v", out)
	}
}
