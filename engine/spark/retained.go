package spark

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/checkpoint/sparkckpt"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/engine/source"
	"github.com/lockstep-dev/lockstep/internal/storeconn"
)

// A rebuild replays Spark's committed batches from the sources (rebuild.go), so before it
// is offered or run the sources are asked whether they still hold that input, as the
// built-in engine asks its own (engine.Query.CheckRetained). The answer is the built-in
// sources' own check (one home for each source's retention logic); what Spark recorded is
// translated into what that check takes:
//
//   - files: Spark's file source log (sources/<source>/<n> and <n>.compact) lists the files
//     of each of its log batches, and offsets/<i> the log batch ({"logOffset":n}) query batch i
//     read up to; the files, as keys under the source's folder, per query batch, go to
//     source.Files.RetainedFiles.
//   - kafka: Spark's Kafka offsets ({"topic":{"partition":offset}}) are the built-in source's;
//     the starting offsets (sources/<source>/0) and batch N's end go to
//     kafka.Source.RetainedFrom.
//   - delta: Spark's Delta offset {"reservoirVersion":v,"index":i,"isStartingVersion":s} is
//     the built-in source's {"version":v,"index":i+1,"snapshot":s} (Spark's index is the last
//     file read, -1 for none; the built-in's the next to read); the start is startingVersion,
//     else the snapshot of the version the batches' offsets name while they read it. A batch 0
//     that read the whole snapshot and moved on does not say which version that was: then the
//     retention is unknown. Both go to delta.Source.RetainedFrom.

// CheckRetained asks the query's sources whether they still hold the input of Spark's batches
// 0 to batches-1, as sparkStore (one generation's Spark files: the location, or its
// generation-<n>/) recorded them: nil when every source does, an *engine.SourceLostError
// (an engine.ErrRebuildImpossible) saying what is gone (or an ErrRebuildImpossible saying
// that Spark's offsets log lacks a batch), or an error wrapping engine.ErrRetentionUnknown
// when a source could not find out. It writes nothing.
//
// Spark's offsets name the sources by position (offsets v1) or by name (v2); a position is
// the source's in the spec, as the runner's progress reports them (run.go).
func (q *Query) CheckRetained(ctx context.Context, sparkStore checkpoint.Store, batches int64) error {
	if batches <= 0 {
		return nil
	}
	log, err := sparkckpt.Batches(ctx, sparkStore)
	if err != nil {
		return fmt.Errorf("%w: read %s: %w", engine.ErrRetentionUnknown, sparkStore.Location(), err)
	}
	return q.checkRetained(ctx, sparkStore, log, batches)
}

// checkRetained is CheckRetained over log, Spark's offsets and commit logs as
// sparkckpt.Batches read them from sparkStore.
func (q *Query) checkRetained(ctx context.Context, sparkStore checkpoint.Store, log []sparkckpt.Batch, batches int64) error {
	if batches <= 0 {
		return nil
	}
	offs := make([]sparkckpt.Offsets, batches)
	have := make([]bool, batches)
	for _, b := range log {
		if b.Offsets != nil && b.ID >= 0 && b.ID < batches {
			offs[b.ID], have[b.ID] = *b.Offsets, true
		}
	}
	for i, ok := range have {
		if !ok { // as amendPlan says it
			return fmt.Errorf("%w: %w: Spark's offsets log in %s no longer holds batch %d (spark.sql.streaming.minBatchesToRetain purged it), so what it read is no longer recorded",
				engine.ErrRebuildImpossible, checkpoint.ErrNotReplayable, sparkStore.Location(), i)
		}
	}
	dirs, err := sourceDirs(ctx, sparkStore)
	if err != nil {
		return fmt.Errorf("%w: %w", engine.ErrRetentionUnknown, err)
	}
	for i := range q.spec.Sources {
		spec := &q.spec.Sources[i]
		if sparkSourceOffset(offs[batches-1], i, spec.Name) == nil {
			continue // the source read nothing yet
		}
		dir := "sources/" + SourceName(spec.Name) + "/"
		if !slices.Contains(dirs, SourceName(spec.Name)) {
			dir = "sources/" + strconv.Itoa(i) + "/" // a Spark job's that named no source (adopted)
		}
		r := retention{q: q, store: sparkStore, dir: dir, offs: offs, pos: i, spec: spec}
		err := r.check(ctx)
		switch {
		case err == nil:
		case errors.Is(err, engine.ErrRetentionUnknown):
			return fmt.Errorf("source %s: %w", spec.Name, err)
		default:
			return &engine.SourceLostError{Source: spec.Name, Batches: batches, Err: err}
		}
	}
	return nil
}

// errNotRecorded is the unknown retention of a source whose Spark files do not record what
// the check needs: asking again will not tell, so the rebuild replays without the answer
// (checkBeforeReplay), and Spark stops with its own error if the input is gone.
var errNotRecorded = fmt.Errorf("%w on the spark runtime", engine.ErrRetentionUnknown)

// checkBeforeReplay is the rebuild's check before it replays anything: CheckRetained, with a
// retention that Spark's files cannot tell (errNotRecorded) logged and let through.
func (q *Query) checkBeforeReplay(ctx context.Context, sparkStore checkpoint.Store, log []sparkckpt.Batch, batches int64) error {
	err := q.checkRetained(ctx, sparkStore, log, batches)
	if errors.Is(err, errNotRecorded) {
		q.opts.Logger.Warn("Rebuilding without knowing whether the sources still hold the input", "reason", err)
		return nil
	}
	return err
}

// sourceDirs lists the folders under sources/ in store.
func sourceDirs(ctx context.Context, store checkpoint.Store) ([]string, error) {
	keys, err := checkpoint.ListKeys(ctx, store, "sources/")
	if err != nil {
		return nil, fmt.Errorf("list %s/sources: %w", store.Location(), err)
	}
	var dirs []string
	for _, k := range keys {
		if d, _, ok := strings.Cut(strings.TrimPrefix(k, "sources/"), "/"); ok && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs, nil
}

// sparkSourceOffset is the offset that o records of the spec's source pos, called name; nil
// when it records none.
func sparkSourceOffset(o sparkckpt.Offsets, pos int, name string) json.RawMessage {
	for _, so := range o.Sources {
		if so.ID == strconv.Itoa(pos) || o.Version != 1 && so.ID == SourceName(name) {
			if len(so.Offset) == 0 || string(so.Offset) == "null" {
				return nil
			}
			return so.Offset
		}
	}
	return nil
}

// retention checks one source.
type retention struct {
	q     *Query
	store checkpoint.Store
	// dir is the source's own log in store: sources/<name>/.
	dir  string
	offs []sparkckpt.Offsets
	pos  int
	spec *v1.Source
}

func (r retention) check(ctx context.Context) error {
	switch r.spec.Kind() {
	case v1.SourceFiles:
		return r.files(ctx)
	case v1.SourceKafka:
		return r.kafka(ctx)
	case v1.SourceDelta:
		return r.delta(ctx)
	}
	return nil // regenerated input (Spark refuses the rate and Nexmark sources anyway)
}

// env is what the built-in source's constructor needs: its folder in the checkpoint is
// Spark's log of the source, which it only reads.
func (r retention) env() engine.SourceEnv {
	spec := r.spec
	return engine.SourceEnv{Name: spec.Name, Store: checkpoint.Sub(r.store, r.dir),
		Open: func(location string) (checkpoint.Store, error) {
			st, err := storeconn.Resolve(os.Getenv, storeconn.From{Conn: spec.S3Connection(), Name: spec.Name})
			if err != nil {
				return nil, fmt.Errorf("open %s: %w", location, err)
			}
			return s3.OpenFolder(location, s3.WithSettings(st), s3.ReadOnly())
		},
		Logger: r.q.opts.Logger.With("source", spec.Name), Getenv: os.Getenv, Wake: func() {}}
}

// files checks that every file Spark's file source log lists for the batches is still in the
// source's folder.
func (r retention) files(ctx context.Context) error {
	entries, err := r.fileSourceLog(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", engine.ErrRetentionUnknown, err)
	}
	folder := strings.TrimSuffix(sparkckpt.LockstepLocation(sparkckpt.HadoopLocation(r.spec.Files.Path)), "/") + "/"
	var read []source.BatchFiles
	prev := int64(-1) // the log batch the batch before read up to
	for i, o := range r.offs {
		off := sparkSourceOffset(o, r.pos, r.spec.Name)
		if off == nil {
			continue
		}
		var fo struct {
			LogOffset int64 `json:"logOffset"`
		}
		if err := json.Unmarshal(off, &fo); err != nil {
			return fmt.Errorf("%w: offsets/%d: the files source's offset %s: %w", engine.ErrRetentionUnknown, i, off, err)
		}
		bf := source.BatchFiles{Batch: int64(i)}
		for lb := prev + 1; lb <= fo.LogOffset; lb++ {
			paths, ok := entries[lb]
			if !ok {
				return fmt.Errorf("%w: Spark's file source log in %s/%s no longer lists the files of its batch %d", engine.ErrRetentionUnknown, r.store.Location(), strings.TrimSuffix(r.dir, "/"), lb)
			}
			for _, p := range paths {
				key, ok := strings.CutPrefix(sparkckpt.LockstepLocation(p), folder)
				if !ok {
					return fmt.Errorf("%w: Spark's file source log lists %s, which is not under the source's folder %s", engine.ErrRetentionUnknown, p, r.spec.Files.Path)
				}
				if k, err := url.PathUnescape(key); err == nil {
					key = k // Spark writes each path as a URI
				}
				bf.Paths = append(bf.Paths, key)
			}
		}
		prev = max(prev, fo.LogOffset)
		read = append(read, bf)
	}
	src, err := source.NewFiles(ctx, r.spec, r.env())
	if err != nil {
		return fmt.Errorf("%w: %w", engine.ErrRetentionUnknown, err)
	}
	return src.(*source.Files).RetainedFiles(ctx, read)
}

// fileSourceLog reads Spark's file source log of the source: the paths of each of its
// batches. The newest <n>.compact holds every batch up to n; older batch files may be gone.
func (r retention) fileSourceLog(ctx context.Context) (map[int64][]string, error) {
	keys, err := checkpoint.ListKeys(ctx, r.store, r.dir)
	if err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", r.store.Location(), r.dir, err)
	}
	out := map[int64][]string{}
	seen := map[string]bool{}
	for _, k := range keys {
		name := strings.TrimPrefix(k, r.dir)
		if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".crc") || strings.Contains(name, "/") {
			continue
		}
		if _, err := strconv.ParseInt(strings.TrimSuffix(name, ".compact"), 10, 64); err != nil {
			continue
		}
		data, err := r.store.Get(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("read %s/%s: %w", r.store.Location(), k, err)
		}
		entries, err := sparkckpt.ParseFileSourceLog(k, data)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if !seen[e.Path] {
				seen[e.Path] = true
				out[e.BatchID] = append(out[e.BatchID], e.Path)
			}
		}
	}
	return out, nil
}

// kafka checks that every partition still holds what the batches read: from Spark's starting
// offsets (sources/<source>/0) to the newest batch's end.
func (r retention) kafka(ctx context.Context) error {
	key := r.dir + "0"
	data, err := r.store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("%w: the Kafka source's starting offsets: read %s/%s: %w", engine.ErrRetentionUnknown, r.store.Location(), key, err)
	}
	initial, err := sparkckpt.ParseKafkaInitialOffsets(key, data)
	if err != nil {
		return fmt.Errorf("%w: %w", engine.ErrRetentionUnknown, err)
	}
	start, err := json.Marshal(initial)
	if err != nil {
		return err
	}
	end := sparkSourceOffset(r.offs[len(r.offs)-1], r.pos, r.spec.Name)
	src, err := kafka.NewSource(ctx, r.spec, r.env())
	if err != nil {
		return fmt.Errorf("%w: %w", engine.ErrRetentionUnknown, err)
	}
	if c, ok := src.(io.Closer); ok {
		defer c.Close()
	}
	return src.(*kafka.Source).RetainedFrom(ctx, start, end)
}

// sparkDeltaOffset is Spark's Delta source offset.
type sparkDeltaOffset struct {
	ReservoirVersion  int64 `json:"reservoirVersion"`
	Index             int64 `json:"index"`
	IsStartingVersion bool  `json:"isStartingVersion"`
}

// delta checks that the table still holds every commit and data file the batches read, from
// the source's start to the newest batch's end.
func (r retention) delta(ctx context.Context) error {
	var start []byte
	if v := r.spec.Delta.StartingVersion; v != nil {
		start = fmt.Appendf(nil, `{"version":%d}`, *v)
	}
	var end sparkDeltaOffset
	for i, o := range r.offs {
		off := sparkSourceOffset(o, r.pos, r.spec.Name)
		if off == nil {
			continue
		}
		var d sparkDeltaOffset
		if err := json.Unmarshal(off, &d); err != nil {
			return fmt.Errorf("%w: offsets/%d: the Delta source's offset %s: %w", engine.ErrRetentionUnknown, i, off, err)
		}
		if start == nil && d.IsStartingVersion {
			start = fmt.Appendf(nil, `{"version":%d,"index":0,"snapshot":true}`, d.ReservoirVersion)
		}
		end = d
	}
	if start == nil {
		return fmt.Errorf("%w: the batches read the whole starting snapshot in batch 0, and Spark's Delta offsets do not record the version it was of, so which data files a rebuild reads again is not known", errNotRecorded)
	}
	stop := fmt.Appendf(nil, `{"version":%d,"index":%d,"snapshot":%t}`, end.ReservoirVersion, end.Index+1, end.IsStartingVersion)
	src, err := delta.NewSource(ctx, r.spec, r.env())
	if err != nil {
		return fmt.Errorf("%w: %w", engine.ErrRetentionUnknown, err)
	}
	if c, ok := src.(io.Closer); ok {
		defer c.Close()
	}
	return src.(*delta.Source).RetainedFrom(ctx, start, stop)
}
