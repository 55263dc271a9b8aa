package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Description summarizes a checkpoint for people and tools: what `lockstep
// checkpoint describe` prints. Its JSON form is documented in
// docs/checkpoint-format.md.
type Description struct {
	Location string   `json:"location"`
	Metadata Metadata `json:"metadata"`

	// PlannedBatch is the newest batch in the offsets log; nil when none.
	PlannedBatch *int64 `json:"plannedBatch"`
	// CommittedBatch is the newest batch in the commit log; nil when none.
	CommittedBatch *int64 `json:"committedBatch"`
	// Replay is true when PlannedBatch was not committed: a restart re-runs
	// it with its logged offsets.
	Replay bool `json:"replayOnRestart"`
	// NextBatch is the batch a restart runs.
	NextBatch int64 `json:"nextBatch"`
	// Generation is the current generation's record; nil for generation 0, which no rebuild
	// replaced (generation.go).
	Generation *Generation `json:"generation,omitempty"`

	// OldestBatch is the oldest batch still in the offsets log; nil when none.
	OldestBatch *int64 `json:"oldestRetainedBatch"`
	// RetainedBatches counts the batches in the offsets log.
	RetainedBatches int `json:"retainedBatches"`

	// Planned is the newest offsets entry: its watermark, timestamp, pinned
	// settings and the offset of every source.
	Planned *Offsets `json:"planned,omitempty"`
	// Committed is the newest commit entry with its progress.
	Committed *Commit `json:"committed,omitempty"`

	// State lists the stateful operators found under state/.
	State []OperatorState `json:"state"`
	// Shape is the shape in force at NextBatch; nil when none was recorded.
	Shape *ShapeEntry `json:"shape"`
}

// OperatorState summarizes one stateful operator's files.
type OperatorState struct {
	Operator   string `json:"operator"`
	Partitions int    `json:"partitions"`
	// MinVersion and MaxVersion bound the versions present over all partitions.
	MinVersion int64 `json:"minVersion"`
	MaxVersion int64 `json:"maxVersion"`
	Deltas     int   `json:"deltas"`
	Snapshots  int   `json:"snapshots"`
	// Files and Bytes count every object under state/<op>/, _metadata included.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Metadata is the operator's _metadata file when it is JSON.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// ShapeEntry is one entry of the shape log.
type ShapeEntry struct {
	// Batch is the first batch the shape is in force for.
	Batch int64  `json:"batch"`
	Key   string `json:"key"`
	Bytes int    `json:"bytes"`
	// Shape is the entry itself when it is JSON.
	Shape json.RawMessage `json:"shape,omitempty"`
}

// Describe reads the checkpoint in s and summarizes it. It fails like Load
// on a missing checkpoint and like Head on damaged logs.
func Describe(ctx context.Context, s Store) (Description, error) {
	c, err := Load(ctx, s)
	if err != nil {
		return Description{}, err
	}
	return c.Describe(ctx)
}

// Describe summarizes the checkpoint.
func (c *Checkpoint) Describe(ctx context.Context) (Description, error) {
	d := Description{Location: c.Location(), Metadata: c.meta, State: []OperatorState{}}
	h, err := c.Head(ctx)
	if err != nil {
		return Description{}, err
	}
	d.Planned, d.Committed = h.Planned, h.Committed
	if h.Planned != nil {
		d.PlannedBatch = &h.Planned.BatchID
	}
	if h.Committed != nil {
		d.CommittedBatch = &h.Committed.BatchID
	}
	d.Replay, d.NextBatch = h.Replay(), h.Next()
	if c.gen.Number > 0 {
		d.Generation = &c.gen
	}

	offsets, err := c.logBatches(ctx, OffsetsDir)
	if err != nil {
		return Description{}, err
	}
	d.RetainedBatches = len(offsets)
	if len(offsets) > 0 {
		d.OldestBatch = &offsets[0]
	}

	if d.State, err = c.describeState(ctx); err != nil {
		return Description{}, err
	}

	from, shape, err := c.Shape(ctx, d.NextBatch)
	switch {
	case err == nil:
		d.Shape = &ShapeEntry{Batch: from, Key: ShapeKey(from), Bytes: len(shape)}
		if json.Valid(shape) {
			d.Shape.Shape = shape
		}
	case !errors.Is(err, ErrNotFound):
		return Description{}, err
	}
	return d, nil
}

func (c *Checkpoint) describeState(ctx context.Context) ([]OperatorState, error) {
	infos, err := c.store.List(ctx, StateDir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", c.name(StateDir), err)
	}
	ops := map[string]*OperatorState{}
	parts := map[string]map[int]bool{}
	for _, info := range infos {
		op, _, _ := strings.Cut(strings.TrimPrefix(info.Key, StateDir), "/")
		st := ops[op]
		if st == nil {
			st = &OperatorState{Operator: op, MinVersion: -1, MaxVersion: -1}
			ops[op] = st
			parts[op] = map[int]bool{}
		}
		st.Files++
		st.Bytes += info.Size
		if info.Key == StateMetadataKey(op) {
			if data, err := c.store.Get(ctx, info.Key); err == nil && json.Valid(data) {
				st.Metadata = data
			}
			continue
		}
		f, ok := ParseStateFile(info.Key)
		if !ok {
			continue
		}
		parts[op][f.Partition] = true
		if f.Kind == StateDelta {
			st.Deltas++
		} else {
			st.Snapshots++
		}
		if st.MinVersion < 0 || f.Version < st.MinVersion {
			st.MinVersion = f.Version
		}
		st.MaxVersion = max(st.MaxVersion, f.Version)
	}
	out := make([]OperatorState, 0, len(ops))
	for op, st := range ops {
		st.Partitions = len(parts[op])
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Operator < out[j].Operator })
	return out, nil
}
