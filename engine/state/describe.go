package state

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

// Summary describes one operator's state as `lockstep checkpoint describe`
// shows it.
type Summary struct {
	Operator   string  `json:"operator"`
	Kind       string  `json:"kind"`
	Partitions int     `json:"partitions"`
	KeySchema  []Field `json:"keySchema"`
	// Eviction is the event-time column the watermark evicts by, "" if none.
	Eviction string `json:"eviction,omitempty"`
	// Version is the version described: the newest at or before the one
	// asked for that has a file. Rows counts its keys; it is -1 when a
	// file's header cannot be read.
	Version int64 `json:"version"`
	Rows    int64 `json:"rows"`
	// MinVersion is the oldest version with a file.
	MinVersion int64 `json:"minVersion"`
	Deltas     int   `json:"deltas"`
	Snapshots  int   `json:"snapshots"`
	// Bytes counts every file of the operator, _metadata included.
	Bytes int64 `json:"bytes"`
}

// Describe summarizes the state of every operator under state/ at version
// (the state after batch version-1; -1 for the newest files). It reads each
// operator's _metadata and, per partition, the header of the newest file at
// or before version. A file that does not parse makes the operator's Rows
// -1 rather than an error: describe shows a damaged checkpoint.
func Describe(ctx context.Context, cs checkpoint.Store, version int64) ([]Summary, error) {
	infos, err := cs.List(ctx, checkpoint.StateDir)
	if err != nil {
		return nil, fmt.Errorf("describe state: %w", err)
	}
	type partKey struct {
		op   string
		part int
	}
	sums := map[string]*Summary{}
	newest := map[partKey]checkpoint.StateFile{}
	for _, info := range infos {
		op, _, _ := strings.Cut(strings.TrimPrefix(info.Key, checkpoint.StateDir), "/")
		sm := sums[op]
		if sm == nil {
			sm = &Summary{Operator: op, Version: -1, MinVersion: -1}
			sums[op] = sm
		}
		sm.Bytes += info.Size
		f, ok := checkpoint.ParseStateFile(info.Key)
		if !ok {
			continue
		}
		if f.Kind == checkpoint.StateDelta {
			sm.Deltas++
		} else {
			sm.Snapshots++
		}
		if sm.MinVersion < 0 || f.Version < sm.MinVersion {
			sm.MinVersion = f.Version
		}
		if version >= 0 && f.Version > version {
			continue
		}
		k := partKey{op, f.Partition}
		// Listing order: by version, delta before snapshot; keep the newest
		// version's delta, the smaller file.
		if old, ok := newest[k]; !ok || f.Version > old.Version {
			newest[k] = f
		}
	}
	for k, f := range newest {
		data, err := cs.Get(ctx, f.Key())
		if err != nil {
			return nil, fmt.Errorf("describe state: %w", err)
		}
		sm := sums[k.op]
		sm.Version = max(sm.Version, f.Version)
		h, err := DecodeHeader(data)
		switch {
		case err != nil:
			sm.Rows = -1
		case sm.Rows >= 0:
			sm.Rows += h.Rows
		}
	}
	out := make([]Summary, 0, len(sums))
	for op, sm := range sums {
		if m, err := ReadMetadata(ctx, cs, op); err == nil {
			sm.Kind, sm.Partitions, sm.KeySchema, sm.Eviction = m.Kind, m.Partitions, m.KeySchema, m.Eviction
		}
		out = append(out, *sm)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Operator < out[j].Operator })
	return out, nil
}
