package delta_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/delta"
)

// aggColumns are an update aggregation's output: one row per (window,
// customer), keyed by both.
var (
	aggColumns = v1.Columns{
		{Name: "window_start", Type: v1.TypeTimestamp},
		{Name: "customer", Type: v1.TypeString},
		{Name: "orders", Type: v1.TypeLong},
		{Name: "revenue", Type: v1.TypeDouble},
	}
	aggKeys = []string{"window_start", "customer"}
)

const (
	benchCustomers = 10_000  // rows per window
	benchFileRows  = 100_000 // rows per data file of the loaded history
	benchBatchKeys = 1_000   // changed keys per batch
)

func aggRow(window, customer int, n int64) delta.Row {
	return delta.Row{epoch.Add(time.Duration(window) * 5 * time.Minute), fmt.Sprintf("c%06d", customer), n, float64(n) * 2.5}
}

// mergeTables caches, per table size, a folder holding the loaded table, so
// that a benchmark process builds each size once; each benchmark copies it.
var mergeTables sync.Map // rows → *builtTable

type builtTable struct {
	once sync.Once
	dir  string
	err  error
}

// loadedTable returns a fresh copy of a table of rows rows: rows/10k closed
// windows of 10k customers, appended in files of 100k rows (10 windows a
// file), as a history bulk-loaded or compacted would be.
func loadedTable(b *testing.B, rows int) checkpoint.Store {
	b.Helper()
	v, _ := mergeTables.LoadOrStore(rows, &builtTable{})
	bt := v.(*builtTable)
	bt.once.Do(func() {
		bt.dir, bt.err = os.MkdirTemp("", fmt.Sprintf("merge-bench-%d-", rows))
		if bt.err != nil {
			return
		}
		store, err := checkpoint.OpenDir(bt.dir)
		if err != nil {
			bt.err = err
			return
		}
		tbl := delta.Open(store)
		for f, r := 0, 0; r < rows; f++ {
			var batch []delta.Row
			for ; r < rows && len(batch) < benchFileRows; r++ {
				batch = append(batch, aggRow(r/benchCustomers, r%benchCustomers, 1))
			}
			if _, err := tbl.Write(context.Background(), delta.Write{AppID: "load", Version: int64(f), Columns: aggColumns, Rows: batch}); err != nil {
				bt.err = err
				return
			}
		}
	})
	if bt.err != nil {
		b.Fatalf("build the %d-row table: %v", rows, bt.err)
	}
	dir := filepath.Join(b.TempDir(), "table")
	if err := os.CopyFS(dir, os.DirFS(bt.dir)); err != nil {
		b.Fatal(err)
	}
	store, err := checkpoint.OpenDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	return store
}

// BenchmarkMerge merges one batch of 1,000 changed keys per iteration into a
// table of 10k, 1M or 10M rows (local folder), as an update aggregation's
// delta sink does, and reports per batch the files and rows rewritten (rows
// copied from the rewritten files that the batch does not change), the rows
// written in all, and the process's CPU time.
//
//   - recent: what a windowed aggregation writes, ten batches a window: 80%
//     of the keys are the open window's (half of them updated from the
//     previous batch, half new), 20% late rows of the window before. Stats
//     on window_start rule out the history (the loaded windows are closed).
//   - spread: the keys are drawn uniformly from the whole table (late data
//     in every window, or a keyed aggregation without a window): no file
//     can be ruled out, so copy-on-write rewrites what holds the keys.
func BenchmarkMerge(b *testing.B) {
	for _, keys := range []string{"recent", "spread"} {
		for _, rows := range []int{10_000, 1_000_000, 10_000_000} {
			b.Run(fmt.Sprintf("keys=%s/rows=%d", keys, rows), func(b *testing.B) {
				tbl := delta.Open(loadedTable(b, rows))
				ctx := context.Background()
				windows := rows / benchCustomers
				rnd := rand.New(rand.NewPCG(1, 2))
				var batches, filesRewritten, written int64
				cpu0 := cpuTime()
				for b.Loop() {
					batch := make([]delta.Row, benchBatchKeys)
					for j := range batch {
						if keys == "recent" {
							// 80% in the open window, 20% late rows of the one before.
							i, w := int(batches), windows+1+int(batches)/10
							if j < benchBatchKeys*8/10 {
								batch[j] = aggRow(w, ((i%10)*benchBatchKeys/2+j)%benchCustomers, batches+2)
							} else {
								batch[j] = aggRow(w-1, rnd.IntN(benchCustomers/2), batches+2)
							}
						} else {
							batch[j] = aggRow(rnd.IntN(windows), rnd.IntN(benchCustomers), batches+2)
						}
					}
					res, err := tbl.Write(ctx, delta.Write{AppID: "q", Version: batches, Columns: aggColumns, Rows: batch, Mode: delta.Merge, Keys: aggKeys})
					if err != nil {
						b.Fatal(err)
					}
					batches++
					filesRewritten += int64(res.Removed)
					for _, f := range res.Files {
						s, err := delta.ParseStats(f.Stats)
						if err != nil {
							b.Fatal(err)
						}
						written += s.NumRecords
					}
				}
				cpu := cpuTime() - cpu0
				n := float64(batches)
				b.ReportMetric(float64(filesRewritten)/n, "files-rewritten/batch")
				b.ReportMetric(float64(written-batches*benchBatchKeys)/n, "rows-rewritten/batch")
				b.ReportMetric(float64(written)/n, "rows-written/batch")
				b.ReportMetric(float64(cpu.Microseconds())/1000/n, "cpu-ms/batch")
			})
		}
	}
}

// cpuTime returns the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
