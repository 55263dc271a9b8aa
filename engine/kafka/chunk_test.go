package kafka_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestReadChunksIsReadInBoundedChunks reads a batch of 30,000 records over
// three partitions with ReadChunks: chunks of at most a few thousand rows,
// each partition's rows in order, and altogether the rows Read returns.
func TestReadChunksIsReadInBoundedChunks(t *testing.T) {
	brokers := testenv.Kafka(t)
	createTopic(t, brokers, "orders", 3, nil)
	for p := range int32(3) {
		produce(t, brokers, jsonRecords("orders", p, 0, 10_000)...)
	}
	s := newSource(t, kafkaSpec(brokers, "orders"), t.TempDir())
	p := plan(t, s, 0, nil, false)
	whole := ids(read(t, s, 0, nil, p.End))
	if len(whole) != 30_000 {
		t.Fatalf("Read returned %d rows, want 30000", len(whole))
	}
	var chunked []string
	chunks, most := 0, 0
	res, err := s.ReadChunks(testContext(t), engine.ReadRequest{Batch: 0, End: p.End}, func(rows []engine.Row) error {
		chunks++
		most = max(most, len(rows))
		chunked = append(chunked, ids(rows)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != nil {
		t.Errorf("ReadChunks returned %d rows besides the chunks", len(res.Rows))
	}
	if chunks < 3 || most > 16_384 {
		t.Errorf("%d chunks, the largest %d rows: want several of at most 16384", chunks, most)
	}
	next := map[string]int{} // per partition, the record expected next
	for _, id := range chunked {
		var part string
		var n int
		if _, err := fmt.Sscanf(id, "orders-%1s-%d", &part, &n); err != nil {
			t.Fatalf("id %q: %v", id, err)
		}
		if n != next[part] {
			t.Fatalf("partition %s: record %d came where %d was due", part, n, next[part])
		}
		next[part]++
	}
	slices.Sort(whole)
	slices.Sort(chunked)
	if !slices.Equal(whole, chunked) {
		t.Errorf("ReadChunks read %d rows, not those of Read (%d)", len(chunked), len(whole))
	}
}

// TestSinkChunkedBatchIsOneTransaction writes an exactly-once batch in three
// chunks: a read_committed consumer sees none of it before Commit and all of
// it once after; an aborted batch shows nothing, and its replay is written
// once; the replay of a committed batch is dropped.
func TestSinkChunkedBatchIsOneTransaction(t *testing.T) {
	brokers := testenv.Kafka(t)
	createTopic(t, brokers, "out", 2, nil)
	ctx := testContext(t)
	began := time.Now() // a batch's time, the same on a replay, is where the sink looks for its marker
	s := newSink(t, sinkSpec(brokers, "out", true), "q1", enginetest.SinkColumns, nil)
	chunk := func(batch, from int) []engine.Row {
		var rows []engine.Row
		for i := from; i < from+1000; i++ {
			rows = append(rows, engine.Row{fmt.Sprintf("b%d-%d", batch, i), int64(i)})
		}
		return rows
	}
	write := func(batch int64, chunks int, commit bool) {
		t.Helper()
		w, err := s.Open(ctx, &engine.Batch{QueryID: "q1", ID: batch, Time: began.Add(time.Duration(batch) * time.Second), Columns: enginetest.SinkColumns})
		if err != nil {
			t.Fatal(err)
		}
		for c := range chunks {
			if err := w.Write(ctx, chunk(int(batch), c*1000)); err != nil {
				t.Fatal(err)
			}
		}
		if got := consume(t, brokers, "out"); len(got) != 0 && batch == 0 {
			t.Fatalf("read_committed saw %d records of an open transaction", len(got))
		}
		if !commit {
			w.Abort(ctx)
			return
		}
		if err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	write(0, 3, false)
	if got := consume(t, brokers, "out"); len(got) != 0 {
		t.Fatalf("read_committed saw %d records of an aborted batch", len(got))
	}
	write(0, 3, true)
	write(1, 2, true)
	write(1, 2, true) // a replay of a committed batch
	got := consume(t, brokers, "out")
	if len(got) != 5000 {
		t.Fatalf("consumed %d records, want 5000: batch 0's 3000 and batch 1's 2000 once", len(got))
	}
	seen := map[string]bool{}
	for _, r := range got {
		if seen[r.value] {
			t.Fatalf("record %s twice", r.value)
		}
		seen[r.value] = true
	}
}
