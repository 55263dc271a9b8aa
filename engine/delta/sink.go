package delta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
)

var (
	_ engine.Sink = (*Sink)(nil)
)

// SinkSpec describes the delta sink for the registry and the docs.
func SinkSpec() engine.ComponentSpec {
	return engine.ComponentSpec{
		Summary: "Writes each batch as one commit to a Delta table (local or s3://): Parquet data files and a _delta_log entry " +
			"created only if absent; output modes append, update (a copy-on-write MERGE by the query's key) and complete.",
		Fields: []engine.FieldSpec{
			{Name: "path", Description: "the table's folder: a local path, file:// URL or s3://bucket/prefix"},
			{Name: "partitionColumns", Description: "output columns that partition a new table, in order; an existing table keeps its own"},
			{Name: "mergeKeys", Default: "the aggregation's grouping keys", Description: "update mode: the output columns that identify a row; each batch's rows replace the rows with the same key"},
		},
	}
}

// Sink writes each batch as one commit to a Delta table. Append mode adds
// the batch's rows; update mode merges them by the query's key (replacing
// the rows with the same key, adding the others); complete mode replaces
// the table's content with them. It is used by one goroutine at a time.
type Sink struct {
	table            *Table
	mode             Mode
	outputMode       v1.OutputMode
	keys             []string
	partitionColumns []string
	reached          func(engine.Phase, int64)
	logger           *slog.Logger
}

// NewSink returns the delta sink of spec. It opens the table's folder and
// checks the output columns against the table, if it exists, so that a
// changed column type stops the query before its first batch.
func NewSink(ctx context.Context, spec *v1.Sink, env engine.SinkEnv) (engine.Sink, error) {
	if spec.Delta == nil {
		return nil, errors.New("not a delta sink")
	}
	var mode Mode
	switch env.OutputMode {
	case "", v1.OutputAppend:
		mode = Append
	case v1.OutputComplete:
		mode = Complete
	case v1.OutputUpdate:
		mode = Merge
		if env.Keys == nil {
			return nil, errors.New("delta sink: update mode merges by key: name sink.delta.mergeKeys, or write an aggregation")
		}
		for _, k := range env.Keys {
			if !slices.Contains(env.Columns.Names(), k) {
				return nil, fmt.Errorf("delta sink: merge key %q is not an output column (%s)", k, strings.Join(env.Columns.Names(), ", "))
			}
		}
	default:
		return nil, fmt.Errorf("delta sink: output mode %q is not supported: use append, update or complete", env.OutputMode)
	}
	outputMode := env.OutputMode
	if outputMode == "" {
		outputMode = v1.OutputAppend
	}
	folder, err := env.Open(spec.Delta.Path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", spec.Delta.Path, err)
	}
	s := &Sink{
		table:            Open(folder),
		mode:             mode,
		outputMode:       outputMode,
		keys:             env.Keys,
		partitionColumns: spec.Delta.PartitionColumns,
		reached:          env.Reached,
		logger:           env.Logger,
	}
	if s.reached == nil {
		s.reached = func(engine.Phase, int64) {}
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	snap, err := s.table.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := s.table.plan(snap, Write{Columns: env.Columns, PartitionColumns: s.partitionColumns, Mode: mode}); err != nil {
		return nil, err
	}
	return s, nil
}

// Table returns the table the sink writes.
func (s *Sink) Table() *Table { return s.table }

// Write commits the batch, or finds it committed (its txn is in the table)
// and writes nothing.
func (s *Sink) Write(ctx context.Context, b *engine.Batch) error {
	rows := make([]Row, len(b.Rows))
	for i, r := range b.Rows {
		rows[i] = Row(r)
	}
	res, err := s.table.Write(ctx, Write{
		AppID: b.QueryID, Version: b.ID,
		Columns: b.Columns, Rows: rows,
		PartitionColumns: s.partitionColumns,
		Mode:             s.mode,
		Keys:             s.keys,
		Operation:        "STREAMING UPDATE",
		OperationParameters: map[string]string{
			"outputMode": outputModeName(s.outputMode), "queryId": b.QueryID, "epochId": strconv.FormatInt(b.ID, 10),
		},
		beforeCommit: func() { s.reached(engine.PhaseSinkWrite, b.ID) },
	})
	if err != nil {
		return fmt.Errorf("delta sink: batch %d: %w", b.ID, err)
	}
	switch {
	case res.Skipped:
		s.logger.Info("Skipped a batch already in the delta table", "batch", b.ID, "tableVersion", res.Version)
	case s.mode == Merge:
		s.logger.Debug("Merged a batch into the delta table", "batch", b.ID, "tableVersion", res.Version,
			"filesRewritten", res.Removed, "filesAdded", len(res.Files))
	}
	if res.CheckpointErr != nil {
		s.logger.Warn("Failed to write a delta checkpoint; the next one retries", "tableVersion", res.Version, "error", res.CheckpointErr)
	}
	return nil
}

// outputModeName spells an output mode as Spark's commitInfo does (Append,
// Update, Complete).
func outputModeName(m v1.OutputMode) string {
	s := string(m)
	if s == "" {
		return "Append"
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
