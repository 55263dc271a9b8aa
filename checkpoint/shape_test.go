package checkpoint_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

var (
	shapeA = []byte(`{"trigger":"1m"}`)
	shapeB = []byte(`{"trigger":"30s"}`)
	shapeC = []byte(`{"trigger":"20s"}`)
)

// shapeAt returns the shape entry recorded for exactly batch, or "" for none.
func shapeAt(t *testing.T, s checkpoint.Store, batch int64) string {
	t.Helper()
	data, err := s.Get(t.Context(), checkpoint.ShapeKey(batch))
	if errors.Is(err, checkpoint.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func committedShape(t *testing.T, c *checkpoint.Checkpoint) (int64, string) {
	t.Helper()
	from, data, err := c.CommittedShape(t.Context())
	if err != nil {
		t.Fatalf("CommittedShape error = %v", err)
	}
	return from, string(data)
}

// A change applied twice before the next batch: each start replaces the shape the start
// before it recorded, since no batch ran under it; the committed batches' shape is what a
// change is judged against throughout.
func TestRecordShapeReplacesAShapeNoBatchRanUnder(t *testing.T) {
	d := newDir(t)
	first := claim(t, d)
	if err := first.RecordShape(t.Context(), 0, shapeA); err != nil {
		t.Fatal(err)
	}
	runBatches(t, first, 0, 1)

	for i, shape := range [][]byte{shapeB, shapeC, shapeC} {
		c := claim(t, d) // a restart with a changed spec; the last one unchanged
		if err := c.RecordShape(t.Context(), 1, shape); err != nil {
			t.Fatalf("start %d: RecordShape(1) error = %v, want the unrun shape replaced", i+1, err)
		}
		if got := shapeAt(t, d, 1); got != string(shape) {
			t.Errorf("start %d: shape/1 = %s, want %s", i+1, got, shape)
		}
		if from, got := committedShape(t, c); from != 0 || got != string(shapeA) {
			t.Errorf("start %d: CommittedShape = %d %s, want batch 0's %s", i+1, from, got, shapeA)
		}
	}

	c := claim(t, d)
	if err := c.RecordShape(t.Context(), 1, shapeC); err != nil {
		t.Fatal(err)
	}
	runBatches(t, c, 1, 2)
	if from, got := committedShape(t, c); from != 1 || got != string(shapeC) {
		t.Errorf("after batch 1 committed: CommittedShape = %d %s, want 1 %s", from, got, shapeC)
	}
	// The shape of a batch that ran is history: it is never replaced.
	late := claim(t, d)
	if err := late.RecordShape(t.Context(), 1, shapeB); !errors.Is(err, checkpoint.ErrFenced) {
		t.Errorf("RecordShape over committed batch 1's shape error = %v, want ErrFenced", err)
	}
	if got := shapeAt(t, d, 1); got != string(shapeC) {
		t.Errorf("shape/1 = %s after a refused replacement, want %s", got, shapeC)
	}
}

// Replacing a shape stays fenced: of two writers that both believe they own the query, the
// shape of batch 1 is that of the one that commits it.
func TestRecordShapeFencesASecondWriter(t *testing.T) {
	setup := func(t *testing.T) (checkpoint.Store, *checkpoint.Checkpoint, *checkpoint.Checkpoint) {
		d := newDir(t)
		c := claim(t, d)
		if err := c.RecordShape(t.Context(), 0, shapeA); err != nil {
			t.Fatal(err)
		}
		runBatches(t, c, 0, 1)
		return d, claim(t, d), claim(t, d)
	}

	t.Run("the replacer commits", func(t *testing.T) {
		d, a, b := setup(t)
		must(t, a.RecordShape(t.Context(), 1, shapeB))
		must(t, b.RecordShape(t.Context(), 1, shapeC))
		runBatches(t, b, 1, 2)
		if err := a.AddOffsets(t.Context(), offsets(1)); !errors.Is(err, checkpoint.ErrFenced) {
			t.Errorf("a's AddOffsets(1) error = %v, want ErrFenced", err)
		}
		if got := shapeAt(t, d, 1); got != string(shapeC) {
			t.Errorf("shape/1 = %s, want the committing writer's %s", got, shapeC)
		}
	})
	t.Run("a replaced writer does not commit", func(t *testing.T) {
		d, a, b := setup(t)
		must(t, a.RecordShape(t.Context(), 1, shapeB))
		must(t, a.AddOffsets(t.Context(), offsets(1)))
		must(t, b.RecordShape(t.Context(), 1, shapeC))
		if err := a.AddCommit(t.Context(), commit(1)); !errors.Is(err, checkpoint.ErrFenced) {
			t.Errorf("a's AddCommit(1) after b replaced its shape: error = %v, want ErrFenced", err)
		}
		must(t, b.AddCommit(t.Context(), commit(1))) // b replays the batch a planned
		if from, got := committedShape(t, b); from != 1 || got != string(shapeC) {
			t.Errorf("CommittedShape = %d %s, want 1 %s", from, got, shapeC)
		}
		if got := shapeAt(t, d, 1); got != string(shapeC) {
			t.Errorf("shape/1 = %s, want %s", got, shapeC)
		}
	})
	t.Run("a writer that loses the batch takes its shape back", func(t *testing.T) {
		d, a, b := setup(t)
		must(t, a.RecordShape(t.Context(), 1, shapeB))
		runBatches(t, b, 1, 2) // b runs the committed shape, recording none
		if err := a.AddOffsets(t.Context(), offsets(1)); !errors.Is(err, checkpoint.ErrFenced) {
			t.Errorf("a's AddOffsets(1) error = %v, want ErrFenced", err)
		}
		if got := shapeAt(t, d, 1); got != "" {
			t.Errorf("shape/1 = %s after its writer lost batch 1, want none", got)
		}
		if from, got := committedShape(t, b); from != 0 || got != string(shapeA) {
			t.Errorf("CommittedShape = %d %s, want 0 %s", from, got, shapeA)
		}
	})
	t.Run("a writer that loses the batch puts back what it replaced", func(t *testing.T) {
		d, a, b := setup(t)
		must(t, b.RecordShape(t.Context(), 1, shapeC))
		must(t, a.RecordShape(t.Context(), 1, shapeB)) // replaces b's, which ran no batch yet
		must(t, b.AddOffsets(t.Context(), offsets(1)))
		if err := a.AddOffsets(t.Context(), offsets(1)); !errors.Is(err, checkpoint.ErrFenced) {
			t.Errorf("a's AddOffsets(1) error = %v, want ErrFenced", err)
		}
		if got := shapeAt(t, d, 1); got != string(shapeC) {
			t.Errorf("shape/1 = %s after a lost, want b's %s back", got, shapeC)
		}
		must(t, b.AddCommit(t.Context(), commit(1)))
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Two writers of one spec that start together both record its shape: the one that loses the
// create finds the same bytes and goes on (they are fenced at the batch's offsets); a writer
// of another spec that loses it is fenced.
func TestRecordShapeRaceForTheFirstEntry(t *testing.T) {
	for _, tc := range []struct {
		name  string
		other []byte // what the winner creates between the loser's look and its create
		fails bool
	}{{"same shape", shapeA, false}, {"another shape", shapeB, true}} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDir(t)
			racy := &createAfterLook{Store: d, key: checkpoint.ShapeKey(0), data: tc.other}
			loser := claim(t, racy)
			err := loser.RecordShape(t.Context(), 0, shapeA)
			if tc.fails != errors.Is(err, checkpoint.ErrFenced) || !tc.fails && err != nil {
				t.Errorf("RecordShape after losing the create = %v, want fenced %v", err, tc.fails)
			}
			if got := shapeAt(t, d, 0); got != string(tc.other) {
				t.Errorf("shape/0 = %s, want the winner's %s", got, tc.other)
			}
		})
	}
}

// createAfterLook is a Store on which another writer creates key the first time it is read
// and found missing: the interleaving of two writers racing for it.
type createAfterLook struct {
	checkpoint.Store
	key  string
	data []byte
	done bool
}

func (s *createAfterLook) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := s.Store.Get(ctx, key)
	if key == s.key && !s.done && errors.Is(err, checkpoint.ErrNotFound) {
		s.done = true
		if err := s.Store.Create(ctx, key, s.data); err != nil {
			return nil, err
		}
	}
	return b, err
}

// The newest entry's commit may be gone because retention purged it, not because its batch
// has not run: CommittedShape then asks the head, and the entry is still the committed one.
func TestCommittedShapeAfterItsCommitWasPurged(t *testing.T) {
	d := newDir(t)
	c := claim(t, d)
	must(t, c.RecordShape(t.Context(), 0, shapeA))
	runBatches(t, c, 0, 5)
	must(t, d.Delete(t.Context(), checkpoint.CommitKey(0)))
	if from, got := committedShape(t, claim(t, d)); from != 0 || got != string(shapeA) {
		t.Errorf("CommittedShape = %d %s, want 0 %s", from, got, shapeA)
	}
}
