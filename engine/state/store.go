package state

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

// DefaultSnapshotEvery is how many deltas a partition piles up before the
// store writes a snapshot of it (Spark's stateStore.minDeltasForSnapshot).
const DefaultSnapshotEvery = 10

// entryOverhead approximates the memory a key costs beyond its bytes: the
// map slot (string and slice headers, control byte, load factor) and the
// allocator's rounding. BenchmarkMemoryPerKey measures the real figure.
const entryOverhead = 112

// Options configure a Store.
type Options struct {
	// Partitions is the number of partitions keys are hashed into. It must
	// match the checkpoint's pinned value; required.
	Partitions int
	// SnapshotEvery is how many deltas a partition piles up before a
	// snapshot of it is written. Default DefaultSnapshotEvery.
	SnapshotEvery int
	// Concurrency bounds the parallel requests to the checkpoint store and
	// the goroutines of Update. Default: Partitions, at most 32.
	Concurrency int
	// Logger receives snapshot failures (they are retried later, so they
	// are not errors). Default: discard.
	Logger *slog.Logger
}

// Store is the versioned state of one stateful operator. Open returns it;
// Load, Update and Commit process a batch; Close stops its snapshot
// goroutine. Its methods are called from one goroutine at a time.
type Store struct {
	cs    checkpoint.Store
	meta  Metadata
	opts  Options
	parts []*Partition
	// version is the version the partitions hold; -1 before Load.
	version int64
	// broken is set when a Commit failed half-way: the partitions no longer
	// match any version until the next Load.
	broken bool
	snap   *snapshotter
}

// Partition is one partition of a Store: a map from keys to values. Values
// handed to Put belong to the partition afterwards, and values returned by
// Get must not be modified.
type Partition struct {
	id   int
	mu   sync.Mutex
	rows map[string][]byte
	// dirty holds this batch's changes: a key's new value, or removed.
	dirty map[string]change
	bytes int64
	// Hint is kept for the operator and never read by the store: Load sets
	// it to math.MinInt64 and nothing else touches it. Operators use it for
	// a lower bound on their keys (such as the oldest event time) to skip
	// scans, and its reset to tell that the partition was loaded again (an
	// aggregate's eviction index is then listed afresh).
	Hint int64
	// sinceSnapshot counts the deltas after the newest snapshot.
	sinceSnapshot int
	// pending is a snapshot scheduled but not yet encoded.
	pending *snapJob
	// updated and removed count this batch's changes.
	updated, removed int64
}

// change is a key's change in a batch: its new value, or its removal.
type change struct {
	value   []byte
	removed bool
}

// Open opens the state of operator meta.Operator in the checkpoint store cs:
// it records meta in state/<op>/_metadata, or checks it against the recorded
// one (ErrIncompatible when they differ). The Store holds no state until
// Load. Open starts a goroutine that writes snapshots; Close stops it. ctx
// bounds that goroutine's requests as well.
func Open(ctx context.Context, cs checkpoint.Store, meta Metadata, opts Options) (*Store, error) {
	if opts.Partitions < 1 {
		return nil, fmt.Errorf("open state %s: %d partitions, want at least 1", meta.Operator, opts.Partitions)
	}
	if meta.Operator == "" || strings.Contains(meta.Operator, "/") {
		return nil, fmt.Errorf("open state: invalid operator name %q", meta.Operator)
	}
	if opts.SnapshotEvery < 1 {
		opts.SnapshotEvery = DefaultSnapshotEvery
	}
	if opts.Concurrency < 1 {
		opts.Concurrency = min(opts.Partitions, 32)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	meta.Partitions = opts.Partitions
	if err := writeMetadata(ctx, cs, meta); err != nil {
		return nil, fmt.Errorf("open state %s: %w", meta.Operator, err)
	}
	s := &Store{cs: cs, meta: meta, opts: opts, version: -1}
	for i := range opts.Partitions {
		s.parts = append(s.parts, &Partition{id: i, rows: map[string][]byte{}, dirty: map[string]change{}, Hint: math.MinInt64})
	}
	s.snap = startSnapshotter(ctx, s, 2*opts.Partitions)
	return s, nil
}

// Metadata returns the operator's metadata as Open recorded it.
func (s *Store) Metadata() Metadata { return s.meta }

// Version returns the version the store holds: the batch it serves next.
// It is -1 before the first Load.
func (s *Store) Version() int64 { return s.version }

// PartitionOf returns the partition of key among n partitions: xxHash64 of
// the key modulo n. It never changes: the checkpoint depends on it.
func PartitionOf(key []byte, n int) int { return int(xxhash.Sum64(key) % uint64(n)) }

// Partitions returns the number of partitions.
func (s *Store) Partitions() int { return len(s.parts) }

// Partition returns partition i. Outside Update, only the goroutine using
// the Store may use it.
func (s *Store) Partition(i int) *Partition { return s.parts[i] }

// Load makes the store hold version: for each partition, the newest
// snapshot at or before version and the deltas after it. Files newer than
// version are deleted first: they were written by a batch that was never
// committed, which is about to run again. Partitions load in parallel.
func (s *Store) Load(ctx context.Context, version int64) error {
	if version < 0 {
		return fmt.Errorf("load state %s: version %d", s.meta.Operator, version)
	}
	s.snap.flush()
	files, err := s.files(ctx)
	if err != nil {
		return fmt.Errorf("load state %s version %d: %w", s.meta.Operator, version, err)
	}
	for p, fs := range files {
		if p >= len(s.parts) {
			return fmt.Errorf("load state %s: %w: partition %d of %d", s.meta.Operator, checkpoint.ErrDamaged, p, len(s.parts))
		}
		for i := len(fs) - 1; i >= 0 && fs[i].Version > version; i-- {
			if err := s.cs.Delete(ctx, fs[i].Key()); err != nil {
				return fmt.Errorf("load state %s: delete uncommitted %s: %w", s.meta.Operator, fs[i].Key(), err)
			}
		}
	}
	err = s.parallel(ctx, func(ctx context.Context, p *Partition) error {
		return s.loadPartition(ctx, p, files[p.id], version)
	})
	if err != nil {
		s.broken = true
		return fmt.Errorf("load state %s version %d: %w", s.meta.Operator, version, err)
	}
	s.version, s.broken = version, false
	return nil
}

// files lists the operator's state files by partition, each list in version
// order, deltas before the snapshot of the same version.
func (s *Store) files(ctx context.Context) (map[int][]checkpoint.StateFile, error) {
	keys, err := checkpoint.ListKeys(ctx, s.cs, checkpoint.StateDir+s.meta.Operator+"/")
	if err != nil {
		return nil, err
	}
	out := map[int][]checkpoint.StateFile{}
	for _, k := range keys {
		if f, ok := checkpoint.ParseStateFile(k); ok && f.Operator == s.meta.Operator {
			out[f.Partition] = append(out[f.Partition], f)
		}
	}
	for _, fs := range out {
		slices.SortFunc(fs, func(a, b checkpoint.StateFile) int {
			if c := cmp.Compare(a.Version, b.Version); c != 0 {
				return c
			}
			return strings.Compare(string(a.Kind), string(b.Kind))
		})
	}
	return out, nil
}

func (s *Store) loadPartition(ctx context.Context, p *Partition, files []checkpoint.StateFile, version int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = nil
	start := -1 // index of the newest snapshot at or before version
	for i, f := range files {
		if f.Version <= version && f.Kind == checkpoint.StateSnapshot {
			start = i
		}
	}
	p.rows, p.dirty, p.bytes, p.Hint, p.sinceSnapshot = nil, map[string]change{}, 0, math.MinInt64, 0
	p.updated, p.removed = 0, 0
	var load []checkpoint.StateFile
	after := int64(-1) // deltas at or before it are in the snapshot
	if start >= 0 {
		load = append(load, files[start])
		after = files[start].Version
	}
	for _, f := range files {
		if f.Kind == checkpoint.StateDelta && f.Version > after && f.Version <= version {
			load = append(load, f)
		}
	}
	for _, f := range load {
		data, err := s.cs.Get(ctx, f.Key())
		if err != nil {
			return err
		}
		h, err := DecodeHeader(data)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Key(), err)
		}
		if p.rows == nil {
			p.rows = make(map[string][]byte, h.Rows)
		}
		if _, err := DecodeFile(data, p.apply); err != nil {
			return fmt.Errorf("%s: %w", f.Key(), err)
		}
		if int64(len(p.rows)) != h.Rows {
			return fmt.Errorf("%s: %w: %d rows after it, the file says %d", f.Key(), checkpoint.ErrDamaged, len(p.rows), h.Rows)
		}
		if f.Kind == checkpoint.StateDelta {
			p.sinceSnapshot++
		}
	}
	if p.rows == nil {
		p.rows = map[string][]byte{}
	}
	return nil
}

// apply applies one record of a file being loaded.
func (p *Partition) apply(r Record) {
	if r.Remove {
		if old, ok := p.rows[r.Key]; ok {
			p.bytes -= int64(len(r.Key) + len(old) + entryOverhead)
			delete(p.rows, r.Key)
		}
		return
	}
	if old, ok := p.rows[r.Key]; ok {
		p.bytes += int64(len(r.Value) - len(old))
	} else {
		p.bytes += int64(len(r.Key) + len(r.Value) + entryOverhead)
	}
	p.rows[r.Key] = r.Value
}

// Update calls f for every partition, in parallel on up to
// Options.Concurrency goroutines (at most GOMAXPROCS); f may use only the
// partition it is given. It returns the first error.
func (s *Store) Update(f func(p *Partition) error) error {
	if err := s.ready("update"); err != nil {
		return err
	}
	n := min(s.opts.Concurrency, runtime.GOMAXPROCS(0))
	return s.parallelN(context.Background(), n, func(_ context.Context, p *Partition) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.settle()
		return f(p)
	})
}

// UpdatePaired is Update over two stores keyed alike, such as the two
// sides of a join: it calls f with partition i of a and partition i of b,
// for every i, in parallel as Update does. The stores must have the same
// number of partitions; f may use only the two partitions it is given.
func UpdatePaired(a, b *Store, f func(pa, pb *Partition) error) error {
	if err := a.ready("update"); err != nil {
		return err
	}
	if err := b.ready("update"); err != nil {
		return err
	}
	if len(a.parts) != len(b.parts) {
		return fmt.Errorf("update state %s with %s: %d partitions against %d", a.meta.Operator, b.meta.Operator, len(a.parts), len(b.parts))
	}
	n := min(a.opts.Concurrency, runtime.GOMAXPROCS(0))
	return a.parallelN(context.Background(), n, func(_ context.Context, pa *Partition) error {
		pb := b.parts[pa.id]
		pa.mu.Lock()
		defer pa.mu.Unlock()
		pb.mu.Lock()
		defer pb.mu.Unlock()
		pa.settle()
		pb.settle()
		return f(pa, pb)
	})
}

// CommitStats describes what a Commit wrote.
type CommitStats struct {
	// Version is the version written.
	Version int64
	// Files and Bytes count the deltas written.
	Files int
	Bytes int64
	// Updated and Removed count the keys put and removed since Load or the
	// last Commit (a key put twice counts twice).
	Updated, Removed int64
	// Rows is the number of keys after the version; MemoryBytes estimates
	// their memory.
	Rows        int64
	MemoryBytes int64
}

// Commit writes the changes made since Load or the last Commit as version
// Version()+1: one delta per changed partition, created with
// create-if-absent, in parallel. A delta that already exists means another
// engine runs this operator's batch: the error wraps checkpoint.ErrFenced.
// After any error the store must be loaded again. Partitions that piled up
// deltas are then snapshotted in the background.
func (s *Store) Commit(ctx context.Context) (CommitStats, error) {
	if err := s.ready("commit"); err != nil {
		return CommitStats{}, err
	}
	v := s.version + 1
	st := CommitStats{Version: v}
	var mu sync.Mutex
	err := s.parallel(ctx, func(ctx context.Context, p *Partition) error {
		p.mu.Lock()
		p.settle()
		updated, removed := p.updated, p.removed
		p.updated, p.removed = 0, 0
		var data []byte
		if len(p.dirty) > 0 {
			w := newFileWriter(checkpoint.StateDelta, v, p.id, int64(len(p.rows)), 16*len(p.dirty))
			for k, c := range p.dirty {
				if c.removed {
					w.remove(k)
				} else {
					w.put(k, c.value)
				}
			}
			if len(p.dirty) > 4096 {
				// clear would keep the largest batch's capacity for good; a new map of
				// this batch's size keeps only what the next batch of a steady stream
				// needs again, without rehashing as it grows key by key (a tenth of
				// Nexmark q5's CPU).
				p.dirty = make(map[string]change, len(p.dirty))
			} else {
				clear(p.dirty)
			}
			data = w.finish()
			p.sinceSnapshot++
		}
		p.mu.Unlock()
		mu.Lock()
		st.Updated += updated
		st.Removed += removed
		mu.Unlock()
		if data == nil {
			return nil
		}
		key := checkpoint.StateFile{Operator: s.meta.Operator, Partition: p.id, Version: v, Kind: checkpoint.StateDelta}.Key()
		if err := s.cs.Create(ctx, key, data); err != nil {
			if errors.Is(err, checkpoint.ErrExists) {
				return fmt.Errorf("write %s: %w", key, checkpoint.ErrFenced)
			}
			return fmt.Errorf("write %s: %w", key, err)
		}
		mu.Lock()
		st.Files++
		st.Bytes += int64(len(data))
		mu.Unlock()
		return nil
	})
	if err != nil {
		s.broken = true
		return CommitStats{}, fmt.Errorf("commit state %s version %d: %w", s.meta.Operator, v, err)
	}
	s.version = v
	every := int64(s.opts.SnapshotEvery)
	for _, p := range s.parts {
		st.Rows += int64(len(p.rows))
		st.MemoryBytes += p.bytes
		// Partitions take turns ((v+id) mod every), so that the snapshots
		// of one version are few; one that piled up twice as many deltas
		// goes at once.
		due := p.sinceSnapshot >= s.opts.SnapshotEvery/2 && (v+int64(p.id))%every == 0
		if p.sinceSnapshot > 0 && (due || p.sinceSnapshot >= 2*s.opts.SnapshotEvery) {
			s.snap.schedule(p, v)
		}
	}
	return st, nil
}

// Rows returns the number of keys over all partitions.
func (s *Store) Rows() int64 {
	var n int64
	for _, p := range s.parts {
		n += int64(len(p.rows))
	}
	return n
}

// MemoryBytes estimates the memory the keys and values use.
func (s *Store) MemoryBytes() int64 {
	var n int64
	for _, p := range s.parts {
		n += p.bytes
	}
	return n
}

// Close waits for the snapshots in progress and stops the snapshot
// goroutine. The Store must not be used afterwards.
func (s *Store) Close() error {
	s.snap.stop()
	return nil
}

func (s *Store) ready(op string) error {
	switch {
	case s.version < 0:
		return fmt.Errorf("%s state %s: not loaded", op, s.meta.Operator)
	case s.broken:
		return fmt.Errorf("%s state %s: an earlier commit failed; load the state again", op, s.meta.Operator)
	}
	return nil
}

// parallel runs f for every partition with Options.Concurrency goroutines.
func (s *Store) parallel(ctx context.Context, f func(context.Context, *Partition) error) error {
	return s.parallelN(ctx, s.opts.Concurrency, f)
}

func (s *Store) parallelN(ctx context.Context, n int, f func(context.Context, *Partition) error) error {
	if n <= 1 || len(s.parts) == 1 {
		for _, p := range s.parts {
			if err := f(ctx, p); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		next  = make(chan *Partition)
	)
	for range min(n, len(s.parts)) {
		wg.Go(func() {
			for p := range next {
				if err := f(ctx, p); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		})
	}
	for _, p := range s.parts {
		next <- p
	}
	close(next)
	wg.Wait()
	return first
}

// Get returns the value of key.
func (p *Partition) Get(key string) ([]byte, bool) {
	v, ok := p.rows[key]
	return v, ok
}

// Put sets the value of key. The partition keeps value: the caller must not
// change it afterwards.
func (p *Partition) Put(key string, value []byte) {
	if old, ok := p.rows[key]; ok {
		p.bytes += int64(len(value) - len(old))
	} else {
		p.bytes += int64(len(key) + len(value) + entryOverhead)
	}
	p.rows[key] = value
	p.dirty[key] = change{value: value}
	p.updated++
}

// Delete removes key; a missing key is no change.
func (p *Partition) Delete(key string) {
	old, ok := p.rows[key]
	if !ok {
		return
	}
	p.bytes -= int64(len(key) + len(old) + entryOverhead)
	delete(p.rows, key)
	p.dirty[key] = change{removed: true}
	p.removed++
}

// All yields every key and value, in no particular order. The loop body
// may Delete the key it is given.
func (p *Partition) All() iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		for k, v := range p.rows {
			if !yield(k, v) {
				return
			}
		}
	}
}

// Len returns the number of keys.
func (p *Partition) Len() int { return len(p.rows) }

// ID returns the partition's number.
func (p *Partition) ID() int { return p.id }
