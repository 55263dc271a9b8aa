package kafka_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestQueryReportsPartitionLag: each batch's progress carries, per partition, the records
// left beyond the batch's end and the age, at the batch's timestamp, of the newest record read
// up to it (the records' Kafka timestamps); the source's lagMs is the largest of those.
func TestQueryReportsPartitionLag(t *testing.T) {
	brokers := testenv.Kafka(t)
	createTopic(t, brokers, "lagging", 2, nil)
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sizes := map[int32]int{0: 40, 1: 10}
	for p, n := range sizes {
		recs, _ := orders("lagging", p, 0, n)
		for i, r := range recs {
			r.Timestamp = base.Add(time.Duration(i) * time.Second)
		}
		produce(t, brokers, recs...)
	}
	obj := kafkaQuery(brokers, "lagging", 20).FilesSink(t.TempDir(), v1.FormatJSON).AvailableNow().Obj()
	sum, rec := runQuery(t, obj, t.TempDir())
	if sum.Batches < 3 {
		t.Fatalf("%d batches, want at least 3 of at most 20 of 50 records", sum.Batches)
	}
	for _, p := range rec.Batches() {
		src := p.Sources[0]
		var end map[string]map[int32]int64
		if err := json.Unmarshal(src.EndOffset, &end); err != nil {
			t.Fatal(err)
		}
		var want []engine.PartitionLag
		var wantMax *int64
		for _, part := range []int32{0, 1} {
			e := end["lagging"][part]
			pl := engine.PartitionLag{Topic: "lagging", Partition: part, Lag: int64(sizes[part]) - e}
			ms := int64(0)
			if pl.Lag > 0 {
				ms = p.Timestamp.Sub(base.Add(time.Duration(e-1) * time.Second)).Milliseconds()
			}
			pl.LagMs = &ms
			if wantMax == nil || ms > *wantMax {
				wantMax = &ms
			}
			want = append(want, pl)
		}
		if diff := cmp.Diff(want, src.Partitions); diff != "" {
			t.Errorf("batch %d (end %s) partitions (-want +got):\n%s", p.Batch, src.EndOffset, diff)
		}
		if src.LagMs == nil || *src.LagMs != *wantMax {
			t.Errorf("batch %d lagMs %v, want %d", p.Batch, src.LagMs, *wantMax)
		}
	}
}
