package spark_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
)

// Spark has no Nexmark source: a Nexmark query runs on both runtimes over the same events,
// written once as Parquet by the built-in engine's nexmark source, each of its nexmark sources
// swapped for a files source of its table's files.

// nexmarkEvents is how many events TestDifferentialNexmark runs each query over, in files of
// nexmarkFileEvents events, one a batch.
const (
	nexmarkEvents     = 40_000
	nexmarkFileEvents = 5_000
)

// TestDifferentialNexmark runs every Nexmark example (examples/queries/nexmark-*.yaml: q3, q4, q5,
// q8, q11) and q4's shape (enginetest.NexmarkQueries) on both runtimes over the same events:
// nexmarkEvents of them, generated as each query's nexmark sources say, in files of
// nexmarkFileEvents. The outputs must be equal multisets.
func TestDifferentialNexmark(t *testing.T) {
	t.Parallel()
	sparktest.Runner(t) // before any event is generated: without Spark the test fails here, naming the install command
	ctx := context.Background()
	examples, err := filepath.Glob(filepath.Join("..", "..", "examples", "queries", "nexmark-*.yaml"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("no nexmark examples (%v)", err)
	}
	queries := map[string]*v1.StreamingQuery{}
	for _, f := range examples {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		q, err := v1.ParseQuery(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		queries[strings.TrimSuffix(filepath.Base(f), ".yaml")] = q
	}
	for _, q := range enginetest.NexmarkQueries {
		if q.Name == "q4-shape" {
			queries["q4-shape"] = q.Steps(qt.Make("nexmark-q4-shape", "default").NexmarkSource("bids", v1.NexmarkSource{Table: v1.NexmarkBid})).
				Edit(func(s *v1.StreamingQuerySpec) {
					// 1,000 events a second: the events span 40 s, and the watermark closes 10 s windows.
					enginetest.NexmarkGenerate(s, v1.NexmarkSource{EventsPerSecond: 1_000, StartTime: "2026-01-05T10:00:00Z"})
				}).Obj()
		}
	}
	for name, q := range queries {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			parts := map[string][]string{} // by source
			for _, s := range q.Spec.Sources {
				if s.Nexmark == nil {
					continue
				}
				gen := *s.Nexmark.DeepCopy()
				gen.AsFastAsPossible, gen.MaxEventsPerTrigger, gen.NumEvents = true, nexmarkFileEvents, new(int64(nexmarkEvents))
				parts[s.Name] = writeNexmark(t, ctx, filepath.Join(dir, "gen", s.Name), gen)
			}
			o := theOracle(t) // the JVM the package's tests share
			onSpark := func(obj *v1.StreamingQuery) {
				if res := o.run(t, &obj.Spec, obj.Spec.Checkpoint.Location); !res.Ran {
					t.Fatalf("run on spark (shared JVM): %s %s", res.ErrorClass, res.Message)
				}
			}
			compareRuntimesWith(t, ctx, onSpark, name, func(rt string) *v1.StreamingQuery {
				obj := q.DeepCopy()
				obj.Spec.Sink = v1.Sink{Files: &v1.FilesSink{Path: filepath.Join(dir, rt, "out"), Format: v1.FormatParquet}}
				obj.Spec.Checkpoint.Location = filepath.Join(dir, rt, "ck")
				obj.Spec.Trigger = v1.Trigger{AvailableNow: true}
				// Two state partitions, as the differential corpus has (diffCases), not the
				// examples' 8: a quarter of the tasks and state stores a stateful batch.
				obj.Spec.StateStore.Partitions = 2
				nexmarkAsFiles(t, &obj.Spec, filepath.Join(dir, rt, "in"), parts)
				return obj
			})
		})
	}
}

// writeNexmark writes the rows of gen's table, gen's numEvents events of them, into dir as
// Parquet files of maxEventsPerTrigger events each (the nexmark source into a files sink on
// the built-in engine, a file a batch), each modified a second after the one before so that
// both runtimes take them in the same order; it returns their paths, oldest first.
func writeNexmark(tb testing.TB, ctx context.Context, dir string, gen v1.NexmarkSource) []string {
	tb.Helper()
	obj := qt.Make("nexmark-"+string(gen.Table), "default").NexmarkSource("events", gen).
		FilesSink(dir, v1.FormatParquet).AvailableNow().Checkpoint(dir + "-ck").Obj()
	q, err := engine.New(obj, enginetest.Registry(tb))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := q.Run(ctx); err != nil {
		tb.Fatalf("write the nexmark %s table: %v", gen.Table, err)
	}
	parts, err := filepath.Glob(filepath.Join(dir, "*.parquet")) // in batch order: names carry the batch
	if err != nil || len(parts) == 0 {
		tb.Fatalf("no Parquet files of the %s table in %s (%v)", gen.Table, dir, err)
	}
	base := time.Now().Add(-time.Hour)
	for i, p := range parts {
		mt := base.Add(time.Duration(i) * time.Second)
		if err := os.Chtimes(p, mt, mt); err != nil {
			tb.Fatal(err)
		}
	}
	return parts
}

// nexmarkAsFiles replaces each nexmark source of s with a files source of its table's columns
// reading one file a batch from in/<source>, into which it hard-links the source's Parquet files
// (parts[source], from writeNexmark).
func nexmarkAsFiles(tb testing.TB, s *v1.StreamingQuerySpec, in string, parts map[string][]string) {
	tb.Helper()
	for i, src := range s.Sources {
		if src.Nexmark == nil {
			continue
		}
		if len(parts[src.Name]) == 0 {
			tb.Fatalf("no Parquet files for the nexmark source %s", src.Name)
		}
		folder := filepath.Join(in, src.Name)
		if err := os.MkdirAll(folder, 0o755); err != nil {
			tb.Fatal(err)
		}
		for _, p := range parts[src.Name] {
			if err := os.Link(p, filepath.Join(folder, filepath.Base(p))); err != nil {
				tb.Fatal(err)
			}
		}
		s.Sources[i] = v1.Source{Name: src.Name,
			Files:  &v1.FilesSource{Path: folder, Format: v1.FormatParquet, MaxFilesPerTrigger: new(int32(1))},
			Schema: &v1.Schema{Columns: v1.NexmarkColumns(src.Nexmark.Table)}}
	}
}
