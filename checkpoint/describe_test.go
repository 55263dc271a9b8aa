package checkpoint_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

func TestShape(t *testing.T) {
	c := claim(t, newDir(t))
	if _, _, err := c.CommittedShape(t.Context()); !errors.Is(err, checkpoint.ErrNoCommit) || !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("CommittedShape of a new checkpoint error = %v, want ErrNoCommit wrapping ErrNotFound", err)
	}
	for _, b := range []int64{0, 5} {
		if err := c.RecordShape(t.Context(), b, []byte(`{"from":`+string(rune('0'+b))+`}`)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ batch, from int64 }{{0, 0}, {4, 0}, {5, 5}, {1000, 5}} {
		from, shape, err := c.Shape(t.Context(), tc.batch)
		if err != nil || from != tc.from || string(shape) != `{"from":`+string(rune('0'+tc.from))+`}` {
			t.Errorf("Shape(%d) = %d, %s, %v; want shape %d", tc.batch, from, shape, err, tc.from)
		}
	}
	runBatches(t, c, 0, 5)
	if from, _, err := c.CommittedShape(t.Context()); err != nil || from != 0 {
		t.Errorf("CommittedShape with batches 0 to 4 committed = %d, %v; want the shape from 0", from, err)
	}
	runBatches(t, c, 5, 6)
	if from, _, err := c.CommittedShape(t.Context()); err != nil || from != 5 {
		t.Errorf("CommittedShape with batch 5 committed = %d, %v; want the shape from 5", from, err)
	}
}

// realCheckpoint builds what an engine leaves behind: 12 batches, retention
// of 5, a shape change at batch 8, state files for one operator, and batch 12
// planned but not committed.
func realCheckpoint(t *testing.T) (*checkpoint.Dir, *checkpoint.Checkpoint) {
	t.Helper()
	d := newDir(t)
	c := claim(t, d)
	c.RecordShape(t.Context(), 0, []byte(`{"sources":["orders"]}`))
	for b := int64(0); b < 12; b++ {
		if b == 8 {
			c.RecordShape(t.Context(), 8, []byte(`{"sources":["orders","refunds"]}`))
		}
		runBatches(t, c, b, b+1)
		for part := range 2 {
			f := checkpoint.StateFile{Operator: "revenue", Partition: part, Version: b + 1, Kind: checkpoint.StateDelta}
			if err := d.Create(t.Context(), f.Key(), []byte("0123456789")); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(t, d, checkpoint.StateMetadataKey("revenue"), `{"kind":"aggregate"}`)
	if _, err := c.Purge(t.Context(), 5); err != nil {
		t.Fatal(err)
	}
	if err := c.AddOffsets(t.Context(), offsets(12)); err != nil {
		t.Fatal(err)
	}
	return d, c
}

func TestDescribe(t *testing.T) {
	d, c := realCheckpoint(t)
	got, err := checkpoint.Describe(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	i := func(n int64) *int64 { return &n }
	planned, committed := offsets(12), commit(11)
	want := checkpoint.Description{
		Location:        d.Location(),
		Metadata:        c.Metadata(),
		PlannedBatch:    i(12),
		CommittedBatch:  i(11),
		Replay:          true,
		NextBatch:       12,
		OldestBatch:     i(7),
		RetainedBatches: 6,
		Planned:         &planned,
		Committed:       &committed,
		State: []checkpoint.OperatorState{{
			Operator: "revenue", Partitions: 2, MinVersion: 1, MaxVersion: 12, Deltas: 24,
			Files: 25, Bytes: 24*10 + int64(len(`{"kind":"aggregate"}`)), Metadata: json.RawMessage(`{"kind":"aggregate"}`),
		}},
		Shape: &checkpoint.ShapeEntry{Batch: 8, Key: "shape/00000000000000000008", Bytes: 32, Shape: json.RawMessage(`{"sources":["orders","refunds"]}`)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Describe mismatch (-want +got):\n%s", diff)
	}
}

func TestDescribeNewCheckpoint(t *testing.T) {
	d := newDir(t)
	c := claim(t, d)
	got, err := c.Describe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := checkpoint.Description{Location: d.Location(), Metadata: c.Metadata(), State: []checkpoint.OperatorState{}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Describe mismatch (-want +got):\n%s", diff)
	}
	if _, err := checkpoint.Describe(t.Context(), newDir(t)); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Describe of an empty location error = %v, want ErrNotFound", err)
	}
}

func TestBatches(t *testing.T) {
	_, c := realCheckpoint(t)
	got, err := c.Batches(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var want []checkpoint.Batch
	for b := int64(7); b <= 12; b++ {
		o := offsets(b)
		batch := checkpoint.Batch{ID: b, Offsets: &o}
		if b < 12 {
			cm := commit(b)
			batch.Commit = &cm
		}
		want = append(want, batch)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Batches mismatch (-want +got):\n%s", diff)
	}
}
