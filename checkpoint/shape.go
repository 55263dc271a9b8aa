package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
)

// The shape log (shape/<N>) records the query's shape in force from batch N on. An entry
// becomes part of the query's history only when batch N commits: until then it was
// recorded by a start that has run no batch under it, and the next start may replace it
// (a change applied twice before the next batch). A change is judged against the shape
// the committed batches ran under (CommittedShape), never against such an entry.

// Shape returns the shape in force at batch: the newest shape entry at or
// before it, and the batch from which it is in force. With no such entry the
// error wraps ErrNotFound.
func (c *Checkpoint) Shape(ctx context.Context, batch int64) (from int64, shape []byte, err error) {
	batches, err := c.logBatches(ctx, ShapeDir)
	if err != nil {
		return 0, nil, err
	}
	for i := len(batches) - 1; i >= 0; i-- {
		if batches[i] <= batch {
			data, err := c.get(ctx, ShapeKey(batches[i]))
			if err != nil {
				return 0, nil, err
			}
			return batches[i], data, nil
		}
	}
	return 0, nil, fmt.Errorf("no shape in force at batch %d in %s: %w", batch, c.Location(), ErrNotFound)
}

// ShapeEntry returns the shape entry recorded for exactly batch. With none the error wraps
// ErrNotFound.
func (c *Checkpoint) ShapeEntry(ctx context.Context, batch int64) ([]byte, error) {
	return c.get(ctx, ShapeKey(batch))
}

// CommittedShape returns the shape the committed batches ran under: the shape in force
// at the newest committed batch, and the batch from which it is in force. An entry
// recorded for a batch that has not committed is not it. When no batch has committed the
// error wraps ErrNoCommit; when batches committed but none under a recorded shape (a
// checkpoint written before Lockstep recorded shapes), it wraps ErrNotFound.
//
// Only the newest entry can be one no batch ran under (a start records its shape for the
// batch after the newest commit), so it costs a listing of shape/ and two GETs: the newest
// entry's commit and the entry. When that commit is absent (the batch has not committed, or
// its commit was purged long after), it reads the head.
func (c *Checkpoint) CommittedShape(ctx context.Context) (from int64, shape []byte, err error) {
	batches, err := c.logBatches(ctx, ShapeDir)
	if err != nil {
		return 0, nil, err
	}
	if n := len(batches); n > 0 {
		_, err := c.store.Get(ctx, CommitKey(batches[n-1]))
		switch {
		case err == nil:
			data, err := c.get(ctx, ShapeKey(batches[n-1]))
			return batches[n-1], data, err
		case !errors.Is(err, ErrNotFound):
			return 0, nil, fmt.Errorf("read %s: %w", c.name(CommitKey(batches[n-1])), err)
		}
	}
	head, err := c.Head(ctx)
	if err != nil {
		return 0, nil, err
	}
	if head.Committed == nil {
		return 0, nil, fmt.Errorf("no batch committed in %s: %w", c.Location(), ErrNoCommit)
	}
	return c.Shape(ctx, head.Committed.BatchID)
}

// ErrNoCommit means the checkpoint has committed no batch, so no shape is in force.
// errors.Is(err, ErrNotFound) holds for it too.
var ErrNoCommit = fmt.Errorf("no committed batch: %w", ErrNotFound)

// RecordShape makes shape (the compat package's JSON) the query's shape in force from
// batch on, batch being the first batch this writer runs, one that has not committed:
//   - with no entry for batch it creates one; losing that race is an error wrapping
//     ErrFenced;
//   - an entry with the same bytes is kept;
//   - an entry with other bytes was recorded by a start that ran no batch under it (this
//     query's own earlier start, whose spec has changed since): it is replaced;
//   - when batch has committed meanwhile, another writer ran it: ErrFenced.
//
// A replaced entry is still fenced against a second writer: until batch commits, AddCommit
// re-reads the entry and refuses with ErrFenced if another writer replaced it since, and a
// writer that loses batch's offsets or commit entry puts back what the entry held before
// it wrote (or removes the entry it created), unless another writer replaced it again. So
// the entry of a committed batch names the shape of the writer that committed it.
func (c *Checkpoint) RecordShape(ctx context.Context, batch int64, shape []byte) error {
	k := ShapeKey(batch)
	if err := c.canWrite("record", k, batch); err != nil {
		return err
	}
	prev, err := c.store.Get(ctx, k)
	if errors.Is(err, ErrNotFound) {
		cerr := c.store.Create(ctx, k, shape)
		if cerr == nil {
			c.shape.set(batch, shape, nil, true)
			return nil
		}
		if !errors.Is(cerr, ErrExists) {
			return fmt.Errorf("record %s: %w", c.name(k), cerr)
		}
		// Another writer created it since we looked: the same shape is no conflict (two
		// engines of one spec are fenced at the batch's offsets and commit); another is.
		if prev, err = c.store.Get(ctx, k); err == nil && !bytes.Equal(prev, shape) {
			return fmt.Errorf("record %s: %w", c.name(k), ErrFenced)
		}
	}
	switch {
	case err != nil:
		return fmt.Errorf("record %s: %w", c.name(k), err)
	case bytes.Equal(prev, shape):
		c.shape.set(batch, shape, prev, false)
		return nil
	}
	if err := c.uncommitted(ctx, batch); err != nil {
		return fmt.Errorf("record %s: %w", c.name(k), err)
	}
	if err := c.store.Put(ctx, k, shape); err != nil {
		return fmt.Errorf("record %s: %w", c.name(k), err)
	}
	c.shape.set(batch, shape, prev, true)
	// A writer that committed batch between the check above and the Put ran under prev.
	if err := c.uncommitted(ctx, batch); err != nil {
		c.shape.lost(ctx, c, batch)
		return fmt.Errorf("record %s: %w", c.name(k), err)
	}
	return nil
}

// uncommitted returns nil when batch has not committed, and an error wrapping ErrFenced
// when it has: another writer ran it.
func (c *Checkpoint) uncommitted(ctx context.Context, batch int64) error {
	_, err := c.store.Get(ctx, CommitKey(batch))
	switch {
	case errors.Is(err, ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("batch %d committed since this writer read the checkpoint: %w", batch, ErrFenced)
}

// shapeState is the shape entry a writing Checkpoint recorded with RecordShape for a batch
// that has not committed yet.
type shapeState struct {
	mu    sync.Mutex
	batch int64
	data  []byte // nil: none pending
	prev  []byte // what the entry held before; nil when this writer created it
	wrote bool   // whether this writer wrote the entry (else it found data there)
}

func (s *shapeState) set(batch int64, data, prev []byte, wrote bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batch, s.data, s.prev, s.wrote = batch, data, prev, wrote
}

func (s *shapeState) pending(batch int64) (data, prev []byte, wrote, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data == nil || s.batch != batch {
		return nil, nil, false, false
	}
	return s.data, s.prev, s.wrote, true
}

// check is called before batch's commit: the entry this writer recorded for batch must
// still hold its shape.
func (s *shapeState) check(ctx context.Context, c *Checkpoint, batch int64) error {
	data, _, _, ok := s.pending(batch)
	if !ok {
		return nil
	}
	k := ShapeKey(batch)
	got, err := c.store.Get(ctx, k)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("check %s before the commit of batch %d: %w", c.name(k), batch, err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("check %s before the commit of batch %d: another writer recorded its shape: %w", c.name(k), batch, ErrFenced)
	}
	return nil
}

// ran forgets the pending entry once its batch committed: it is history now.
func (s *shapeState) ran(batch int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data != nil && s.batch == batch {
		s.data, s.prev = nil, nil
	}
}

// lost undoes this writer's entry for batch after another writer won batch: it puts back
// what the entry held before, or removes it, unless another writer replaced it since. It
// is best effort: the writer stops either way.
func (s *shapeState) lost(ctx context.Context, c *Checkpoint, batch int64) {
	data, prev, wrote, ok := s.pending(batch)
	if !ok {
		return
	}
	s.ran(batch)
	if !wrote {
		return
	}
	k := ShapeKey(batch)
	if got, err := c.store.Get(ctx, k); err != nil || !bytes.Equal(got, data) {
		return
	}
	if prev == nil {
		_ = c.store.Delete(ctx, k)
		return
	}
	_ = c.store.Put(ctx, k, prev)
}
