package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine"
)

// StaticSpec describes the static side of a stream–static join on a Delta table.
func StaticSpec() engine.ComponentSpec {
	return engine.ComponentSpec{
		Summary: "Reads a Delta table's snapshot as the static side of a join; the batch records the version it joined against, and a replay reads exactly that version.",
		Fields: []engine.FieldSpec{
			{Name: "path", Description: "the table's folder"},
			{Name: "s3", Description: "S3 settings of another server or account"},
		},
	}
}

// staticSnapshot names a snapshot of a static Delta table: its version.
type staticSnapshot struct {
	Version int64 `json:"version"`
}

// Static is a Delta table read as the static side of a join.
type Static struct {
	table   *Table
	columns v1.Columns
}

// NewStatic returns the static side of spec, a Delta table. It does no I/O but opening the
// folder.
func NewStatic(_ context.Context, spec *v1.StaticSide, env engine.StaticEnv) (engine.StaticTable, error) {
	if spec.Delta == nil || spec.Schema == nil {
		return nil, errors.New("not a delta static side with a schema")
	}
	folder, err := env.Open(spec.Delta.Path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", spec.Delta.Path, err)
	}
	return &Static{table: Open(folder), columns: spec.Schema.Columns}, nil
}

// Latest returns the table's newest version; a table without a commit is an error.
func (s *Static) Latest(ctx context.Context) (engine.Snapshot, error) {
	snap, err := s.table.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if !snap.Exists() {
		return nil, fmt.Errorf("delta table %s has no commit yet: create it before the query joins with it", s.table.Location())
	}
	return json.Marshal(staticSnapshot{Version: snap.Version})
}

// Version returns the table version the snapshot name (Latest's) names, for a reader of its
// own (the spark runtime's) to read.
func (s *Static) Version(name engine.Snapshot) (int64, error) {
	var sn staticSnapshot
	if err := json.Unmarshal(name, &sn); err != nil {
		return 0, fmt.Errorf("delta snapshot %s: %w", name, err)
	}
	return sn.Version, nil
}

// Read returns every row of the table at the named version, file by file in path order, as
// the static side's columns.
func (s *Static) Read(ctx context.Context, name engine.Snapshot) ([]engine.Row, error) {
	var sn staticSnapshot
	if err := json.Unmarshal(name, &sn); err != nil {
		return nil, fmt.Errorf("delta snapshot %s: %w", name, err)
	}
	snap, err := s.table.SnapshotAt(ctx, sn.Version)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return nil, fmt.Errorf("delta table %s: version %d is no longer in its log (log retention): %w", s.table.Location(), sn.Version, err)
	}
	if err != nil {
		return nil, err
	}
	var rows []engine.Row
	for _, f := range snap.Files() {
		r, err := s.table.ReadFile(ctx, f, s.columns)
		if err != nil {
			return nil, err
		}
		for _, row := range r {
			rows = append(rows, engine.Row(row))
		}
	}
	return rows, nil
}
