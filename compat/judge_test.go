package compat_test

import (
	"errors"
	"testing"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/compat"
)

// TestRecordShapeReadShape: the shape RecordShape records for a batch is what ReadShape
// reads once the batch committed, with the batch it is in force from; before any commit
// ReadShape says so.
func TestRecordShapeReadShape(t *testing.T) {
	ctx := t.Context()
	c := claimed(t)
	want, err := compat.ShapeOf(revenue().Spec())
	if err != nil {
		t.Fatal(err)
	}
	if err := compat.RecordShape(ctx, c, 0, want); err != nil {
		t.Fatal(err)
	}
	if _, _, err := compat.ReadShape(ctx, c); !errors.Is(err, checkpoint.ErrNoCommit) {
		t.Errorf("ReadShape before a commit: error = %v, want ErrNoCommit", err)
	}
	if err := c.AddOffsets(ctx, checkpoint.Offsets{BatchID: 0}); err != nil {
		t.Fatal(err)
	}
	if err := c.AddCommit(ctx, checkpoint.Commit{BatchID: 0}); err != nil {
		t.Fatal(err)
	}
	got, from, err := compat.ReadShape(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(want) || from != 0 {
		t.Errorf("ReadShape = %+v from batch %d, want %+v from batch 0", got, from, want)
	}
}

// claimed returns a new checkpoint in a folder of its own, claimed for shop/orders.
func claimed(t *testing.T) *checkpoint.Checkpoint {
	t.Helper()
	dir, err := checkpoint.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := checkpoint.Claim(t.Context(), dir, checkpoint.Owner{Namespace: "shop", Name: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
