package delta

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine"
)

var (
	_ engine.Source             = (*Source)(nil)
	_ engine.AvailableNowSource = (*Source)(nil)
	_ engine.RetainingSource    = (*Source)(nil)
)

var (
	// ErrDataLoss means commits the source has not read yet were removed
	// from the log (log retention), or data files they add were deleted.
	// Errors wrapping it are *DataLossError.
	ErrDataLoss = errors.New("delta source lost data")

	// ErrDataChanged means a commit removed data (an update, a delete, a
	// complete-mode overwrite) and ignoreChanges is not set.
	ErrDataChanged = errors.New("delta table changed data the source has read")
)

// DataLossError tells which versions a source needed that are gone.
type DataLossError struct {
	Table string
	// Need is the first version the source has not read; Oldest the oldest
	// commit still in the log (-1: none).
	Need, Oldest int64
}

func (e *DataLossError) Error() string {
	return fmt.Sprintf("delta table %s: the source needs version %d but the oldest commit left in the log is %d "+
		"(the rest was removed by log retention): commits %d to %d are lost; "+
		"set failOnDataLoss: false to continue from version %d, or start a new checkpoint",
		e.Table, e.Need, e.Oldest, e.Need, e.Oldest-1, e.Oldest)
}

func (e *DataLossError) Unwrap() error { return ErrDataLoss }

// SourceSpec describes the delta source for the registry and the docs.
func SourceSpec() engine.ComponentSpec {
	return engine.ComponentSpec{
		Summary: "Streams the data files that a Delta table's commits add (local or s3://), in commit order; offsets are (table version, index in the commit).",
		Fields: []engine.FieldSpec{
			{Name: "path", Description: "the table's folder: a local path, file:// URL or s3://bucket/prefix"},
			{Name: "maxFilesPerTrigger", Default: "no cap", Description: "the most data files one batch reads"},
			{Name: "startingVersion", Default: "the table's content, then every later commit", Description: "the first table version a source new to the checkpoint reads"},
			{Name: "ignoreChanges", Default: "false", Description: "let commits that remove data pass (their added files are read again); otherwise such a commit stops the query"},
			{Name: "failOnDataLoss", Default: "true", Description: "stop when commits not read yet were removed by log retention; false: warn and continue at the oldest commit left"},
		},
	}
}

// Source streams a Delta table: first, unless startingVersion is set, the
// files of the snapshot at the version it started at (ordered by
// modification time, then path), then the data-changing add actions of each
// later commit, in order. It is used by one goroutine at a time.
type Source struct {
	name           string
	table          *Table
	store          checkpoint.Store // the source's private checkpoint files
	columns        v1.Columns
	maxFiles       int
	startVersion   *int64
	ignoreChanges  bool
	failOnDataLoss bool
	logger         *slog.Logger

	bound *int64 // availableNow: the newest version the run may read

	snapVersion int64 // snapFiles is the snapshot at snapVersion (cache)
	snapFiles   []Add
}

// position is a source offset: the next file to read is file Index of
// version Version, counting the snapshot's files when Snapshot is set and
// the commit's data-changing adds otherwise.
type position struct {
	Version  int64 `json:"version"`
	Index    int64 `json:"index"`
	Snapshot bool  `json:"snapshot,omitempty"`
}

// startKey holds, in the source's checkpoint folder, where a source new to
// the checkpoint starts, fixed by its first Plan.
const startKey = "delta-start.json"

// NewSource returns the delta source of spec. It does no I/O but opening
// the folder.
func NewSource(_ context.Context, spec *v1.Source, env engine.SourceEnv) (engine.Source, error) {
	if spec.Delta == nil {
		return nil, errors.New("not a delta source")
	}
	if spec.Schema == nil {
		return nil, errors.New("a delta source needs a schema")
	}
	folder, err := env.Open(spec.Delta.Path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", spec.Delta.Path, err)
	}
	s := &Source{
		name:           env.Name,
		table:          Open(folder),
		store:          env.Store,
		columns:        spec.Schema.Columns,
		startVersion:   spec.Delta.StartingVersion,
		ignoreChanges:  spec.Delta.IgnoreChanges,
		failOnDataLoss: spec.Delta.FailOnDataLoss == nil || *spec.Delta.FailOnDataLoss,
		logger:         env.Logger,
		snapVersion:    -1,
	}
	if m := spec.Delta.MaxFilesPerTrigger; m != nil {
		s.maxFiles = int(*m)
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// PrepareAvailableNow fixes the newest table version the run reads.
func (s *Source) PrepareAvailableNow(ctx context.Context, _ time.Time) error {
	snap, err := s.table.Snapshot(ctx)
	if err != nil {
		return err
	}
	v := snap.Version
	s.bound = &v
	return nil
}

// Plan hands out the next files, at most maxFilesPerTrigger of them when
// req.Limit is set.
func (s *Source) Plan(ctx context.Context, req engine.PlanRequest) (engine.Planned, error) {
	start, err := s.startOf(ctx, req.Start, true)
	if err != nil {
		return engine.Planned{}, err
	}
	limit := 0
	if req.Limit {
		limit = s.maxFiles
	}
	snap, err := s.table.Snapshot(ctx)
	if err != nil {
		return engine.Planned{}, err
	}
	newest := snap.Version
	if s.bound != nil {
		newest = min(newest, *s.bound)
	}
	files, end, err := s.scan(ctx, start, nil, newest, limit)
	if err != nil {
		return engine.Planned{}, err
	}
	b, err := json.Marshal(end)
	if err != nil {
		return engine.Planned{}, err
	}
	return engine.Planned{End: b, HasData: len(files) > 0 || end != start}, nil
}

// Read returns the rows of the files in (req.Start, req.End].
func (s *Source) Read(ctx context.Context, req engine.ReadRequest) (engine.ReadResult, error) {
	start, err := s.startOf(ctx, req.Start, false)
	if err != nil {
		return engine.ReadResult{}, err
	}
	var end position
	if err := json.Unmarshal(req.End, &end); err != nil {
		return engine.ReadResult{}, fmt.Errorf("end offset %s: %w", req.End, err)
	}
	files, _, err := s.scan(ctx, start, &end, end.Version, 0)
	if err != nil {
		return engine.ReadResult{}, err
	}
	var res engine.ReadResult
	for _, f := range files {
		rows, err := s.table.ReadFile(ctx, f, s.columns)
		if errors.Is(err, checkpoint.ErrNotFound) {
			if s.failOnDataLoss {
				return engine.ReadResult{}, fmt.Errorf("data file %s was deleted (vacuum?): %w: %w", f.Path, ErrDataLoss, err)
			}
			s.logger.Warn("Skipped a deleted data file", "source", s.name, "path", f.Path)
			continue
		}
		if err != nil {
			return engine.ReadResult{}, err
		}
		for _, r := range rows {
			res.Rows = append(res.Rows, engine.Row(r))
		}
	}
	return res, nil
}

// startOf parses a start offset; nil means the source's starting position,
// which the first Plan fixes in the checkpoint (and Read finds there).
func (s *Source) startOf(ctx context.Context, start engine.Offset, planning bool) (position, error) {
	if len(start) > 0 {
		var p position
		if err := json.Unmarshal(start, &p); err != nil {
			return position{}, fmt.Errorf("offset %s: %w", start, err)
		}
		return p, nil
	}
	if b, err := s.store.Get(ctx, startKey); err == nil {
		var p position
		if err := json.Unmarshal(b, &p); err != nil {
			return position{}, fmt.Errorf("read %s: %w", startKey, err)
		}
		return p, nil
	} else if !errors.Is(err, checkpoint.ErrNotFound) {
		return position{}, err
	}
	if !planning {
		return position{}, fmt.Errorf("no starting position in the checkpoint (%s)", startKey)
	}
	var p position
	if s.startVersion != nil {
		p = position{Version: *s.startVersion}
	} else {
		snap, err := s.table.Snapshot(ctx)
		if err != nil {
			return position{}, err
		}
		if snap.Exists() {
			p = position{Version: snap.Version, Snapshot: true}
		}
	}
	b, _ := json.Marshal(p)
	if err := s.store.Create(ctx, startKey, b); errors.Is(err, checkpoint.ErrExists) {
		return s.startOf(ctx, nil, false) // a run that died after fixing it
	} else if err != nil {
		return position{}, fmt.Errorf("record starting position: %w", err)
	}
	return p, nil
}

// Retained checks that the table still holds what the batches up to end read
// (engine.RetainingSource): every commit from the recorded start on is in the log, and every
// data file those commits (or the starting snapshot) added is still in the table's folder —
// not removed by log retention or a VACUUM.
func (s *Source) Retained(ctx context.Context, end engine.Offset) error {
	return s.RetainedFrom(ctx, nil, end)
}

// RetainedFrom is Retained from the starting position start (the source's offset:
// {"version":v,"index":i,"snapshot":true}; nil: the one the source recorded) rather than the
// one the source recorded: for the batches a log other than the source's own records (the
// Spark runtime's, whose Delta offsets translate to this source's; engine/spark).
func (s *Source) RetainedFrom(ctx context.Context, startAt, end engine.Offset) error {
	stop, err := s.startOf(ctx, end, false)
	if err != nil {
		return err
	}
	start, err := s.startOf(ctx, startAt, false)
	if err != nil {
		return fmt.Errorf("%w: %w", engine.ErrRetentionUnknown, err)
	}
	lossless := *s
	lossless.failOnDataLoss = true // a rebuild reads every commit again, skipping none
	files, _, err := lossless.scan(ctx, start, &stop, stop.Version, 0)
	if errors.Is(err, ErrDataLoss) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: %w", engine.ErrRetentionUnknown, err)
	}
	if len(files) == 0 {
		return nil
	}
	keys, err := checkpoint.ListKeys(ctx, s.table.Store(), "")
	if err != nil {
		return fmt.Errorf("%w: list %s: %w", engine.ErrRetentionUnknown, s.table.Location(), err)
	}
	present := make(map[string]bool, len(keys))
	for _, k := range keys {
		present[k] = true
	}
	for _, f := range files {
		if k := canonicalPath(f.Path); !present[k] {
			return fmt.Errorf("the data file %s/%s that the committed batches read is gone (a VACUUM removed it)", s.table.Location(), k)
		}
	}
	return nil
}

// scan walks from start to stop (nil: as far as newest and limit allow) and
// returns the files passed and the position reached.
func (s *Source) scan(ctx context.Context, start position, stop *position, newest int64, limit int) ([]Add, position, error) {
	var files []Add
	p := start
	full := func() bool { return limit > 0 && len(files) >= limit }
	at := func(q position) bool { return stop != nil && q == *stop }
	if p.Snapshot {
		snapFiles, err := s.snapshotFiles(ctx, p.Version)
		if err != nil {
			return nil, p, err
		}
		for int(p.Index) < len(snapFiles) && !full() && !at(p) {
			files = append(files, snapFiles[p.Index])
			p.Index++
		}
		if int(p.Index) < len(snapFiles) || at(p) {
			return files, p, nil
		}
		p = position{Version: p.Version + 1}
		if at(p) {
			return files, p, nil
		}
	}
	for p.Version <= newest && !full() && !at(p) {
		adds, err := s.commitFiles(ctx, p.Version)
		var lost *DataLossError
		if errors.As(err, &lost) && !s.failOnDataLoss {
			s.logger.Warn("Lost commits removed by log retention; continuing at the oldest left",
				"source", s.name, "from", lost.Need, "to", lost.Oldest-1)
			p = position{Version: lost.Oldest}
			continue
		}
		if err != nil {
			return nil, p, err
		}
		for int(p.Index) < len(adds) && !full() && !at(p) {
			files = append(files, adds[p.Index])
			p.Index++
		}
		if int(p.Index) < len(adds) || at(p) {
			return files, p, nil
		}
		p = position{Version: p.Version + 1}
	}
	return files, p, nil
}

// snapshotFiles returns the files of the snapshot at version v, oldest
// first by modification time, then by path.
func (s *Source) snapshotFiles(ctx context.Context, v int64) ([]Add, error) {
	if s.snapVersion == v {
		return s.snapFiles, nil
	}
	snap, err := s.table.SnapshotAt(ctx, v)
	if errors.Is(err, checkpoint.ErrNotFound) {
		oldest, _ := s.table.OldestCommit(ctx)
		return nil, fmt.Errorf("snapshot %d: %w", v, &DataLossError{Table: s.table.Location(), Need: v, Oldest: oldest})
	}
	if err != nil {
		return nil, err
	}
	files := snap.Files()
	slices.SortStableFunc(files, func(a, b Add) int { return cmp.Compare(a.ModificationTime, b.ModificationTime) })
	s.snapVersion, s.snapFiles = v, files
	return files, nil
}

// commitFiles returns the data-changing adds of commit v, in the commit's
// order. A commit that removes data is ErrDataChanged unless ignoreChanges;
// a commit gone from the log is a *DataLossError.
func (s *Source) commitFiles(ctx context.Context, v int64) ([]Add, error) {
	actions, err := s.table.Commit(ctx, v)
	if errors.Is(err, checkpoint.ErrNotFound) {
		oldest, err2 := s.table.OldestCommit(ctx)
		if err2 != nil {
			return nil, err2
		}
		if oldest > v {
			return nil, &DataLossError{Table: s.table.Location(), Need: v, Oldest: oldest}
		}
		return nil, fmt.Errorf("commit %d: %w", v, err)
	}
	if err != nil {
		return nil, err
	}
	var adds []Add
	for _, a := range actions {
		switch {
		case a.Add != nil && a.Add.DataChange:
			adds = append(adds, *a.Add)
		case a.Remove != nil && a.Remove.DataChange && !s.ignoreChanges:
			return nil, fmt.Errorf("version %d of %s removes data (an update, delete or overwrite): "+
				"set ignoreChanges: true to read the files it adds again, or read the table from a later startingVersion: %w",
				v, s.table.Location(), ErrDataChanged)
		}
	}
	return adds, nil
}
