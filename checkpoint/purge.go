package checkpoint

import (
	"context"
	"fmt"
	"strings"
)

// DefaultMinBatchesToRetain is Spark's default, and ours, for how many batches
// of every log a Purge keeps.
const DefaultMinBatchesToRetain = 100

// A PurgeFunc deletes files that only batches before oldest need: oldest is
// the oldest batch the logs still hold after a Purge. PurgeState is one.
type PurgeFunc func(ctx context.Context, s Store, oldest int64) error

// Purge deletes the offsets and commit entries of batches older than the
// newest minBatchesToRetain batches, and the shape entries that stopped being
// in force before the oldest retained batch. Then it calls each of more with
// that oldest batch, for sources' and state files. It returns the oldest
// retained batch (0 when nothing was old enough).
//
// It keeps at least the newest planned and the newest committed batch, so a
// restart works whatever happens to a Purge. It reads the head first and
// deletes nothing when the logs are damaged. Within each log it deletes the
// oldest entry first, so an interrupted Purge leaves every log a contiguous
// run of the newest entries.
func (c *Checkpoint) Purge(ctx context.Context, minBatchesToRetain int, more ...PurgeFunc) (oldest int64, err error) {
	if c.readOnly {
		return 0, fmt.Errorf("purge %s: %w", c.Location(), ErrReadOnly)
	}
	if minBatchesToRetain < 1 {
		return 0, fmt.Errorf("purge %s: minBatchesToRetain is %d, want at least 1", c.Location(), minBatchesToRetain)
	}
	h, err := c.Head(ctx)
	if err != nil {
		return 0, fmt.Errorf("purge: %w", err)
	}
	if h.Committed == nil {
		return 0, nil
	}
	oldest = min(h.Planned.BatchID, h.Committed.BatchID) - int64(minBatchesToRetain) + 1
	if oldest <= 0 {
		return 0, nil
	}
	for _, log := range []struct {
		dir string
		key func(int64) string
	}{{OffsetsDir, OffsetsKey}, {CommitsDir, CommitKey}} {
		batches, err := c.logBatches(ctx, log.dir)
		if err != nil {
			return 0, fmt.Errorf("purge: %w", err)
		}
		for _, b := range batches {
			if b >= oldest {
				break
			}
			if err := c.store.Delete(ctx, log.key(b)); err != nil {
				return 0, fmt.Errorf("purge %s: %w", c.name(log.key(b)), err)
			}
		}
	}
	// Keep the shape in force at the oldest retained batch, and every later one.
	shapes, err := c.logBatches(ctx, ShapeDir)
	if err != nil {
		return 0, fmt.Errorf("purge: %w", err)
	}
	inForce := -1
	for i, b := range shapes {
		if b <= oldest {
			inForce = i
		}
	}
	for _, b := range shapes[:max(inForce, 0)] {
		if err := c.store.Delete(ctx, ShapeKey(b)); err != nil {
			return 0, fmt.Errorf("purge %s: %w", c.name(ShapeKey(b)), err)
		}
	}
	for _, f := range more {
		if err := f(ctx, c.store, oldest); err != nil {
			return 0, fmt.Errorf("purge %s: %w", c.Location(), err)
		}
	}
	return oldest, nil
}

// PurgeState is a PurgeFunc for the state files under state/. It follows
// the convention that version v of a partition is its state after batch v-1,
// so re-running batch b needs version b: the newest snapshot at or before b
// and the deltas after that snapshot. For every operator and partition it
// deletes, oldest first, the files older than the newest snapshot at or
// before version oldest; a partition with no such snapshot keeps everything.
// Operators' _metadata files are never deleted.
func PurgeState(ctx context.Context, s Store, oldest int64) error {
	keys, err := ListKeys(ctx, s, StateDir)
	if err != nil {
		return fmt.Errorf("list %s: %w", StateDir, err)
	}
	type partition struct {
		op   string
		part int
	}
	files := make(map[partition][]StateFile)
	var order []partition
	for _, k := range keys {
		f, ok := ParseStateFile(k)
		if !ok {
			continue
		}
		p := partition{f.Operator, f.Partition}
		if _, seen := files[p]; !seen {
			order = append(order, p)
		}
		files[p] = append(files[p], f)
	}
	for _, p := range order {
		fs := files[p] // in key order: by version, then delta before snapshot
		keep := int64(-1)
		for _, f := range fs {
			if f.Kind == StateSnapshot && f.Version <= oldest {
				keep = f.Version
			}
		}
		for _, f := range fs {
			if f.Version >= keep {
				break
			}
			if err := s.Delete(ctx, f.Key()); err != nil {
				return fmt.Errorf("delete %s: %w", f.Key(), err)
			}
		}
	}
	return nil
}

// PurgeSource returns a PurgeFunc that deletes a source's private files
// whose name, after sources/<source>/, is a batch name (BatchName) older than
// oldest. A source that keeps a per-batch log there uses it.
func PurgeSource(source string) PurgeFunc {
	return func(ctx context.Context, s Store, oldest int64) error {
		dir := SourceKey(source, "")
		keys, err := ListKeys(ctx, s, dir)
		if err != nil {
			return fmt.Errorf("list %s: %w", dir, err)
		}
		for _, k := range keys {
			name := strings.TrimPrefix(k, dir)
			b, ok := ParseBatchName(name)
			if !ok {
				continue
			}
			if b >= oldest {
				break
			}
			if err := s.Delete(ctx, k); err != nil {
				return fmt.Errorf("delete %s: %w", k, err)
			}
		}
		return nil
	}
}
