package engine_test

import (
	"context"
	"flag"
	"io"
	"path/filepath"
	"runtime"
	"testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/internal/gctune"
)

var (
	nexmarkBatch = flag.Int64("nexmark.batch", 500_000, "events per batch of BenchmarkNexmark (maxEventsPerTrigger)")
	nexmarkRate  = flag.Int64("nexmark.rate", 100_000, "event-time rate of BenchmarkNexmark's events (eventsPerSecond)")
)

// BenchmarkNexmark runs the Nexmark queries over the nexmark source
// generating as fast as possible: b.N batches of -nexmark.batch events
// (availableNow, numEvents = b.N × batch), local checkpoint, to a console
// sink printing to nowhere (sink=discard: it formats 20 rows a batch) and to
// a files sink writing Parquet (sink=files). events/cpu-s is the figure to
// compare per core: run with -cpu 1 (one core: GOMAXPROCS=1; CPU time is
// the process's user + system time, garbage collection included). events/s
// is wall clock, the end-to-end rate with -cpu 2. Events count all three
// kinds, as Nexmark's throughput does; bids are 46 of 50.
func BenchmarkNexmark(b *testing.B) {
	for _, list := range enginetest.NexmarkLists {
		for _, q := range list.Queries {
			for _, sink := range []string{"discard", "files"} {
				b.Run(q.Name+"/sink="+sink, func(b *testing.B) {
					benchNexmark(b, list.Source, list.Table, q, sink)
				})
			}
		}
	}
}

// benchNexmark runs q, whose first source is a nexmark source named source of table, into
// sink (discard or files), as BenchmarkNexmark says.
func benchNexmark(b *testing.B, source string, table v1.NexmarkTable, q enginetest.NexmarkQuery, sink string) {
	// The garbage collector's settings of lockstep run and lockstep engine (internal/gctune),
	// as the Kafka benchmarks have them: the figures are the engine's as it runs.
	b.Cleanup(gctune.Apply(gctune.Defaults(gctune.OSEnv)))
	dir := b.TempDir()
	events := int64(b.N) * *nexmarkBatch
	w := q.Steps(querytest.Make("nexmark-"+q.Name, "default").NexmarkSource(source, v1.NexmarkSource{Table: table})).
		AvailableNow().Checkpoint(filepath.Join(dir, "ckpt"))
	// Every nexmark source (q4's auctions, q3's and q8's) reads the same stream.
	w = w.Edit(func(s *v1.StreamingQuerySpec) {
		enginetest.NexmarkGenerate(s, v1.NexmarkSource{EventsPerSecond: *nexmarkRate, AsFastAsPossible: true,
			MaxEventsPerTrigger: *nexmarkBatch, NumEvents: &events, StartTime: "2026-01-05T10:00:00Z"})
	})
	if sink == "files" {
		w = w.FilesSink(filepath.Join(dir, "out"), v1.FormatParquet)
	} else {
		w = w.ConsoleSink()
	}
	eng, err := engine.New(w.Obj(), enginetest.Registry(b), engine.WithStdout(io.Discard))
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	began := enginetest.CPU(false)
	sum, err := eng.Run(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	used := enginetest.CPU(false) - began
	b.StopTimer()
	if sum.Batches < b.N { // a stateful query may add one without data, for the watermark
		b.Fatalf("%d batches, want at least %d", sum.Batches, b.N)
	}
	b.ReportMetric(float64(events)/used.Seconds(), "events/cpu-s")
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(used.Nanoseconds())/float64(events), "cpu-ns/event")
	b.ReportMetric(float64(sum.NumOutputRows)/float64(b.N), "out-rows/batch")
}
