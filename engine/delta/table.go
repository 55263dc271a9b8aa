package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"k8s.io/utils/clock"
)

var (
	// ErrUnsupportedProtocol means the table needs a newer Delta reader or
	// writer than this package (reader 1, writer 2).
	ErrUnsupportedProtocol = errors.New("delta table needs a newer protocol")

	// ErrCorruptLog means the transaction log cannot be replayed: a commit
	// is missing between two others, or a file cannot be parsed.
	ErrCorruptLog = errors.New("delta log cannot be replayed")
)

// Table is a Delta table: a _delta_log folder and data files in a
// checkpoint.Store (a local folder or an S3 prefix). It caches the newest
// snapshot it has read and reads only the commits after it.
//
// A Table is safe for concurrent use. Writers in other processes are
// expected: every commit is created with create-if-absent.
type Table struct {
	store checkpoint.Store
	opts  options

	mu     sync.Mutex
	cached *Snapshot // newest snapshot read, or nil
}

// Open returns the table stored in store. It does no I/O: a table that does
// not exist yet reads as an empty snapshot (version -1) and is created by
// the first write.
func Open(store checkpoint.Store, opts ...Option) *Table {
	o := options{
		clock:              clock.RealClock{},
		checkpointInterval: 10,
		maxRetries:         100,
		tombstoneRetention: 7 * 24 * time.Hour,
		engineInfo:         "lockstep",
	}
	for _, opt := range opts {
		opt.apply(&o)
	}
	return &Table{store: store, opts: o}
}

// Location returns where the table is, for messages.
func (t *Table) Location() string { return t.store.Location() }

// Store returns the store the table lives in.
func (t *Table) Store() checkpoint.Store { return t.store }

// An Option configures a Table.
type Option interface{ apply(*options) }

type options struct {
	clock              clock.PassiveClock
	checkpointInterval int64
	maxRetries         int
	tombstoneRetention time.Duration
	engineInfo         string
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithClock sets the clock that stamps commits, files and tombstones. The
// default is the real clock.
func WithClock(c clock.PassiveClock) Option { return optionFunc(func(o *options) { o.clock = c }) }

// WithCheckpointInterval makes a writer write a Delta checkpoint after every
// n-th commit (versions divisible by n). The default is 10, as in Delta.
func WithCheckpointInterval(n int) Option {
	return optionFunc(func(o *options) { o.checkpointInterval = int64(max(n, 1)) })
}

// WithMaxRetries bounds how often a write is retried at the next version
// after losing a commit race to a writer whose commit does not conflict.
// The default is 100.
func WithMaxRetries(n int) Option { return optionFunc(func(o *options) { o.maxRetries = max(n, 0) }) }

// WithEngineInfo sets the engineInfo of commitInfo actions. The default is
// "lockstep".
func WithEngineInfo(s string) Option { return optionFunc(func(o *options) { o.engineInfo = s }) }

// Snapshot returns the table's newest snapshot. It reads the commits after
// the cached snapshot; on the first call it starts from the newest Delta
// checkpoint (found through _last_checkpoint), so its cost does not grow
// with the length of the log.
func (t *Table) Snapshot(ctx context.Context) (*Snapshot, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.update(ctx, t.cached)
	if err != nil {
		return nil, err
	}
	t.cached = s
	return s, nil
}

// TxnVersion returns the newest version application appID (a query id)
// committed to the table, and whether it committed any.
func (t *Table) TxnVersion(ctx context.Context, appID string) (int64, bool, error) {
	s, err := t.Snapshot(ctx)
	if err != nil {
		return 0, false, err
	}
	v, ok := s.TxnVersion(appID)
	return v, ok, nil
}

// SnapshotAt returns the table's snapshot at version v, replayed from the
// newest checkpoint at or before v. It is an error wrapping ErrNotFound
// when the log no longer holds what v needs.
func (t *Table) SnapshotAt(ctx context.Context, v int64) (*Snapshot, error) {
	files, err := t.listLog(ctx, "")
	if err != nil {
		return nil, err
	}
	var cp int64 = -1
	for _, f := range files {
		if f.checkpoint && f.version <= v {
			cp = max(cp, f.version)
		}
	}
	return t.replay(ctx, cp, v)
}

// update returns the newest snapshot, reading forward from base (nil: from
// the newest checkpoint).
func (t *Table) update(ctx context.Context, base *Snapshot) (*Snapshot, error) {
	if base == nil {
		return t.load(ctx)
	}
	s := base
	for {
		actions, err := t.readCommit(ctx, s.Version+1)
		if errors.Is(err, checkpoint.ErrNotFound) {
			return s, nil
		}
		if err != nil {
			return nil, err
		}
		if s == base {
			s = base.clone()
		}
		s.apply(s.Version+1, actions)
		if err := checkReadable(t.Location(), s); err != nil {
			return nil, err
		}
	}
}

// load reads the newest snapshot from scratch. With _last_checkpoint it
// lists nothing: it reads the checkpoint it names, then the commits after
// it one by one until one is missing, so its cost does not depend on the
// length of the log. Without it (or when that checkpoint is gone) it lists
// the log once and starts from the newest checkpoint listed.
func (t *Table) load(ctx context.Context) (*Snapshot, error) {
	hint := int64(-1)
	if b, err := t.store.Get(ctx, lastCheckpointKey); err == nil {
		var l lastCheckpoint
		if json.Unmarshal(b, &l) == nil && l.Version >= 0 {
			hint = l.Version
		}
	} else if !errors.Is(err, checkpoint.ErrNotFound) {
		return nil, fmt.Errorf("delta table %s: read _last_checkpoint: %w", t.Location(), err)
	}
	if hint >= 0 {
		s, err := t.replay(ctx, hint, hint)
		if err == nil {
			return t.update(ctx, s)
		}
		if !errors.Is(err, checkpoint.ErrNotFound) {
			return nil, err
		}
		// The checkpoint vanished (a log cleanup raced this reader).
	}
	files, err := t.listLog(ctx, "")
	if err != nil {
		return nil, err
	}
	s, err := t.replayListed(ctx, files)
	if err != nil {
		return nil, err
	}
	// Commits may have landed since the listing.
	return t.update(ctx, s)
}

// replayListed replays the newest listed checkpoint and the commits after it.
func (t *Table) replayListed(ctx context.Context, files []logFile) (*Snapshot, error) {
	cp, newest := int64(-1), int64(-1)
	for _, f := range files {
		if f.checkpoint {
			cp = max(cp, f.version)
		} else {
			newest = max(newest, f.version)
		}
	}
	if newest < 0 && cp < 0 {
		return emptySnapshot(), nil
	}
	return t.replay(ctx, cp, max(newest, cp))
}

// replay builds the snapshot at version to from checkpoint cp (-1: none,
// replay from version 0) and the commits after it.
func (t *Table) replay(ctx context.Context, cp, to int64) (*Snapshot, error) {
	s := emptySnapshot()
	if cp >= 0 {
		data, err := t.store.Get(ctx, checkpointKey(cp))
		if err != nil {
			return nil, fmt.Errorf("delta table %s: read checkpoint %d: %w", t.Location(), cp, err)
		}
		if s, err = decodeCheckpoint(cp, data); err != nil {
			return nil, fmt.Errorf("delta table %s: %w: %w", t.Location(), ErrCorruptLog, err)
		}
	}
	for v := cp + 1; v <= to; v++ {
		actions, err := t.readCommit(ctx, v)
		if errors.Is(err, checkpoint.ErrNotFound) {
			return nil, fmt.Errorf("delta table %s: commit %d is missing (removed by log retention?): %w", t.Location(), v, err)
		}
		if err != nil {
			return nil, err
		}
		s.apply(v, actions)
	}
	if err := checkReadable(t.Location(), s); err != nil {
		return nil, err
	}
	return s, nil
}

func checkReadable(location string, s *Snapshot) error {
	if s.Protocol.MinReaderVersion > ReaderVersion {
		return fmt.Errorf("delta table %s needs reader version %d, this reader implements %d: %w",
			location, s.Protocol.MinReaderVersion, ReaderVersion, ErrUnsupportedProtocol)
	}
	return nil
}

// readCommit reads and parses commit v; a missing commit is an error
// wrapping checkpoint.ErrNotFound.
func (t *Table) readCommit(ctx context.Context, v int64) ([]Action, error) {
	data, err := t.store.Get(ctx, commitKey(v))
	if err != nil {
		if errors.Is(err, checkpoint.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("delta table %s: read commit %d: %w", t.Location(), v, err)
	}
	actions, err := decodeCommit(data)
	if err != nil {
		return nil, fmt.Errorf("delta table %s: commit %d: %w: %w", t.Location(), v, ErrCorruptLog, err)
	}
	return actions, nil
}

// Commit returns the actions of commit v. A commit removed by log
// retention, or not written yet, is an error wrapping checkpoint.ErrNotFound.
func (t *Table) Commit(ctx context.Context, v int64) ([]Action, error) {
	return t.readCommit(ctx, v)
}

// listLog lists the log files whose names start with prefix (after
// _delta_log/), ordered by version, commits before a checkpoint of the same
// version.
func (t *Table) listLog(ctx context.Context, prefix string) ([]logFile, error) {
	keys, err := checkpoint.ListKeys(ctx, t.store, logDir+prefix)
	if err != nil {
		return nil, fmt.Errorf("delta table %s: list log: %w", t.Location(), err)
	}
	var files []logFile
	for _, k := range keys {
		if f, ok := parseLogKey(k); ok {
			files = append(files, f)
		}
	}
	return files, nil
}

// OldestCommit returns the oldest commit version still in the log, or -1
// when there is none.
func (t *Table) OldestCommit(ctx context.Context) (int64, error) {
	files, err := t.listLog(ctx, "")
	if err != nil {
		return 0, err
	}
	for _, f := range files {
		if !f.checkpoint {
			return f.version, nil
		}
	}
	return -1, nil
}

// CleanupLog deletes the log files that the newest checkpoint at or before
// version before makes unnecessary: every commit and checkpoint older than
// it (Delta's metadata cleanup, which logRetentionDuration drives). The
// table stays readable; readers of older versions, and streaming sources
// behind that checkpoint, lose the history. It returns how many files it
// deleted; without such a checkpoint it deletes nothing.
func (t *Table) CleanupLog(ctx context.Context, before int64) (int, error) {
	files, err := t.listLog(ctx, "")
	if err != nil {
		return 0, err
	}
	cp := int64(-1)
	for _, f := range files {
		if f.checkpoint && f.version <= before {
			cp = max(cp, f.version)
		}
	}
	n := 0
	for _, f := range files {
		if f.version >= cp {
			continue
		}
		key := commitKey(f.version)
		if f.checkpoint {
			key = checkpointKey(f.version)
		}
		if err := t.store.Delete(ctx, key); err != nil {
			return n, fmt.Errorf("delta table %s: cleanup: %w", t.Location(), err)
		}
		n++
	}
	return n, nil
}
