package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

// RetainedBatches are the log lengths BenchmarkBatchOverhead measures at,
// to show that finding the newest batch does not grow with them.
var RetainedBatches = []int{10, 1000}

// BenchmarkBatchOverhead measures what the checkpoint costs each batch on
// the stores newStore returns (each call a new, empty store):
//
//   - batch/retained=N: write the offsets entry, write the commit entry and
//     find the newest batch (Checkpoint.Head), with N batches already in the
//     logs;
//   - head/retained=N: the writer's Checkpoint.Head alone;
//   - restart/retained=N: what a restarted process does, checkpoint.Load and
//     Head, starting from the _latest hint.
//
// Besides ns/op it reports the median and 99th percentile latency as p50-ms
// and p99-ms.
func BenchmarkBatchOverhead(b *testing.B, newStore func(b *testing.B) checkpoint.Store) {
	for _, retained := range RetainedBatches {
		b.Run(fmt.Sprintf("batch/retained=%d", retained), func(b *testing.B) {
			c, next := benchCheckpoint(b, newStore(b), retained)
			measureHead(b, func(ctx context.Context) (checkpoint.Head, error) {
				if err := c.AddOffsets(ctx, benchOffsets(next)); err != nil {
					return checkpoint.Head{}, err
				}
				if err := c.AddCommit(ctx, checkpoint.Commit{BatchID: next, NextBatchWatermarkMs: next}); err != nil {
					return checkpoint.Head{}, err
				}
				next++
				return c.Head(ctx)
			}, func() int64 { return next })
		})
	}
	for _, retained := range RetainedBatches {
		b.Run(fmt.Sprintf("head/retained=%d", retained), func(b *testing.B) {
			c, next := benchCheckpoint(b, newStore(b), retained)
			measureHead(b, c.Head, func() int64 { return next })
		})
	}
	for _, retained := range RetainedBatches {
		b.Run(fmt.Sprintf("restart/retained=%d", retained), func(b *testing.B) {
			s := newStore(b)
			_, next := benchCheckpoint(b, s, retained)
			measureHead(b, func(ctx context.Context) (checkpoint.Head, error) {
				c, err := checkpoint.Load(ctx, s)
				if err != nil {
					return checkpoint.Head{}, err
				}
				return c.Head(ctx)
			}, func() int64 { return next })
		})
	}
}

// measureHead runs op in b.Loop and times each run; it fails on op's error or when the Head
// op returns does not point at next() (asked after the run), and reports the latency
// percentiles.
func measureHead(b *testing.B, op func(context.Context) (checkpoint.Head, error), next func() int64) {
	ctx := b.Context()
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		h, err := op(ctx)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		if want := next(); h.Next() != want {
			b.Fatalf("Head().Next() = %d, want %d", h.Next(), want)
		}
	}
	reportPercentiles(b, lat)
}

// benchCheckpoint claims a checkpoint in s and commits n batches in it.
func benchCheckpoint(b *testing.B, s checkpoint.Store, n int) (*checkpoint.Checkpoint, int64) {
	b.Helper()
	c, err := checkpoint.Claim(b.Context(), s, checkpoint.Owner{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	for batch := range int64(n) {
		if err := c.AddOffsets(b.Context(), benchOffsets(batch)); err != nil {
			b.Fatal(err)
		}
		if err := c.AddCommit(b.Context(), checkpoint.Commit{BatchID: batch, NextBatchWatermarkMs: batch}); err != nil {
			b.Fatal(err)
		}
	}
	return c, int64(n)
}

// benchOffsets is a typical offsets entry: two sources, one of them Kafka
// with 8 partitions.
func benchOffsets(batch int64) checkpoint.Offsets {
	return checkpoint.Offsets{
		BatchID:          batch,
		BatchWatermarkMs: 1_777_000_000_000 + batch,
		BatchTimestampMs: 1_777_000_000_000 + batch,
		Conf:             map[string]string{"lockstep.stateStore.partitions": "8"},
		Sources: []checkpoint.SourceOffset{
			{Source: "orders", Offset: json.RawMessage(fmt.Sprintf(`{"orders":{"0":%[1]d,"1":%[1]d,"2":%[1]d,"3":%[1]d,"4":%[1]d,"5":%[1]d,"6":%[1]d,"7":%[1]d}}`, 1000*batch))},
			{Source: "landing", Offset: json.RawMessage(fmt.Sprintf(`{"logOffset":%d}`, batch))},
		},
	}
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}
