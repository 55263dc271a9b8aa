package source

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/codec"
)

var (
	_ engine.Source             = (*Files)(nil)
	_ engine.AvailableNowSource = (*Files)(nil)
	_ engine.PurgingSource      = (*Files)(nil)
	_ engine.RetainingSource    = (*Files)(nil)
)

// ErrMalformed marks the error of a record that does not parse when the
// source's onMalformed is fail.
var ErrMalformed = errors.New("malformed record")

// FilesSpec describes the files source for the registry and the docs.
func FilesSpec() engine.ComponentSpec {
	return engine.ComponentSpec{
		Summary: "Reads new files under a local folder or an s3:// prefix, oldest first by modification time, then by name. " +
			"A seen-files log in the checkpoint remembers which files were read; files whose name or folder starts with . or _ are ignored.",
		Fields: []engine.FieldSpec{
			{Name: "path", Description: "the folder: a local path, file:// URL or s3://bucket/prefix"},
			{Name: "format", Description: "json (one object per line), csv (schema order, no header) or parquet"},
			{Name: "maxFilesPerTrigger", Default: "no cap", Description: "the most files one batch reads (ignored by the once trigger)"},
			{Name: "onMalformed", Default: "fail", Description: "fail, skip or deadLetter"},
		},
	}
}

// Files reads new files under a folder. Its offset is the number of the
// newest batch whose files it has handed out ({"logOffset": N}, -1 before
// the first). Plan records the files of batch N in the checkpoint, at
// sources/<name>/files/<N>, before the offsets log entry is written; a run
// that finds such a record for the batch it plans (its predecessor died
// before writing offsets/N) takes the same files again.
//
// Files are identified by their path under the folder: a file rewritten in
// place is not read again. A Files is used by one goroutine at a time.
type Files struct {
	name    string
	queryID string
	spec    v1.FilesSource
	policy  v1.MalformedPolicy
	folder  checkpoint.Store
	dead    checkpoint.Store // nil unless onMalformed is deadLetter
	store   checkpoint.Store
	dec     *codec.Decoder

	loaded bool
	// seen holds every file handed out (all retained log entries and the
	// newest compaction).
	seen map[string]bool
	// entries holds the batches that have a log entry.
	entries map[int64]bool
	// bound, when set (availableNow), holds the only files Plan may hand out.
	bound map[string]bool
}

// Keys under the source's checkpoint folder.
const (
	filesLogDir = "files/"
	compactDir  = "compact/"
)

// fileEntry is one line of a seen-files log entry.
type fileEntry struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	MtimeMs int64  `json:"mtimeMs"`
}

type filesOffset struct {
	LogOffset int64 `json:"logOffset"`
}

// NewFiles returns the files source of spec. It opens the folder and the
// dead-letter folder but reads nothing.
func NewFiles(_ context.Context, spec *v1.Source, env engine.SourceEnv) (engine.Source, error) {
	if spec.Files == nil {
		return nil, errors.New("not a files source")
	}
	if spec.Schema == nil {
		return nil, errors.New("a files source needs a schema")
	}
	folder, err := env.Open(spec.Files.Path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", spec.Files.Path, err)
	}
	f := &Files{
		name:    env.Name,
		queryID: env.QueryID,
		spec:    *spec.Files,
		policy:  spec.OnMalformed,
		folder:  folder,
		store:   env.Store,
		dec:     codec.NewDecoder(spec.Schema.Columns),
	}
	if f.policy == "" {
		f.policy = v1.MalformedFail
	}
	if f.policy == v1.MalformedDeadLetter {
		if f.dead, err = env.Open(spec.DeadLetterPath); err != nil {
			return nil, fmt.Errorf("open dead-letter folder %s: %w", spec.DeadLetterPath, err)
		}
	}
	return f, nil
}

// PrepareAvailableNow fixes the files the run may read: those in the folder
// now.
func (f *Files) PrepareAvailableNow(ctx context.Context, _ time.Time) error {
	if err := f.load(ctx); err != nil {
		return err
	}
	objs, err := f.folder.List(ctx, "")
	if err != nil {
		return err
	}
	f.bound = map[string]bool{}
	for _, o := range checkpoint.Visible(objs) {
		f.bound[o.Key] = true
	}
	return nil
}

// Plan hands out the files not seen yet, oldest first by modification time
// then by name, at most maxFilesPerTrigger of them when req.Limit is set.
func (f *Files) Plan(ctx context.Context, req engine.PlanRequest) (engine.Planned, error) {
	if err := f.load(ctx); err != nil {
		return engine.Planned{}, err
	}
	start, err := parseFiles(req.Start)
	if err != nil {
		return engine.Planned{}, err
	}
	here := func() engine.Planned {
		end, _ := json.Marshal(filesOffset{LogOffset: start})
		return engine.Planned{End: end}
	}
	if start >= req.Batch {
		return engine.Planned{}, fmt.Errorf("files offset %d is not before batch %d: the seen-files log does not match the offsets log", start, req.Batch)
	}
	if f.entries[req.Batch] {
		// Planned by a run that died before writing offsets/N: take the
		// same files again.
		return f.planned(req.Batch, nil), nil
	}
	objs, err := f.folder.List(ctx, "")
	if err != nil {
		return engine.Planned{}, err
	}
	var fresh []checkpoint.ObjectInfo
	for _, o := range checkpoint.Visible(objs) {
		if !f.seen[o.Key] && (f.bound == nil || f.bound[o.Key]) {
			fresh = append(fresh, o)
		}
	}
	if len(fresh) == 0 {
		return here(), nil
	}
	slices.SortFunc(fresh, func(a, b checkpoint.ObjectInfo) int {
		return cmp.Or(a.ModTime.Compare(b.ModTime), strings.Compare(a.Key, b.Key))
	})
	take := fresh
	if max := f.spec.MaxFilesPerTrigger; req.Limit && max != nil && int(*max) < len(fresh) {
		take = fresh[:*max]
	}
	var buf bytes.Buffer
	for _, o := range take {
		line, _ := json.Marshal(fileEntry{Path: o.Key, Size: o.Size, MtimeMs: o.ModTime.UnixMilli()})
		buf.Write(line)
		buf.WriteByte('\n')
	}
	key := filesLogDir + checkpoint.BatchName(req.Batch)
	err = f.store.Create(ctx, key, buf.Bytes())
	if errors.Is(err, checkpoint.ErrExists) {
		// Another engine planned this batch first; its choice stands, and
		// the offsets log decides which engine goes on.
		data, err := f.store.Get(ctx, key)
		if err != nil {
			return engine.Planned{}, fmt.Errorf("read seen-files entry %s: %w", key, err)
		}
		entries, err := parseEntries(data)
		if err != nil {
			return engine.Planned{}, fmt.Errorf("read seen-files entry %s: %w", key, err)
		}
		f.remember(req.Batch, entries)
		return f.planned(req.Batch, nil), nil
	}
	if err != nil {
		return engine.Planned{}, fmt.Errorf("record the files of batch %d: %w", req.Batch, err)
	}
	for _, o := range take {
		f.seen[o.Key] = true
	}
	f.entries[req.Batch] = true
	lag := int64(len(fresh) - len(take))
	return f.planned(req.Batch, &lag), nil
}

func (f *Files) planned(batch int64, lag *int64) engine.Planned {
	end, _ := json.Marshal(filesOffset{LogOffset: batch})
	return engine.Planned{End: end, HasData: true, Backlog: engine.Backlog{Lag: lag}}
}

// Read reads the files that Plan recorded for the batch req.End names. A
// batch's range (start, end] holds exactly one log entry, the end's: each
// batch records at most one, its own.
func (f *Files) Read(ctx context.Context, req engine.ReadRequest) (engine.ReadResult, error) {
	start, err := parseFiles(req.Start)
	if err != nil {
		return engine.ReadResult{}, err
	}
	end, err := parseFiles(req.End)
	if err != nil {
		return engine.ReadResult{}, err
	}
	if end <= start {
		return engine.ReadResult{}, nil
	}
	key := filesLogDir + checkpoint.BatchName(end)
	data, err := f.store.Get(ctx, key)
	if err != nil {
		return engine.ReadResult{}, fmt.Errorf("read seen-files entry: %w", err)
	}
	entries, err := parseEntries(data)
	if err != nil {
		return engine.ReadResult{}, fmt.Errorf("read seen-files entry %s: %w", key, err)
	}
	var (
		res  engine.ReadResult
		dead bytes.Buffer
	)
	for _, e := range entries {
		data, err := f.folder.Get(ctx, e.Path)
		if err != nil {
			return engine.ReadResult{}, fmt.Errorf("read %s (the files of batch %d must stay until the batch is committed): %w", e.Path, req.Batch, err)
		}
		var failed error
		rows := f.dec.Decode(f.spec.Format, data, func(m codec.Malformed) {
			if failed != nil {
				return
			}
			switch f.policy {
			case v1.MalformedSkip:
				res.Malformed++
			case v1.MalformedDeadLetter:
				res.Malformed++
				line, _ := json.Marshal(deadLetter{Source: f.name, File: f.fileName(e.Path), Line: m.Line, Error: m.Reason, Record: m.Record})
				dead.Write(line)
				dead.WriteByte('\n')
			default:
				where := f.fileName(e.Path)
				if m.Line > 0 {
					where = fmt.Sprintf("%s line %d", where, m.Line)
				}
				failed = fmt.Errorf("%w in %s: %s (onMalformed: fail; use skip or deadLetter to go on)", ErrMalformed, where, m.Reason)
			}
		})
		if failed != nil {
			return engine.ReadResult{}, failed
		}
		res.Rows = append(res.Rows, rows...)
	}
	if dead.Len() > 0 {
		key := fmt.Sprintf("%s/%s/%s.jsonl", f.queryID, f.name, checkpoint.BatchName(req.Batch))
		if err := f.dead.Put(ctx, key, dead.Bytes()); err != nil {
			return engine.ReadResult{}, fmt.Errorf("write dead letters: %w", err)
		}
	}
	return res, nil
}

// deadLetter is one line of a dead-letter file.
type deadLetter struct {
	Source string `json:"source"`
	File   string `json:"file"`
	Line   int64  `json:"line,omitempty"`
	Error  string `json:"error"`
	Record string `json:"record,omitempty"`
}

// fileName names a file of the folder for messages.
func (f *Files) fileName(key string) string { return f.folder.Location() + "/" + key }

// Purge compacts the seen-files log entries of batches before oldest into
// compact/<oldest>, then deletes them and older compactions. A crash at any
// point leaves every file recorded in a retained entry or compaction.
func (f *Files) Purge(ctx context.Context, oldest int64) error {
	if err := f.load(ctx); err != nil {
		return err
	}
	keys, err := checkpoint.ListKeys(ctx, f.store, filesLogDir)
	if err != nil {
		return err
	}
	var old []string
	for _, k := range keys {
		if b, ok := checkpoint.ParseBatchName(strings.TrimPrefix(k, filesLogDir)); ok && b < oldest {
			old = append(old, k)
		}
	}
	if len(old) == 0 {
		return nil
	}
	compacts, err := checkpoint.ListKeys(ctx, f.store, compactDir)
	if err != nil {
		return err
	}
	var all []fileEntry
	for _, k := range append(compacts[max(len(compacts)-1, 0):], old...) {
		data, err := f.store.Get(ctx, k)
		if err != nil {
			return err
		}
		entries, err := parseEntries(data)
		if err != nil {
			return fmt.Errorf("read %s: %w", k, err)
		}
		all = append(all, entries...)
	}
	var buf bytes.Buffer
	for _, e := range all {
		line, _ := json.Marshal(e)
		buf.Write(line)
		buf.WriteByte('\n')
	}
	if err := f.store.Put(ctx, compactDir+checkpoint.BatchName(oldest), buf.Bytes()); err != nil {
		return err
	}
	for _, k := range append(old, compacts...) {
		if k == compactDir+checkpoint.BatchName(oldest) {
			continue
		}
		if err := f.store.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// Retained checks that every file the batches up to end read is still in the folder
// (engine.RetainingSource): a rebuild reads them again.
func (f *Files) Retained(ctx context.Context, end engine.Offset) error {
	last, err := parseFiles(end)
	if err != nil {
		return err
	}
	keys, err := checkpoint.ListKeys(ctx, f.store, filesLogDir)
	if err != nil {
		return fmt.Errorf("%w: read seen-files log: %w", engine.ErrRetentionUnknown, err)
	}
	var read []BatchFiles
	for _, k := range keys {
		b, ok := checkpoint.ParseBatchName(strings.TrimPrefix(k, filesLogDir))
		if !ok || b > last {
			continue
		}
		data, err := f.store.Get(ctx, k)
		if err != nil {
			return fmt.Errorf("%w: read seen-files entry %s: %w", engine.ErrRetentionUnknown, k, err)
		}
		entries, err := parseEntries(data)
		if err != nil {
			return fmt.Errorf("%w: read seen-files entry %s: %w", engine.ErrRetentionUnknown, k, err)
		}
		bf := BatchFiles{Batch: b}
		for _, e := range entries {
			bf.Paths = append(bf.Paths, e.Path)
		}
		read = append(read, bf)
	}
	return f.RetainedFiles(ctx, read)
}

// BatchFiles is what one batch of a files source read: the files' paths under its folder.
type BatchFiles struct {
	Batch int64
	Paths []string
}

// RetainedFiles checks that every file of read is still in the folder: Retained's check, for
// the files a log other than the seen-files log lists (the Spark runtime's, whose file source
// keeps its own; engine/spark).
func (f *Files) RetainedFiles(ctx context.Context, read []BatchFiles) error {
	present := map[string]bool{}
	listed := false
	for _, bf := range read {
		if !listed && len(bf.Paths) > 0 {
			objs, err := f.folder.List(ctx, "")
			if err != nil {
				return fmt.Errorf("%w: list %s: %w", engine.ErrRetentionUnknown, f.folder.Location(), err)
			}
			for _, o := range objs {
				present[o.Key] = true
			}
			listed = true
		}
		for _, p := range bf.Paths {
			if !present[p] {
				return fmt.Errorf("the file %s that batch %d read is gone", f.fileName(p), bf.Batch)
			}
		}
	}
	return nil
}

// load reads the seen-files log once: the newest compaction and every
// retained entry.
func (f *Files) load(ctx context.Context) error {
	if f.loaded {
		return nil
	}
	f.seen, f.entries = map[string]bool{}, map[int64]bool{}
	compacts, err := checkpoint.ListKeys(ctx, f.store, compactDir)
	if err != nil {
		return fmt.Errorf("read seen-files log: %w", err)
	}
	keys, err := checkpoint.ListKeys(ctx, f.store, filesLogDir)
	if err != nil {
		return fmt.Errorf("read seen-files log: %w", err)
	}
	if len(compacts) > 0 {
		keys = append(keys, compacts[len(compacts)-1])
	}
	for _, k := range keys {
		data, err := f.store.Get(ctx, k)
		if errors.Is(err, checkpoint.ErrNotFound) {
			continue // purged since the listing
		}
		if err != nil {
			return fmt.Errorf("read seen-files log: %w", err)
		}
		entries, err := parseEntries(data)
		if err != nil {
			return fmt.Errorf("read seen-files entry %s: %w", k, err)
		}
		b := int64(-1)
		if n, ok := checkpoint.ParseBatchName(strings.TrimPrefix(k, filesLogDir)); ok && strings.HasPrefix(k, filesLogDir) {
			b = n
		}
		f.remember(b, entries)
	}
	f.loaded = true
	return nil
}

func (f *Files) remember(batch int64, entries []fileEntry) {
	for _, e := range entries {
		f.seen[e.Path] = true
	}
	if batch >= 0 {
		f.entries[batch] = true
	}
}

func parseEntries(data []byte) ([]fileEntry, error) {
	var out []fileEntry
	for line := range bytes.Lines(data) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e fileEntry
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("%w: %w", checkpoint.ErrDamaged, err)
		}
		out = append(out, e)
	}
	return out, nil
}

func parseFiles(o engine.Offset) (int64, error) {
	if len(o) == 0 {
		return -1, nil
	}
	var off filesOffset
	if err := json.Unmarshal(o, &off); err != nil {
		return 0, fmt.Errorf("files offset %s: %w", o, err)
	}
	return off.LogOffset, nil
}
