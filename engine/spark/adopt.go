package spark

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/sparkckpt"
	"github.com/lockstep-dev/lockstep/engine"
)

// AdoptGuard judges a spec against a checkpoint that a Spark job Lockstep did not start
// wrote, before the query takes it over (docs/spark.md, Adopting a Spark checkpoint): the
// judgement of `lockstep plan --checkpoint`. An error refuses the query, and nothing is
// written to the checkpoint. Otherwise it returns the shape (compat's JSON of the spec's
// shape) that Lockstep's records take as the one Spark's committed batches ran under, so that
// later starts and plans judge against it as for any Lockstep query.
type AdoptGuard func(ctx context.Context, req AdoptRequest) (shape []byte, err error)

// AdoptRequest is the input of an AdoptGuard.
type AdoptRequest struct {
	// Checkpoint is what Spark's files record.
	Checkpoint *sparkckpt.Checkpoint
	Spec       *v1.StreamingQuerySpec
	// Getenv reads the environment (a postgres sink's connection string).
	Getenv func(string) string
}

// adoption is a Spark checkpoint this run takes over: Spark's batches are not in Lockstep's
// records yet.
type adoption struct {
	spark *sparkckpt.Checkpoint
	// shape is what the guard returned, recorded for Spark's newest committed batch.
	shape []byte
	// foreign is true when the location held no records: a Spark job Lockstep did not
	// start wrote it.
	foreign bool
}

// adopt decides, before anything is written, whether the location holds a Spark checkpoint
// this run takes over: Spark's files have a planned batch and Lockstep's records no commit
// (no records at all when a Spark job Lockstep did not start wrote it; none committed when a
// start stopped before it recorded Spark's batches). The guard judges the spec against it, as
// `lockstep plan --checkpoint` and the controller judge it. Without a guard, or for files that
// are not Spark's, a location with files and no records is refused. It returns nil when there
// is nothing to adopt.
func (q *Query) adopt(ctx context.Context, records, sparkStore checkpoint.Store) (*adoption, error) {
	foreign := !hasRecords(ctx, records)
	if foreign {
		if key, err := foreignKey(ctx, sparkStore); err != nil || key == "" {
			return nil, err
		} else if ok, err := sparkckpt.IsSparkCheckpoint(ctx, sparkStore); err != nil {
			return nil, fmt.Errorf("read %s: %w", sparkStore.Location(), err)
		} else if !ok {
			return nil, fmt.Errorf("%w: %s holds a checkpoint that neither the spark runtime nor Spark wrote (the built-in engine's: found %s); "+
				"the runtime cannot change on a checkpoint (rule runtime, docs/compatibility.md): run it with --runtime lockstep, or start fresh at a new checkpoint location",
				engine.ErrRefused, sparkStore.Location(), key)
		} else if q.opts.Adopt == nil {
			return nil, fmt.Errorf("%w: %s holds a Spark checkpoint that Lockstep did not write, and this run cannot judge it (no Options.Adopt)",
				engine.ErrRefused, sparkStore.Location())
		}
	} else if ck, err := checkpoint.Load(ctx, records); err != nil {
		return nil, err
	} else if head, err := ck.Head(ctx); err != nil || head.Committed != nil {
		return nil, err // Lockstep's records follow Spark's batches: an ordinary start
	}
	if _, planned, err := sparkckpt.Newest(ctx, sparkStore); err != nil || planned < 0 && !foreign || q.opts.Adopt == nil {
		return nil, err
	}
	c, err := sparkckpt.Read(ctx, sparkStore)
	if err != nil {
		return nil, fmt.Errorf("%w: read the Spark checkpoint: %w", engine.ErrRefused, err)
	}
	shape, err := q.opts.Adopt(ctx, AdoptRequest{Checkpoint: c, Spec: q.spec, Getenv: os.Getenv})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrRefused, err)
	}
	return &adoption{spark: c, shape: shape, foreign: foreign}, nil
}

// record writes Spark's newest committed batch into Lockstep's records, with the shape the
// guard returned: from then on the checkpoint is an ordinary spark query's. Of the batches
// Spark committed before, the records keep none (describe reads them from Spark's files).
func (a *adoption) record(ctx context.Context, ck *checkpoint.Checkpoint, spec *v1.StreamingQuerySpec, sparkStore checkpoint.Store) error {
	batches, err := sparkckpt.Batches(ctx, sparkStore)
	if err != nil {
		return err
	}
	var b *sparkckpt.Batch
	for i := len(batches) - 1; i >= 0; i-- {
		if batches[i].Commit != nil && batches[i].Offsets != nil {
			b = &batches[i]
			break
		}
	}
	if b == nil {
		return nil // the commit's offsets were purged: the records start with the next batch
	}
	if a.shape != nil {
		if err := ck.RecordShape(ctx, b.ID, a.shape); err != nil {
			return adoptErr(b.ID, err)
		}
	}
	off := checkpoint.Offsets{BatchID: b.ID, BatchWatermarkMs: b.Offsets.WatermarkMs, BatchTimestampMs: b.Offsets.TimestampMs,
		Conf: map[string]string{"runtime": string(v1.RuntimeSpark)}}
	for i, s := range b.Offsets.Sources {
		name := s.ID
		for j, src := range spec.Sources {
			// Offsets v1 match sources by position, v2 by the name the runtime gives Spark.
			if b.Offsets.Version == 1 && j == i || b.Offsets.Version >= 2 && SourceName(src.Name) == s.ID {
				name = src.Name
			}
		}
		o := s.Offset
		if len(o) == 0 {
			o = json.RawMessage("null")
		}
		off.Sources = append(off.Sources, checkpoint.SourceOffset{Source: name, Offset: o})
	}
	// A start that stopped between the two writes left the offsets entry: keep it.
	if _, err := ck.Offsets(ctx, b.ID); errors.Is(err, checkpoint.ErrNotFound) {
		if err := ck.AddOffsets(ctx, off); err != nil {
			return adoptErr(b.ID, err)
		}
	} else if err != nil {
		return adoptErr(b.ID, err)
	}
	cm := checkpoint.Commit{BatchID: b.ID, NextBatchWatermarkMs: b.Commit.NextBatchWatermarkMs,
		Progress: checkpoint.Progress{Timestamp: time.UnixMilli(b.Offsets.TimestampMs).UTC()}}
	if err := ck.AddCommit(ctx, cm); err != nil {
		return adoptErr(b.ID, err)
	}
	return nil
}

func adoptErr(batch int64, err error) error {
	if errors.Is(err, checkpoint.ErrFenced) {
		return fmt.Errorf("%w: record Spark's batch %d in %s: %w", engine.ErrOwnedByAnotherWriter, batch, RecordsDir, err)
	}
	return fmt.Errorf("record Spark's batch %d in %s: %w", batch, RecordsDir, err)
}

// hasRecords reports whether the records folder holds Lockstep's metadata. An unreadable one
// counts as present: reading it reports why.
func hasRecords(ctx context.Context, records checkpoint.Store) bool {
	_, err := records.Get(ctx, checkpoint.MetadataKey)
	return err == nil || !errors.Is(err, checkpoint.ErrNotFound)
}

// foreignKey returns a key of the location outside the records folder, "" for none.
func foreignKey(ctx context.Context, sparkStore checkpoint.Store) (string, error) {
	keys, err := checkpoint.ListKeys(ctx, sparkStore, "")
	if err != nil {
		return "", fmt.Errorf("list %s: %w", sparkStore.Location(), err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, RecordsDir+"/") {
			return k, nil
		}
	}
	return "", nil
}
