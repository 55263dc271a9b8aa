package stateful_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/stateful"
)

// TestAggregateSlidingMatchesModel runs sliding windows (their slide a divisor
// of the size and not) over random batches, with late and null event times, a
// restart from the checkpoint every few batches, in append and update mode,
// batches that fail before their commit and run again, and checks every
// batch's output, late rows and state size against a model that
// adds each row to each of its windows (the definition the operator's panes
// and eviction index must keep).
func TestAggregateSlidingMatchesModel(t *testing.T) {
	for _, tc := range []struct {
		name        string
		size, slide int // seconds
		mode        v1.OutputMode
	}{
		{"10s every 2s, append", 10, 2, v1.OutputAppend},
		{"10s every 4s, append", 10, 4, v1.OutputAppend},
		{"9s every 6s, update", 9, 6, v1.OutputUpdate},
		{"10s every 10s, append", 10, 10, v1.OutputAppend},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.size), uint64(tc.slide)))
			a := aggregate(t, tc.mode, "ts",
				[]v1.GroupKey{{Window: &v1.Window{Column: "ts", Duration: v1.Duration((time.Duration(tc.size) * time.Second).String()),
					Slide: v1.Duration((time.Duration(tc.slide) * time.Second).String())}}, {Column: "country"}},
				v1.Aggregation{Name: "n", Function: v1.AggCount},
				v1.Aggregation{Name: "items", Function: v1.AggSum, Column: "qty"},
				v1.Aggregation{Name: "hi", Function: v1.AggMax, Column: "id"},
				v1.Aggregation{Name: "buyers", Function: v1.AggCountDistinct, Column: "id"})
			r := newRunner(t, a, &v1.Watermark{Column: "ts", Delay: "3s"})
			m := newWindowModel(tc.size, tc.slide)
			clock := 0
			for b := range 40 {
				if b%7 == 6 {
					r.restart()
				}
				var rows []stateful.Row
				for range rng.IntN(60) {
					sec := clock - 8 + rng.IntN(14) // some behind the watermark
					var ts any = at(sec)
					if rng.IntN(20) == 0 {
						ts = nil
					}
					id := string(rune('a' + rng.IntN(6)))
					rows = append(rows, stateful.Row{id, []string{"DE", "FR", "IT"}[rng.IntN(3)], 1.0, int64(rng.IntN(5)), ts})
				}
				clock += rng.IntN(6)
				lateSec, wmSec := secondsAfterT0(r.lateMs), secondsAfterT0(r.wmMs)
				if b%5 == 4 { // a batch that fails before its commit, then runs again on the reloaded state
					if _, _, err := a.Process(r.st, rows, stateful.Batch{WatermarkMs: r.wmMs, LateWatermarkMs: r.lateMs}); err != nil {
						t.Fatal(err)
					}
					if err := r.st.Load(t.Context(), r.batch); err != nil {
						t.Fatal(err)
					}
				}
				want, dropped := m.batch(rows, lateSec, wmSec, tc.mode)
				got, metrics := r.run(rows...)
				if diff := cmp.Diff(want, sorted(got)); diff != "" {
					t.Fatalf("batch %d (watermark %ds, late %ds) output (-want +got):\n%s", b, wmSec, lateSec, diff)
				}
				if metrics.DroppedByWatermark != dropped || r.st.Rows() != int64(len(m.groups)) {
					t.Fatalf("batch %d: dropped %d and kept %d state rows, want %d and %d",
						b, metrics.DroppedByWatermark, r.st.Rows(), dropped, len(m.groups))
				}
			}
		})
	}
}

// windowModel aggregates rows into sliding windows by definition: each row
// into every window that holds it.
type windowModel struct {
	size, slide int
	groups      map[windowGroup]*windowAcc
}

type windowGroup struct {
	start   int
	country string
}

type windowAcc struct {
	n, items int64
	hi       string
	buyers   map[string]bool
}

func newWindowModel(size, slide int) *windowModel {
	return &windowModel{size: size, slide: slide, groups: map[windowGroup]*windowAcc{}}
}

// batch adds rows: a window ending at or before late takes no row, and a row
// that no window takes is dropped. Then windows ending at or before wm close.
// It returns what the mode writes, sorted, and the rows dropped.
func (m *windowModel) batch(rows []stateful.Row, late, wm int, mode v1.OutputMode) (out []stateful.Row, dropped int64) {
	rowOf := func(g windowGroup, a *windowAcc) stateful.Row {
		return stateful.Row{at(g.start), at(g.start + m.size), g.country, a.n, a.items, a.hi, int64(len(a.buyers))}
	}
	touched := map[windowGroup]bool{}
	for _, r := range rows {
		ts, ok := r[4].(time.Time)
		if !ok {
			continue
		}
		sec := int(ts.Sub(t0) / time.Second)
		placed := false
		for start := sec - ((sec%m.slide)+m.slide)%m.slide; start > sec-m.size; start -= m.slide {
			if start+m.size <= late {
				continue
			}
			g := windowGroup{start, r[1].(string)}
			a := m.groups[g]
			if a == nil {
				a = &windowAcc{buyers: map[string]bool{}}
				m.groups[g] = a
			}
			a.n++
			a.items += r[3].(int64)
			a.hi = max(a.hi, r[0].(string))
			a.buyers[r[0].(string)] = true
			touched[g], placed = true, true
		}
		if !placed {
			dropped++
		}
	}
	if mode == v1.OutputUpdate {
		for g := range touched {
			out = append(out, rowOf(g, m.groups[g]))
		}
	}
	for g, a := range m.groups {
		if g.start+m.size <= wm {
			if mode == v1.OutputAppend {
				out = append(out, rowOf(g, a))
			}
			delete(m.groups, g)
		}
	}
	return sorted(out), dropped
}

// secondsAfterT0 is a watermark in epoch milliseconds as seconds after t0
// (the watermarks here are whole seconds).
func secondsAfterT0(ms int64) int { return int((ms - t0.UnixMilli()) / 1000) }
