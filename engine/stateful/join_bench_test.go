package stateful_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/state"
	"github.com/lockstep-dev/lockstep/engine/stateful"
)

// joinBenchStream generates the batches of the join benchmarks: each batch
// holds perSide impressions and perSide clicks over keys ads drawn
// uniformly, event times up to 5s behind the batch's second, which
// advances by one per batch; the watermark trails it by 10s. With the
// bound [-5s, +20s] an impression stays buffered ~30 batches and a click
// ~15, so the state settles at about 45 batches' worth of rows.
type joinBenchStream struct {
	rng     *rand.Rand
	keys    []string
	perSide int
	batch   int
}

func newJoinBenchStream(keys, perSide int) *joinBenchStream {
	s := &joinBenchStream{rng: rand.New(rand.NewPCG(1, uint64(keys))), perSide: perSide}
	for i := range keys {
		s.keys = append(s.keys, keyName(i))
	}
	return s
}

func (s *joinBenchStream) next() (left, right []stateful.Row, wmMs int64) {
	now := s.batch + 100
	s.batch++
	for i := range s.perSide {
		left = append(left, stateful.Row{s.keys[s.rng.IntN(len(s.keys))], "user", at(now).Add(-time.Duration(s.rng.IntN(5000)) * time.Millisecond)})
		right = append(right, stateful.Row{s.keys[s.rng.IntN(len(s.keys))], at(now).Add(-time.Duration(s.rng.IntN(5000)) * time.Millisecond), float64(i)})
	}
	return left, right, at(now - 10).UnixMilli()
}

func benchJoin(b *testing.B) (*stateful.StreamJoin, [2]*state.Store, checkpoint.Store) {
	j := newJoin(b, v1.JoinLeftOuter)
	cs, err := checkpoint.OpenDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	var stores [2]*state.Store
	for i, meta := range j.Metadata() {
		st, err := state.Open(b.Context(), cs, meta, state.Options{Partitions: 8})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		if err := st.Load(b.Context(), 0); err != nil {
			b.Fatal(err)
		}
		stores[i] = st
	}
	return j, stores, cs
}

// BenchmarkStreamJoin measures the left outer stream–stream join at 100k
// keys against a hand-written symmetric hash join of the same rows in plain
// Go maps (no encoding, no state store): batches of 20k impressions and 20k
// clicks, the state settled at ~1.4M buffered rows (see joinBenchStream).
// rows/cpu-s counts input rows per CPU-second of Process alone (as
// BenchmarkAggregate); with-commit-rows/cpu-s adds writing both stores'
// deltas. Run with -cpu 1 for the one-core figure.
func BenchmarkStreamJoin(b *testing.B) {
	const keys, perSide, warm = 100_000, 20_000, 45
	b.Run("engine", func(b *testing.B) {
		j, stores, _ := benchJoin(b)
		s := newJoinBenchStream(keys, perSide)
		step := func() (time.Duration, time.Duration, int) {
			l, r, wm := s.next()
			began := cpuTime()
			out, _, err := j.Process(stores[0], stores[1], l, r, stateful.Batch{WatermarkMs: wm})
			if err != nil {
				b.Fatal(err)
			}
			processed := cpuTime()
			for _, st := range stores {
				if _, err := st.Commit(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			return processed - began, cpuTime() - began, len(out)
		}
		for range warm {
			step()
		}
		var cpu, withCommit time.Duration
		emitted := 0
		b.ResetTimer()
		for b.Loop() {
			c, cc, n := step()
			cpu, withCommit, emitted = cpu+c, withCommit+cc, emitted+n
		}
		rows := float64(2 * perSide * b.N)
		b.ReportMetric(rows/cpu.Seconds(), "rows/cpu-s")
		b.ReportMetric(rows/withCommit.Seconds(), "with-commit-rows/cpu-s")
		b.ReportMetric(float64(emitted)/float64(b.N), "out-rows/batch")
		b.ReportMetric(float64(stores[0].Rows()+stores[1].Rows()), "buffered-rows")
		b.ReportMetric(0, "ns/op")
	})
	b.Run("plain-go", func(b *testing.B) {
		h := newPlainJoin(5*time.Second, 20*time.Second)
		s := newJoinBenchStream(keys, perSide)
		for range warm {
			l, r, wm := s.next()
			h.process(l, r, wm*1e6)
		}
		var cpu time.Duration
		emitted := 0
		b.ResetTimer()
		for b.Loop() {
			l, r, wm := s.next()
			began := cpuTime()
			emitted += len(h.process(l, r, wm*1e6))
			cpu += cpuTime() - began
		}
		b.ReportMetric(float64(2*perSide*b.N)/cpu.Seconds(), "rows/cpu-s")
		b.ReportMetric(float64(emitted)/float64(b.N), "out-rows/batch")
		b.ReportMetric(float64(h.buffered), "buffered-rows")
		b.ReportMetric(0, "ns/op")
	})
}

// plainJoin is the baseline: the same left outer join with the same bound
// and watermark rules, in Go maps of rows, keyed by the first column.
type plainJoin struct {
	lower, upper int64
	sides        [2]map[string][]plainRow
	buffered     int
}

type plainRow struct {
	t       int64
	row     stateful.Row
	matched bool
}

func newPlainJoin(lower, upper time.Duration) *plainJoin {
	return &plainJoin{lower: int64(lower), upper: int64(upper), sides: [2]map[string][]plainRow{{}, {}}}
}

func (h *plainJoin) process(left, right []stateful.Row, wm int64) []stateful.Row {
	var out []stateful.Row
	combine := func(l, r stateful.Row) stateful.Row {
		o := make(stateful.Row, 6)
		copy(o, l)
		copy(o[3:], r)
		return o
	}
	for _, l := range left {
		t := l[2].(time.Time).UnixNano()
		if t <= wm {
			continue
		}
		k := l[0].(string)
		matched := false
		for i := range h.sides[1][k] {
			c := &h.sides[1][k][i]
			if c.t >= t-h.lower && c.t <= t+h.upper {
				out = append(out, combine(l, c.row))
				matched = true
			}
		}
		h.sides[0][k] = append(h.sides[0][k], plainRow{t: t, row: l, matched: matched})
	}
	for _, r := range right {
		t := r[1].(time.Time).UnixNano()
		if t <= wm {
			continue
		}
		k := r[0].(string)
		for i := range h.sides[0][k] {
			l := &h.sides[0][k][i]
			if t >= l.t-h.lower && t <= l.t+h.upper {
				out = append(out, combine(l.row, r))
				l.matched = true
			}
		}
		h.sides[1][k] = append(h.sides[1][k], plainRow{t: t, row: r})
	}
	h.buffered = 0
	for side, after := range []int64{h.upper, h.lower} {
		for k, rows := range h.sides[side] {
			kept := rows[:0]
			for _, r := range rows {
				switch {
				case r.t+after > wm:
					kept = append(kept, r)
				case side == 0 && !r.matched:
					out = append(out, combine(r.row, nil))
				}
			}
			if len(kept) == 0 {
				delete(h.sides[side], k)
				continue
			}
			h.sides[side][k] = kept
			h.buffered += len(kept)
		}
	}
	return out
}

// BenchmarkStreamJoinMemoryPerRow measures the heap per buffered row of
// the join (state store and index) with one impression and one click
// buffered for each of 100k keys: after processing and committing, and
// after a new operator recovered the state from its files and indexed it.
func BenchmarkStreamJoinMemoryPerRow(b *testing.B) {
	const keys = 100_000
	for b.Loop() {
		before := heap()
		j, stores, cs := benchJoin(b)
		var left, right []stateful.Row
		for i := range keys {
			left = append(left, stateful.Row{keyName(i), fmt.Sprintf("user-%d", i%1000), at(100 + i%50)})
			right = append(right, stateful.Row{keyName(i), at(200 + i%50), float64(i)})
		}
		if _, _, err := j.Process(stores[0], stores[1], left, right, stateful.Batch{}); err != nil {
			b.Fatal(err)
		}
		for _, st := range stores {
			if _, err := st.Commit(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
		left, right = nil, nil
		buffered := float64(stores[0].Rows() + stores[1].Rows())
		b.ReportMetric(float64(heap()-before)/buffered, "B/row")
		b.ReportMetric(float64(stores[0].MemoryBytes()+stores[1].MemoryBytes())/buffered, "store-estimated-B/row")
		for _, st := range stores {
			st.Close()
		}
		j, stores = nil, [2]*state.Store{} //nolint:ineffassign,staticcheck // let the GC take them
		before = heap()
		re := newJoin(b, v1.JoinLeftOuter)
		var again [2]*state.Store
		for i, meta := range re.Metadata() {
			st, err := state.Open(b.Context(), cs, meta, state.Options{Partitions: 8})
			if err != nil {
				b.Fatal(err)
			}
			if err := st.Load(b.Context(), 1); err != nil {
				b.Fatal(err)
			}
			again[i] = st
		}
		// An empty batch builds the index.
		if _, _, err := re.Process(again[0], again[1], nil, nil, stateful.Batch{}); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(heap()-before)/buffered, "recovered-B/row")
		for _, st := range again {
			st.Close()
		}
	}
}
