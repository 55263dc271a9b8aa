package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
)

// Mode says how a write changes the table's content.
type Mode int

const (
	// Append adds the rows to the table (a blind append: it reads nothing
	// of the table, so it commits after any concurrent append).
	Append Mode = iota
	// Complete replaces the table's content with the rows: one commit that
	// removes every active file and adds the new ones. It conflicts with a
	// concurrent commit that adds or removes files.
	Complete
	// Merge replaces the table's rows whose Keys equal those of a row of
	// the write and adds the other rows: one commit that removes the files
	// holding replaced rows and adds their other rows with the write's
	// (copy-on-write, no deletion vectors). Only files whose partition
	// values and stats allow one of the keys are read. It conflicts with a
	// concurrent commit that adds or removes files.
	Merge
)

func (m Mode) String() string {
	switch m {
	case Complete:
		return "Complete"
	case Merge:
		return "Merge"
	}
	return "Append"
}

var (
	// ErrConflict means a concurrent commit conflicts with this write (it
	// changed the files a complete write replaces, or the partitioning).
	// Nothing was committed; the write may be tried again.
	ErrConflict = errors.New("a concurrent commit conflicts with this write")

	// ErrTooManyRetries means the write lost the commit race more often
	// than WithMaxRetries allows.
	ErrTooManyRetries = errors.New("delta commit lost the race too many times")
)

// Write is one transaction: rows to add to (or to replace the content of) a
// table, tagged with an application transaction.
type Write struct {
	// AppID and Version make the write idempotent: the commit carries
	// txn(AppID, Version), and a write whose Version is not above the
	// newest the table holds for AppID is skipped. Lockstep's sink uses the
	// query id and the batch id. An empty AppID writes no txn.
	AppID   string
	Version int64

	// Columns are the rows' columns. Columns the table lacks are added to
	// its schema in the same commit; a column whose type differs from the
	// table's is refused with a *SchemaError.
	Columns v1.Columns
	Rows    []Row

	// PartitionColumns partition a new table. For an existing table they
	// must be nil or equal the table's.
	PartitionColumns []string

	Mode Mode

	// Keys are the columns (of Columns) that identify a row in Merge mode;
	// null key values equal each other. No keys: every row matches, and a
	// merge replaces the table's content.
	Keys []string

	// Operation and OperationParameters go to the commitInfo action, for
	// people reading the table's history. Default "WRITE".
	Operation           string
	OperationParameters map[string]string

	// beforeCommit, when set, is called once the data files are written,
	// before the first commit attempt (the sink's crash-test phase).
	beforeCommit func()
}

// Result tells what a Write did.
type Result struct {
	// Version is the table version committed; when Skipped, the newest
	// table version read.
	Version int64
	// Skipped is true when the table already held the transaction: nothing
	// was written.
	Skipped bool
	// Files are the data files added.
	Files []Add
	// Removed counts the data files removed: by a merge, the files
	// rewritten without their replaced rows; by a complete write, all.
	Removed int
	// Retries counts the commit races lost to non-conflicting commits.
	Retries int
	// CheckpointErr is set when the commit succeeded but writing the Delta
	// checkpoint after it failed; the table is correct without it, and the
	// next checkpoint version tries again.
	CheckpointErr error
}

// Write commits w to the table, creating the table if it has no commit.
//
// It writes the data files first (named by fresh UUIDs), then creates the
// next commit file with create-if-absent. When another writer created that
// version first, Write reads the new commits: if one holds w's transaction
// (another instance of the same query), it is skipped; if one conflicts, it
// fails with ErrConflict; else it commits at the next version. A commit
// whose version is a multiple of the checkpoint interval is followed by a
// Delta checkpoint and _last_checkpoint.
func (t *Table) Write(ctx context.Context, w Write) (Result, error) {
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return Result{}, err
	}
	if skip(snap, w) {
		return Result{Version: snap.Version, Skipped: true}, nil
	}
	plan, res, err := t.stage(ctx, snap, w)
	if err != nil {
		return Result{}, err
	}
	files := res.Files
	if w.beforeCommit != nil {
		w.beforeCommit()
	}
	for {
		actions, err := t.actions(snap, w, plan, files)
		if err != nil {
			return Result{}, err
		}
		data, err := encodeCommit(actions)
		if err != nil {
			return Result{}, err
		}
		version := snap.Version + 1
		err = t.store.Create(ctx, commitKey(version), data)
		if err == nil {
			return t.committed(ctx, snap, version, actions, res), nil
		}
		if !errors.Is(err, checkpoint.ErrExists) {
			return Result{}, fmt.Errorf("delta table %s: commit version %d: %w", t.Location(), version, err)
		}
		// Lost the race: read what won, and decide. Our files are deleted
		// only once the commits that won are known not to name them: the
		// store resolves an uncertain create by reading it back, but should
		// a commit of ours have landed unrecognised, its files must stay.
		newer, err := t.Snapshot(ctx)
		if err != nil {
			return Result{}, err
		}
		if committed, err := t.namesAny(ctx, snap.Version, newer.Version, files); err != nil {
			return Result{}, err
		} else if committed {
			return Result{Version: newer.Version, Files: files, Removed: res.Removed, Retries: res.Retries}, nil
		}
		if skip(newer, w) {
			t.deleteFiles(ctx, files)
			return Result{Version: newer.Version, Skipped: true, Retries: res.Retries}, nil
		}
		if err := t.checkConflicts(ctx, snap, newer, w); err != nil {
			t.deleteFiles(ctx, files)
			return Result{}, err
		}
		// Re-plan against the new metadata: a concurrent schema change must
		// still fit the rows (the files written need no change, since the
		// data columns of a file are its own).
		p2, err := t.plan(newer, plan.write(w))
		if err != nil {
			t.deleteFiles(ctx, files)
			return Result{}, err
		}
		if !slices.Equal(p2.partitionColumns, plan.partitionColumns) {
			t.deleteFiles(ctx, files)
			return Result{}, fmt.Errorf("delta table %s: partition columns changed concurrently: %w", t.Location(), ErrConflict)
		}
		plan.metadata, plan.newTable = p2.metadata, p2.newTable
		snap = newer
		res.Retries++
		if res.Retries > t.opts.maxRetries {
			t.deleteFiles(ctx, files)
			return Result{}, fmt.Errorf("delta table %s: %d retries: %w", t.Location(), res.Retries-1, ErrTooManyRetries)
		}
	}
}

// committed records the snapshot that the commit of actions at version makes of snap, and
// writes a Delta checkpoint when the version is due one: res completed.
func (t *Table) committed(ctx context.Context, snap *Snapshot, version int64, actions []Action, res Result) Result {
	next := snap.clone()
	next.apply(version, actions)
	t.remember(next)
	res.Version = version
	if version > 0 && version%t.opts.checkpointInterval == 0 {
		res.CheckpointErr = t.writeCheckpoint(ctx, next)
	}
	return res
}

// stage plans w against snap (for a merge, which files it rewrites) and writes its data
// files, before any commit: it returns the plan and the result so far (the files added and
// the number of files the commit removes).
func (t *Table) stage(ctx context.Context, snap *Snapshot, w Write) (writePlan, Result, error) {
	plan, err := t.plan(snap, w)
	if err != nil {
		return writePlan{}, Result{}, err
	}
	rows := w.Rows
	var origins []int
	if w.Mode == Merge {
		m, err := t.planMerge(ctx, snap, w, plan)
		if err != nil {
			return writePlan{}, Result{}, err
		}
		plan, rows, origins = m.plan, m.rows, m.origins
		plan.removes = m.removes
	}
	files, err := t.writeFiles(ctx, plan, rows, origins)
	if err != nil {
		return writePlan{}, Result{}, err
	}
	res := Result{Files: files, Removed: len(plan.removes)}
	if w.Mode == Complete {
		res.Removed = snap.NumFiles()
	}
	return plan, res, nil
}

// namesAny reports whether a commit in (after, upTo] adds one of files: then
// that commit is this write's own, whose creation was not recognised.
func (t *Table) namesAny(ctx context.Context, after, upTo int64, files []Add) (bool, error) {
	if len(files) == 0 {
		return false, nil
	}
	ours := make(map[string]bool, len(files))
	for _, f := range files {
		ours[canonicalPath(f.Path)] = true
	}
	for v := after + 1; v <= upTo; v++ {
		actions, err := t.readCommit(ctx, v)
		if err != nil {
			return false, fmt.Errorf("delta table %s: read the commit that won version %d: %w", t.Location(), v, err)
		}
		for _, a := range actions {
			if a.Add != nil && ours[canonicalPath(a.Add.Path)] {
				return true, nil
			}
		}
	}
	return false, nil
}

func skip(s *Snapshot, w Write) bool {
	if w.AppID == "" {
		return false
	}
	v, ok := s.TxnVersion(w.AppID)
	return ok && v >= w.Version
}

// remember caches s when it is newer than the cached snapshot.
func (t *Table) remember(s *Snapshot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cached == nil || t.cached.Version < s.Version {
		t.cached = s
	}
}

// checkConflicts looks at the commits between base and newer for one that
// w cannot be committed after.
func (t *Table) checkConflicts(ctx context.Context, base, newer *Snapshot, w Write) error {
	if newer.Protocol.MinWriterVersion > WriterVersion {
		return fmt.Errorf("delta table %s needs writer version %d: %w", t.Location(), newer.Protocol.MinWriterVersion, ErrUnsupportedProtocol)
	}
	if w.Mode == Append {
		return nil // blind appends commute with everything else
	}
	for v := base.Version + 1; v <= newer.Version; v++ {
		actions, err := t.readCommit(ctx, v)
		if err != nil {
			return err
		}
		for _, a := range actions {
			if a.Add != nil && a.Add.DataChange || a.Remove != nil && a.Remove.DataChange {
				return fmt.Errorf("delta table %s: version %d changed the files a %s write replaces: %w", t.Location(), v, strings.ToLower(w.Mode.String()), ErrConflict)
			}
		}
	}
	return nil
}

// writePlan is what a write needs to know of the table.
type writePlan struct {
	newTable         bool
	metadata         *Metadata // to commit: a new table, or new columns; else nil
	partitionColumns []string
	dataColumns      v1.Columns // columns stored in files: the write's minus partition columns
	dataIdx          []int      // position of each data column in the rows
	partCols         v1.Columns
	partIdx          []int
	columns          v1.Columns // the columns planned (a merge plans the table's)
	removes          []Add      // files a merge removes
}

// write returns w with the columns p was planned for, to plan it again.
func (p writePlan) write(w Write) Write {
	w.Columns = p.columns
	return w
}

func (t *Table) plan(snap *Snapshot, w Write) (writePlan, error) {
	p := writePlan{columns: w.Columns}
	for _, c := range w.Columns {
		if _, err := deltaType(c.Type); err != nil {
			return p, fmt.Errorf("delta table %s: column %q: %w", t.Location(), c.Name, err)
		}
	}
	if snap.Exists() {
		if snap.Protocol.MinWriterVersion > WriterVersion {
			return p, fmt.Errorf("delta table %s needs writer version %d, this writer implements %d: %w",
				t.Location(), snap.Protocol.MinWriterVersion, WriterVersion, ErrUnsupportedProtocol)
		}
		if w.Mode != Append && snap.Metadata.Configuration["delta.appendOnly"] == "true" {
			return p, fmt.Errorf("delta table %s is append-only (delta.appendOnly): a %s write removes files: %w", t.Location(), strings.ToLower(w.Mode.String()), ErrConflict)
		}
		p.partitionColumns = nonNilSlice(snap.Metadata.PartitionColumns)
		if w.PartitionColumns != nil && !slices.Equal(w.PartitionColumns, p.partitionColumns) {
			return p, &SchemaError{Table: t.Location(), Column: strings.Join(w.PartitionColumns, ","),
				TableType: fmt.Sprintf("partitioned by %q", p.partitionColumns), QueryType: fmt.Sprintf("partitioned by %q", w.PartitionColumns),
				Reason: "a table's partition columns cannot change; write to a new table"}
		}
		cols, err := snap.Columns()
		if err != nil {
			return p, fmt.Errorf("delta table %s: %w", t.Location(), err)
		}
		merged, added, err := mergeColumns(t.Location(), cols, w.Columns, rawTypes(snap.Metadata.SchemaString))
		if err != nil {
			return p, err
		}
		if added {
			schema, err := SchemaString(merged)
			if err != nil {
				return p, err
			}
			m := snap.Metadata
			m.SchemaString = schema
			p.metadata = &m
		}
	} else {
		p.newTable = true
		p.partitionColumns = nonNilSlice(w.PartitionColumns)
		schema, err := SchemaString(w.Columns)
		if err != nil {
			return p, err
		}
		p.metadata = &Metadata{
			ID:               uuid.NewString(),
			Format:           Format{Provider: "parquet", Options: map[string]string{}},
			SchemaString:     schema,
			PartitionColumns: p.partitionColumns,
			Configuration:    map[string]string{},
			CreatedTime:      t.opts.clock.Now().UnixMilli(),
		}
	}
	for _, pc := range p.partitionColumns {
		i := slices.IndexFunc(w.Columns, func(c v1.Column) bool { return c.Name == pc })
		if i < 0 {
			return p, &SchemaError{Table: t.Location(), Column: pc, TableType: "a partition column", QueryType: "missing",
				Reason: "every partition column must be an output column"}
		}
		p.partCols = append(p.partCols, w.Columns[i])
		p.partIdx = append(p.partIdx, i)
	}
	for i, c := range w.Columns {
		if !slices.Contains(p.partitionColumns, c.Name) {
			p.dataColumns = append(p.dataColumns, c)
			p.dataIdx = append(p.dataIdx, i)
		}
	}
	return p, nil
}

// writeFiles writes one Parquet file per partition (one file in all for an
// unpartitioned table; none for no rows), and with origins (one per row) one
// per partition and origin.
func (t *Table) writeFiles(ctx context.Context, p writePlan, rows []Row, origins []int) ([]Add, error) {
	type group struct {
		values map[string]*string
		dir    string
		rows   []Row
	}
	var groups []*group
	byDir := map[string]*group{}
	for r, row := range rows {
		if len(row) < len(p.dataIdx)+len(p.partIdx) {
			return nil, fmt.Errorf("delta table %s: row %d has %d values, want %d", t.Location(), r, len(row), len(p.dataIdx)+len(p.partIdx))
		}
		values := make(map[string]*string, len(p.partCols))
		var dir strings.Builder
		for i, c := range p.partCols {
			pv, err := formatPartitionValue(c.Type, row[p.partIdx[i]])
			if err != nil {
				return nil, fmt.Errorf("delta table %s: row %d, partition column %q: %w", t.Location(), r, c.Name, err)
			}
			values[c.Name] = pv
			seg := hiveDefaultPartition
			if pv != nil {
				seg = escapePartition(*pv)
			}
			dir.WriteString(escapePartition(c.Name) + "=" + seg + "/")
		}
		id := dir.String()
		if origins != nil {
			id += "\x00" + strconv.Itoa(origins[r])
		}
		g := byDir[id]
		if g == nil {
			g = &group{values: values, dir: dir.String()}
			byDir[id] = g
			groups = append(groups, g)
		}
		g.rows = append(g.rows, row)
	}
	adds := make([]Add, 0, len(groups))
	for i, g := range groups {
		data, stats, err := encodeDataFile(p.dataColumns, p.dataIdx, g.rows)
		if err != nil {
			t.deleteFiles(ctx, adds)
			return nil, fmt.Errorf("delta table %s: %w", t.Location(), err)
		}
		key := fmt.Sprintf("%spart-%05d-%s.c000.snappy.parquet", g.dir, i, uuid.NewString())
		if err := t.store.Create(ctx, key, data); err != nil {
			t.deleteFiles(ctx, adds)
			return nil, fmt.Errorf("delta table %s: write data file: %w", t.Location(), err)
		}
		adds = append(adds, Add{
			Path:             escapePath(key),
			PartitionValues:  g.values,
			Size:             int64(len(data)),
			ModificationTime: t.opts.clock.Now().UnixMilli(),
			DataChange:       true,
			Stats:            stats.encode(),
		})
	}
	return adds, nil
}

// actions builds the commit: protocol and metadata for a new table, new
// metadata for new columns, the txn, removes (complete mode), adds and
// commitInfo.
func (t *Table) actions(snap *Snapshot, w Write, p writePlan, files []Add) ([]Action, error) {
	now := t.opts.clock.Now().UnixMilli()
	var actions []Action
	if p.newTable {
		actions = append(actions, Action{Protocol: &Protocol{MinReaderVersion: ReaderVersion, MinWriterVersion: WriterVersion}})
	}
	if p.metadata != nil {
		actions = append(actions, Action{MetaData: p.metadata})
	}
	if w.AppID != "" {
		actions = append(actions, Action{Txn: &Txn{AppID: w.AppID, Version: w.Version, LastUpdated: now}})
	}
	removes := p.removes
	if w.Mode == Complete {
		removes = snap.Files()
	}
	for _, f := range removes {
		actions = append(actions, Action{Remove: &Remove{Path: f.Path, DeletionTimestamp: now, DataChange: true,
			ExtendedFileMetadata: true, PartitionValues: f.PartitionValues, Size: f.Size}})
	}
	for i := range files {
		actions = append(actions, Action{Add: &files[i]})
	}
	op := w.Operation
	if op == "" {
		op = "WRITE"
	}
	params := map[string]any{"mode": w.Mode.String()}
	for k, v := range w.OperationParameters {
		params[k] = v
	}
	info := map[string]any{
		"timestamp":           now,
		"operation":           op,
		"operationParameters": params,
		"isBlindAppend":       w.Mode == Append,
		"engineInfo":          t.opts.engineInfo,
	}
	if snap.Exists() {
		info["readVersion"] = snap.Version
	}
	actions = append(actions, Action{CommitInfo: info})
	return actions, nil
}

// deleteFiles removes data files no commit refers to (best effort: a
// leftover file is harmless, as readers go by the log).
func (t *Table) deleteFiles(ctx context.Context, files []Add) {
	for _, f := range files {
		_ = t.store.Delete(context.WithoutCancel(ctx), canonicalPath(f.Path))
	}
}

// escapePath URL-encodes a key for an add action's path: each segment is
// path-escaped, so the folder name "c=a%20b" becomes "c=a%2520b".
func escapePath(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// writeCheckpoint writes the checkpoint of s, then points _last_checkpoint
// at it unless it already names a newer one.
func (t *Table) writeCheckpoint(ctx context.Context, s *Snapshot) error {
	c := s.clone()
	c.expireTombstones(t.opts.clock.Now().Add(-t.opts.tombstoneRetention))
	data, last, err := encodeCheckpoint(c)
	if err != nil {
		return err
	}
	if err := t.store.Put(ctx, checkpointKey(s.Version), data); err != nil {
		return fmt.Errorf("delta table %s: write checkpoint %d: %w", t.Location(), s.Version, err)
	}
	if b, err := t.store.Get(ctx, lastCheckpointKey); err == nil {
		var old lastCheckpoint
		if json.Unmarshal(b, &old) == nil && old.Version > s.Version {
			return nil
		}
	}
	if err := t.store.Put(ctx, lastCheckpointKey, encodeLastCheckpoint(last)); err != nil {
		return fmt.Errorf("delta table %s: write _last_checkpoint: %w", t.Location(), err)
	}
	return nil
}

// Checkpoint writes a Delta checkpoint of the newest snapshot now.
func (t *Table) Checkpoint(ctx context.Context) error {
	s, err := t.Snapshot(ctx)
	if err != nil {
		return err
	}
	if !s.Exists() {
		return nil
	}
	return t.writeCheckpoint(ctx, s)
}
