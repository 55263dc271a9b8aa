package engine_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/source"
)

// TestStreamedBatchIsTheWholeRead runs a nexmark → files query whose steps keep no row, so
// that each batch streams from the generator through the steps into the sink's open file a
// chunk at a time (engine.ChunkReader, engine.ChunkWriter), and checks that what the sink
// committed is exactly the source's rows of the logged ranges, read whole, through the same
// filter: no row lost, repeated or changed at a chunk's edge.
func TestStreamedBatchIsTheWholeRead(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	events := int64(50_000)
	gen := v1.NexmarkSource{Table: v1.NexmarkBid, EventsPerSecond: 10_000, AsFastAsPossible: true,
		MaxEventsPerTrigger: 20_000, NumEvents: &events, StartTime: "2026-01-05T10:00:00Z"}
	q := querytest.Make("streamed", "test").NexmarkSource("bids", gen).Filter("price % 2 == 0").
		FilesSink(filepath.Join(dir, "out"), v1.FormatParquet).AvailableNow().Checkpoint(filepath.Join(dir, "ckpt")).Obj()
	eng, err := engine.New(q, enginetest.Registry(t))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := eng.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Batches != 3 {
		t.Fatalf("%d batches, want 3 of at most 20,000 events", sum.Batches)
	}
	src, err := source.NewNexmark(ctx, &q.Spec.Sources[0], engine.SourceEnv{Name: "bids"})
	if err != nil {
		t.Fatal(err)
	}
	ckpt := enginetest.LoadCheckpoint(t, filepath.Join(dir, "ckpt"))
	var want []engine.Row
	var start engine.Offset
	for b := range int64(3) {
		o, err := ckpt.Offsets(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		end := engine.Offset(o.Sources[0].Offset)
		res, err := src.Read(ctx, engine.ReadRequest{Batch: b, Start: start, End: end})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Rows {
			if r[2].(int64)%2 == 0 { // price
				want = append(want, r)
			}
		}
		start = end
	}
	enginetest.SortRows(want)
	out, err := s3.OpenFolder(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	got := enginetest.OutputRows(t, out)
	if len(got) != len(want) || len(want) < 10_000 {
		t.Fatalf("the sink committed %d rows, want the %d of the whole reads", len(got), len(want))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("streamed output differs from the whole reads (-whole +streamed):\n%s", diff)
	}
}
