package sink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/codec"
)

var (
	_ engine.Sink = (*Files)(nil)
)

// ManifestDir is the folder of the manifest log inside the output folder.
const ManifestDir = "_lockstep_manifest"

// FilesSpec describes the files sink for the registry and the docs.
func FilesSpec() engine.ComponentSpec {
	return engine.ComponentSpec{
		Summary: "Writes each batch as files in a folder (local or s3://) and lists them in a manifest log, " + ManifestDir + "/<query id>/<batch>; readers trust only the manifest.",
		Fields: []engine.FieldSpec{
			{Name: "path", Description: "the output folder: a local path, file:// URL or s3://bucket/prefix"},
			{Name: "format", Default: "parquet", Description: "parquet or json (one object per line)"},
		},
	}
}

// Files writes batches into a folder with a manifest log. It is used by one
// goroutine at a time.
type Files struct {
	folder  checkpoint.Store
	format  v1.FileFormat
	reached func(engine.Phase, int64)
	logger  *slog.Logger
}

// Manifest is one entry of the manifest log: the files of one committed
// batch.
type Manifest struct {
	Version int    `json:"version"`
	QueryID string `json:"queryId"`
	BatchID int64  `json:"batchId"`
	// BatchTime is the batch's timestamp; readers order batches by it.
	BatchTime time.Time     `json:"batchTime"`
	Format    v1.FileFormat `json:"format"`
	Columns   v1.Columns    `json:"columns"`
	Files     []DataFile    `json:"files"`
}

// DataFile is one data file of a batch.
type DataFile struct {
	// Path is relative to the output folder.
	Path  string `json:"path"`
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
}

// manifestVersion is the format of manifest entries this package writes.
const manifestVersion = 1

// NewFiles returns the files sink of spec. It opens the folder but writes
// nothing.
func NewFiles(ctx context.Context, spec *v1.Sink, env engine.SinkEnv) (engine.Sink, error) {
	f, err := OpenFiles(ctx, spec, env)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// OpenFiles is NewFiles for a runtime that writes the data files itself and
// commits them through the returned Files (Committed, then Commit): the spark
// runtime, whose Spark job writes the files and whose Go side commits them
// with this very manifest code.
func OpenFiles(_ context.Context, spec *v1.Sink, env engine.SinkEnv) (*Files, error) {
	if spec.Files == nil {
		return nil, errors.New("not a files sink")
	}
	format := spec.Files.Format
	if format == "" {
		format = v1.DefaultFilesSinkFormat
	}
	if format != v1.FormatJSON && format != v1.FormatParquet {
		return nil, fmt.Errorf("format %q: want parquet or json", format)
	}
	folder, err := env.Open(spec.Files.Path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", spec.Files.Path, err)
	}
	reached := env.Reached
	if reached == nil {
		reached = func(engine.Phase, int64) {}
	}
	logger := env.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Files{folder: folder, format: format, reached: reached, logger: logger}, nil
}

// Write writes the batch's rows to one data file (none for an empty batch)
// and commits them with the batch's manifest entry. A batch whose entry
// exists is not written again.
func (f *Files) Write(ctx context.Context, b *engine.Batch) error {
	return engine.WriteWhole(ctx, f, b)
}

var _ engine.ChunkWriter = (*Files)(nil)

// Open begins writing batch b a chunk at a time (engine.ChunkWriter): the
// rows are encoded as they come, and Commit writes the data file and the
// manifest entry. A batch whose entry exists is dropped.
func (f *Files) Open(ctx context.Context, b *engine.Batch) (engine.BatchWriter, error) {
	done, err := f.Committed(ctx, b.QueryID, b.ID)
	if err != nil {
		return nil, err
	}
	return &filesBatch{f: f, b: b, done: done}, nil
}

// filesBatch is one batch being written to a data file.
type filesBatch struct {
	f    *Files
	b    *engine.Batch
	done bool // committed before: nothing to write
	enc  *codec.Encoder
	rows int64
}

func (w *filesBatch) Write(_ context.Context, rows []engine.Row) error {
	if w.done || len(rows) == 0 {
		return nil
	}
	if w.enc == nil {
		enc, err := codec.NewEncoder(w.f.format, w.b.Columns)
		if err != nil {
			return err
		}
		w.enc = enc
	}
	w.rows += int64(len(rows))
	return w.enc.Write(rows)
}

func (w *filesBatch) Abort(context.Context) {}

// Commit writes the data file, if any row came, and the manifest entry.
func (w *filesBatch) Commit(ctx context.Context) error {
	if w.done {
		return nil
	}
	f, b := w.f, w.b
	m := Manifest{QueryID: b.QueryID, BatchID: b.ID, BatchTime: b.Time, Columns: b.Columns}
	if w.enc != nil {
		data, err := w.enc.Close()
		if err != nil {
			return err
		}
		name := DataFilePrefix(b.QueryID, b.ID, NewAttempt()) + "." + string(f.format)
		if err := f.folder.Put(ctx, name, data); err != nil {
			return err
		}
		m.Files = append(m.Files, DataFile{Path: name, Rows: w.rows, Bytes: int64(len(data))})
	}
	f.reached(engine.PhaseSinkWrite, b.ID)
	return f.Commit(ctx, m)
}

// Committed reports whether batch of the query queryID has its manifest
// entry: a batch that has is committed, and is not written again.
func (f *Files) Committed(ctx context.Context, queryID string, batch int64) (bool, error) {
	switch _, err := f.folder.Get(ctx, ManifestKey(queryID, batch)); {
	case err == nil:
		f.logger.Info("Skipped a batch already in the manifest", "batch", batch)
		return true, nil
	case !errors.Is(err, checkpoint.ErrNotFound):
		return false, fmt.Errorf("read manifest: %w", err)
	}
	return false, nil
}

// Commit commits a batch whose data files are written: it creates the
// manifest entry of (m.QueryID, m.BatchID), listing m.Files, if no entry
// exists (create-if-absent: a conditional PUT on S3). The version and the
// format are the sink's; m.Files may be empty (an empty batch). When another
// attempt committed the batch first, its files are the batch's: those of m
// that its entry does not name are deleted (best effort) and Commit returns
// nil.
func (f *Files) Commit(ctx context.Context, m Manifest) error {
	m.Version, m.Format = manifestVersion, f.format
	if m.Files == nil {
		m.Files = []DataFile{}
	}
	key := ManifestKey(m.QueryID, m.BatchID)
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	err = f.folder.Create(ctx, key, append(data, '\n'))
	if errors.Is(err, checkpoint.ErrExists) {
		// Another attempt committed the batch first: its files are the
		// batch's. Ours are orphans unless the entry names them (it is
		// ours after all), so delete only what it proves unreferenced.
		f.logger.Info("Found the batch committed by another attempt", "batch", m.BatchID)
		f.deleteUnreferenced(ctx, key, m.Files)
		return nil
	}
	if err != nil {
		return fmt.Errorf("commit batch %d: %w", m.BatchID, err)
	}
	return nil
}

// Delete deletes the data file at path (relative to the output folder),
// which no manifest entry lists: an empty file a runtime wrote.
func (f *Files) Delete(ctx context.Context, path string) error {
	return f.folder.Delete(ctx, path)
}

// deleteUnreferenced deletes the files of a failed attempt that the
// committed manifest entry at key does not name. When the entry cannot be
// read, it deletes nothing: a leftover file is harmless, readers go by the
// manifest, and a deleted referenced one would lose the batch.
func (f *Files) deleteUnreferenced(ctx context.Context, key string, files []DataFile) {
	data, err := f.folder.Get(ctx, key)
	var won Manifest
	if err == nil {
		err = json.Unmarshal(data, &won)
	}
	if err != nil {
		f.logger.Warn("Left the files of a failed attempt in place: could not read the committed manifest entry", "entry", key, "error", err)
		return
	}
	for _, df := range files {
		if !slices.ContainsFunc(won.Files, func(w DataFile) bool { return w.Path == df.Path }) {
			_ = f.folder.Delete(ctx, df.Path) // best effort: an orphan is harmless
		}
	}
}

// ManifestKey is the key, in the output folder, of the manifest entry of
// (queryID, batch).
func ManifestKey(queryID string, batch int64) string {
	return ManifestDir + "/" + queryID + "/" + checkpoint.BatchName(batch)
}

// DataFilePrefix is how the name of every data file of one attempt at
// writing batch of the query queryID begins: part-<query id>-<batch>-<attempt>.
// The built-in runtime adds the format's extension; a Spark job, its task's
// number and Spark's own extension.
func DataFilePrefix(queryID string, batch int64, attempt string) string {
	return "part-" + queryID + "-" + checkpoint.BatchName(batch) + "-" + attempt
}

// NewAttempt returns a random name for one attempt at writing a batch, so
// that two attempts never write the same data file.
func NewAttempt() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ReadManifest returns the manifest entries in folder, ordered by batch
// time, then query id and batch id.
func ReadManifest(ctx context.Context, folder checkpoint.Store) ([]Manifest, error) {
	objs, err := folder.List(ctx, ManifestDir+"/")
	if err != nil {
		return nil, err
	}
	var out []Manifest
	for _, o := range objs {
		if strings.HasPrefix(o.Key[strings.LastIndex(o.Key, "/")+1:], ".") {
			continue
		}
		data, err := folder.Get(ctx, o.Key)
		if err != nil {
			return nil, err
		}
		var m Manifest
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("read manifest entry %s: %w", o.Key, err)
		}
		if m.Version > manifestVersion {
			return nil, fmt.Errorf("read manifest entry %s: version %d is newer than %d", o.Key, m.Version, manifestVersion)
		}
		out = append(out, m)
	}
	slices.SortStableFunc(out, func(a, b Manifest) int {
		if c := a.BatchTime.Compare(b.BatchTime); c != 0 {
			return c
		}
		if c := strings.Compare(a.QueryID, b.QueryID); c != 0 {
			return c
		}
		return int(a.BatchID - b.BatchID)
	})
	return out, nil
}

// ReadRows returns the columns and rows of every committed batch in the
// output at folder, batch after batch as ReadManifest orders them. Files
// that no manifest entry lists are ignored.
func ReadRows(ctx context.Context, folder checkpoint.Store) (v1.Columns, []engine.Row, error) {
	ms, err := ReadManifest(ctx, folder)
	if err != nil {
		return nil, nil, err
	}
	return ManifestRows(ctx, folder, ms)
}

// ManifestRows returns the columns and rows of the batches ms lists (entries of ReadManifest,
// all or some) in the output at folder, in ms's order, each file checked against the row count
// its entry gives.
func ManifestRows(ctx context.Context, folder checkpoint.Store, ms []Manifest) (v1.Columns, []engine.Row, error) {
	var (
		cols v1.Columns
		rows []engine.Row
	)
	for _, m := range ms {
		if cols == nil {
			cols = m.Columns
		}
		dec := codec.NewDecoder(m.Columns)
		for _, df := range m.Files {
			data, err := folder.Get(ctx, df.Path)
			if err != nil {
				return nil, nil, fmt.Errorf("batch %d of query %s: %w", m.BatchID, m.QueryID, err)
			}
			var bad error
			got := dec.Decode(m.Format, data, func(mf codec.Malformed) {
				bad = fmt.Errorf("%s line %d: %s", df.Path, mf.Line, mf.Reason)
			})
			if bad != nil {
				return nil, nil, bad
			}
			if int64(len(got)) != df.Rows {
				return nil, nil, fmt.Errorf("%s holds %d rows; the manifest says %d", df.Path, len(got), df.Rows)
			}
			rows = append(rows, got...)
		}
	}
	return cols, rows, nil
}
