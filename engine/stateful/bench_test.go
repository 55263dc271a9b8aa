package stateful_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/state"
	"github.com/lockstep-dev/lockstep/engine/stateful"
)

var benchCols = v1.Columns{{Name: "k", Type: v1.TypeString}, {Name: "amount", Type: v1.TypeDouble}}

func countSumByKey(b *testing.B, mode v1.OutputMode) *stateful.Aggregate {
	a, err := stateful.NewAggregate(stateful.AggregateConfig{
		Name: "0", Input: benchCols, Mode: mode,
		Spec: &v1.Aggregate{GroupBy: []v1.GroupKey{{Column: "k"}}, Aggregates: []v1.Aggregation{
			{Name: "n", Function: v1.AggCount}, {Name: "total", Function: v1.AggSum, Column: "amount"},
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return a
}

func keyName(i int) string { return fmt.Sprintf("key-%07d", i) }

// loadedStore returns a loaded store with every one of keys aggregated once.
func loadedStore(b *testing.B, a *stateful.Aggregate, keys int) (*state.Store, checkpoint.Store) {
	cs, err := checkpoint.OpenDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	st, err := state.Open(b.Context(), cs, a.Metadata(), state.Options{Partitions: 8})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if err := st.Load(b.Context(), 0); err != nil {
		b.Fatal(err)
	}
	const chunk = 100_000
	for from := 0; from < keys; from += chunk {
		rows := make([]stateful.Row, 0, chunk)
		for i := from; i < min(keys, from+chunk); i++ {
			rows = append(rows, stateful.Row{keyName(i), 1.5})
		}
		if _, _, err := a.Process(st, rows, stateful.Batch{}); err != nil {
			b.Fatal(err)
		}
	}
	return st, cs
}

// BenchmarkAggregate measures count+sum by a string key (update mode) over
// batches of 100k rows drawn from 10k, 100k and 1M distinct keys, with the
// state already holding every key. Run with -cpu 1 for the one-core figure.
// The state's deltas are not written (see BenchmarkCommit in engine/state).
func BenchmarkAggregate(b *testing.B) {
	const batch = 100_000
	for _, keys := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			a := countSumByKey(b, v1.OutputUpdate)
			st, _ := loadedStore(b, a, keys)
			rng := rand.New(rand.NewPCG(1, uint64(keys)))
			names := make([]string, keys)
			for i := range names {
				names[i] = keyName(i)
			}
			rows := make([]stateful.Row, batch)
			for i := range rows {
				rows[i] = stateful.Row{names[rng.IntN(keys)], float64(i % 100)}
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for b.Loop() {
				if _, _, err := a.Process(st, rows, stateful.Batch{}); err != nil {
					b.Fatal(err)
				}
			}
			// CPU time, GC included, is what a shared machine cannot distort.
			b.ReportMetric(float64(batch*b.N)/(cpuTime()-cpu).Seconds(), "rows/cpu-s")
			b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkMemoryPerKey measures the heap each key of count+sum state takes
// (an 11-byte string key): after aggregating and committing, and after
// recovering the committed version from its files.
func BenchmarkMemoryPerKey(b *testing.B) {
	const keys = 1_000_000
	for b.Loop() {
		a := countSumByKey(b, v1.OutputUpdate)
		before := heap()
		st, cs := loadedStore(b, a, keys)
		if _, err := st.Commit(b.Context()); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(heap()-before)/keys, "B/key")
		b.ReportMetric(float64(st.MemoryBytes())/keys, "estimated-B/key")
		st.Close()
		st = nil
		before = heap()
		re, err := state.Open(b.Context(), cs, a.Metadata(), state.Options{Partitions: 8})
		if err != nil {
			b.Fatal(err)
		}
		if err := re.Load(b.Context(), 1); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(heap()-before)/keys, "recovered-B/key")
		re.Close()
	}
}

// cpuTime returns the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
