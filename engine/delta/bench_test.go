package delta_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/delta"
)

// timingStore adds up the time spent creating commit files.
type timingStore struct {
	checkpoint.Store
	mu     sync.Mutex
	commit time.Duration
}

func (s *timingStore) Create(ctx context.Context, key string, data []byte) error {
	if !strings.HasPrefix(key, "_delta_log/") {
		return s.Store.Create(ctx, key, data)
	}
	start := time.Now()
	err := s.Store.Create(ctx, key, data)
	s.mu.Lock()
	s.commit += time.Since(start)
	s.mu.Unlock()
	return err
}

// BenchmarkWrite writes one batch per iteration (an append with its txn)
// to a table on loopback S3 (versitygw) and on a local folder, and reports
// rows/s and the median and 99th percentile of the batch's time (data file
// and commit) and of the commit file's create alone.
func BenchmarkWrite(b *testing.B) {
	for _, kind := range storeKinds {
		for _, n := range []int{1_000, 100_000} {
			b.Run(fmt.Sprintf("%s/rows=%d", kind, n), func(b *testing.B) {
				ts := &timingStore{Store: newLocation(b, kind)()}
				tbl := delta.Open(ts)
				rows := orders(1, n)
				ctx := context.Background()
				var batches, commits []time.Duration
				b.ReportAllocs()
				start := time.Now()
				for b.Loop() {
					began, before := time.Now(), ts.commit
					if _, err := tbl.Write(ctx, delta.Write{AppID: "bench", Version: int64(len(batches)), Columns: orderColumns, Rows: rows}); err != nil {
						b.Fatal(err)
					}
					batches = append(batches, time.Since(began))
					commits = append(commits, ts.commit-before)
				}
				elapsed := time.Since(start)
				b.ReportMetric(float64(n)*float64(len(batches))/elapsed.Seconds(), "rows/s")
				b.ReportMetric(percentile(batches, 50), "p50-ms")
				b.ReportMetric(percentile(batches, 99), "p99-ms")
				b.ReportMetric(percentile(commits, 50), "commit-p50-ms")
				b.ReportMetric(percentile(commits, 99), "commit-p99-ms")
			})
		}
	}
}

// percentile returns the p-th percentile of ds in milliseconds.
func percentile(ds []time.Duration, p int) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)-1, (len(s)*p+99)/100-1)
	return float64(s[max(i, 0)].Microseconds()) / 1000
}

// BenchmarkNewestTxn looks up a query's newest txn version through a new
// Table (no cache: what a restarted engine does), in tables of 100 and 1,000
// commits holding 100 or 1,000 data files (the commits past the files are
// empty batches: txn only), with a checkpoint every 10 commits and, for
// contrast, with none. "warm" is the lookup through the Table that wrote
// the commits, as a running sink does before each batch.
func BenchmarkNewestTxn(b *testing.B) {
	for _, kind := range storeKinds {
		for _, tc := range []struct {
			commits, files int
			checkpoints    bool
			warm           bool
		}{
			{100, 100, true, false},
			{1000, 100, true, false},
			{1000, 1000, true, false},
			{1000, 1000, false, false},
			{1000, 1000, true, true},
		} {
			name := fmt.Sprintf("%s/commits=%d/files=%d/checkpoints=%t", kind, tc.commits, tc.files, tc.checkpoints)
			if tc.warm {
				name += "/warm"
			}
			b.Run(name, func(b *testing.B) {
				open := newLocation(b, kind)
				interval := 10
				if !tc.checkpoints {
					interval = 1 << 30
				}
				w := delta.Open(open(), delta.WithCheckpointInterval(interval))
				ctx := context.Background()
				row := orders(0, 1)
				for v := range tc.commits {
					var rows []delta.Row
					if v < tc.files {
						rows = row
					}
					if _, err := w.Write(ctx, delta.Write{AppID: "q", Version: int64(v), Columns: orderColumns, Rows: rows}); err != nil {
						b.Fatal(err)
					}
				}
				store := open()
				var lookups []time.Duration
				b.ResetTimer()
				for b.Loop() {
					began := time.Now()
					tbl := w
					if !tc.warm {
						tbl = delta.Open(store)
					}
					v, ok, err := tbl.TxnVersion(ctx, "q")
					if err != nil || !ok || v != int64(tc.commits-1) {
						b.Fatalf("TxnVersion = %d, %t, %v", v, ok, err)
					}
					lookups = append(lookups, time.Since(began))
				}
				b.ReportMetric(percentile(lookups, 50), "p50-ms")
				b.ReportMetric(percentile(lookups, 99), "p99-ms")
			})
		}
	}
}
