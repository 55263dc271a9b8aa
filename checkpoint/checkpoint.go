package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

var (
	// ErrOwnerMismatch means the location belongs to another query. The
	// error is an *OwnerMismatchError.
	ErrOwnerMismatch = errors.New("checkpoint belongs to another query")

	// ErrReadOnly means a write through a checkpoint or store opened only to
	// read.
	ErrReadOnly = errors.New("checkpoint opened read-only")
)

// OwnerMismatchError is returned by Claim when the location's metadata names
// another owner. errors.Is(err, ErrOwnerMismatch) holds for it.
type OwnerMismatchError struct {
	Location string
	ID       string // the recorded query id
	Recorded Owner  // the owner in the metadata
	Claimed  Owner  // the owner Claim was called with
}

func (e *OwnerMismatchError) Error() string {
	return fmt.Sprintf("checkpoint %s (query id %s) belongs to %s, not %s: give this query its own location, or adopt the checkpoint explicitly",
		e.Location, e.ID, e.Recorded, e.Claimed)
}

// Is makes errors.Is(err, ErrOwnerMismatch) hold.
func (e *OwnerMismatchError) Is(target error) bool { return target == ErrOwnerMismatch }

// Checkpoint is the typed layout of one checkpoint location over a Store
// (docs/checkpoint-format.md). Every method reads or writes the store; the
// only state kept besides the metadata is the newest committed batch seen,
// where Head starts looking. A Checkpoint is safe for concurrent use.
//
// Log entries (offsets, commits, shape) are written with Store.Create, so two
// writers that both believe they own the location are fenced: for each entry
// exactly one wins, and the other gets an error wrapping ErrFenced.
type Checkpoint struct {
	store    Store // the current generation's
	gen      Generation
	meta     Metadata
	readOnly bool
	known    atomic.Int64 // 1 + the newest committed batch seen; 0 for none
	now      func() time.Time
	hint     hintState  // when _latest was written, and what it carries (head.go)
	shape    shapeState // the shape entry this writer recorded and no batch ran under yet
}

// A ClaimOption configures Claim.
type ClaimOption func(*claimOptions)

type claimOptions struct {
	adopt bool
	id    string
	now   func() time.Time
}

// Adopt lets Claim take over a checkpoint that another owner created: the
// metadata is rewritten with the new owner and the query id is kept, so the
// new owner continues where the old one stopped. Without it a different
// owner is an *OwnerMismatchError.
func Adopt() ClaimOption { return func(o *claimOptions) { o.adopt = true } }

// WithQueryID sets the query id of the checkpoint Claim creates on an empty location: the
// id of a checkpoint another program wrote beside it, which the new records continue (the
// spark runtime adopting a Spark checkpoint keeps Spark's query id). It does not change the
// id of an existing checkpoint. The default is a new random UUID.
func WithQueryID(id string) ClaimOption { return func(o *claimOptions) { o.id = id } }

// WithClock sets the clock that stamps the metadata of a new checkpoint and
// times the writes of the _latest hint (see HintMaxAge). The default is
// time.Now.
func WithClock(now func() time.Time) ClaimOption { return func(o *claimOptions) { o.now = now } }

// Claim opens the checkpoint in s for writing on behalf of owner: its current generation
// (generation.go), the only one a writer may touch.
//
// On an empty location it creates the metadata (with Create, so of two
// concurrent claims one creates it and the other reads it) with a new query
// id. On an existing checkpoint it checks the owner (Owner.Matches): another query is an
// *OwnerMismatchError unless Adopt is given. A location that holds objects
// but no metadata is refused with ErrDamaged rather than overwritten.
func Claim(ctx context.Context, s Store, owner Owner, opts ...ClaimOption) (*Checkpoint, error) {
	if owner.Name == "" {
		return nil, errors.New("claim checkpoint: the owner needs a name")
	}
	o := claimOptions{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	gen, err := CurrentGeneration(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("claim checkpoint: %w", err)
	}
	s = GenerationStore(s, gen)
	c := &Checkpoint{store: s, gen: gen, now: o.now}
	for attempt := 0; ; attempt++ {
		meta, err := c.readMetadata(ctx)
		if errors.Is(err, ErrNotFound) {
			raced, err := c.checkEmpty(ctx)
			if raced && attempt < 3 {
				continue // another claim created the metadata since we looked
			}
			if err != nil {
				return nil, err
			}
			id := o.id
			if id == "" {
				id = uuid.NewString()
			}
			meta = Metadata{ID: id, Owner: owner, FormatVersion: FormatVersion, CreatedAt: o.now().UTC().Truncate(time.Millisecond)}
			err = s.Create(ctx, MetadataKey, encodeMetadata(meta))
			if errors.Is(err, ErrExists) && attempt < 3 {
				continue // another claim created it first: read and judge it
			}
			if err != nil {
				return nil, fmt.Errorf("create checkpoint %s: %w", s.Location(), err)
			}
			c.meta = meta
			return c, nil
		}
		if err != nil {
			return nil, err
		}
		if !meta.Owner.Matches(owner) {
			if !o.adopt {
				return nil, &OwnerMismatchError{Location: s.Location(), ID: meta.ID, Recorded: meta.Owner, Claimed: owner}
			}
			meta.Owner = owner
			if err := s.Put(ctx, MetadataKey, encodeMetadata(meta)); err != nil {
				return nil, fmt.Errorf("adopt checkpoint %s: %w", s.Location(), err)
			}
		}
		c.meta = meta
		return c, nil
	}
}

// Load opens the current generation of the checkpoint in s to read it. Its Add and Purge methods fail
// with ErrReadOnly. A location without a checkpoint is an error wrapping
// ErrNotFound.
func Load(ctx context.Context, s Store) (*Checkpoint, error) {
	gen, err := CurrentGeneration(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	s = GenerationStore(s, gen)
	c := &Checkpoint{store: s, gen: gen, readOnly: true, now: time.Now}
	meta, err := c.readMetadata(ctx)
	if errors.Is(err, ErrNotFound) {
		raced, err := c.checkEmpty(ctx)
		if raced {
			meta, err = c.readMetadata(ctx) // created since we looked
		}
		if err != nil {
			return nil, err
		}
		if !raced {
			return nil, fmt.Errorf("no checkpoint at %s: %w", s.Location(), ErrNotFound)
		}
	}
	if err != nil {
		return nil, err
	}
	c.meta = meta
	return c, nil
}

// Generation returns the generation Claim or Load opened: the current one (generation.go).
func (c *Checkpoint) Generation() Generation { return c.gen }

// Metadata returns the checkpoint's metadata.
func (c *Checkpoint) Metadata() Metadata { return c.meta }

// Store returns the store the checkpoint lives in, for the files whose
// format belongs to their users (sources/, state/).
func (c *Checkpoint) Store() Store { return c.store }

// Location returns the store's location.
func (c *Checkpoint) Location() string { return c.store.Location() }

// AddOffsets adds o to the offsets log: call it before batch o.BatchID runs.
// If the entry exists, another writer got there first: the error wraps
// ErrFenced and this writer must stop.
func (c *Checkpoint) AddOffsets(ctx context.Context, o Offsets) error {
	data, err := encodeOffsets(o)
	if err != nil {
		return fmt.Errorf("add offsets for batch %d: %w", o.BatchID, err)
	}
	if err := c.add(ctx, OffsetsKey, o.BatchID, data); err != nil {
		return err
	}
	c.hint.plan(o)
	return nil
}

// AddCommit adds cm to the commit log: call it after the sink has committed
// batch cm.BatchID. A lost race is an error wrapping ErrFenced. Every
// HintInterval batches, and whenever HintMaxAge passed since this Checkpoint
// last did so, it then updates the _latest hint that a restarted process's
// Head and the controller's status polls start from; a failure to do so is
// not reported, since the hint only saves requests.
func (c *Checkpoint) AddCommit(ctx context.Context, cm Commit) error {
	data, err := encodeCommit(cm)
	if err != nil {
		return fmt.Errorf("add commit for batch %d: %w", cm.BatchID, err)
	}
	if err := c.shape.check(ctx, c, cm.BatchID); err != nil {
		return err
	}
	if err := c.add(ctx, CommitKey, cm.BatchID, data); err != nil {
		return err
	}
	c.shape.ran(cm.BatchID)
	c.remember(cm.BatchID)
	c.writeHint(ctx, cm.BatchID)
	return nil
}

// canWrite refuses, with an error that starts with verb and names the entry k of batch, a
// write to a read-only checkpoint or for a negative batch.
func (c *Checkpoint) canWrite(verb, k string, batch int64) error {
	switch {
	case c.readOnly:
		return fmt.Errorf("%s %s: %w", verb, c.name(k), ErrReadOnly)
	case batch < 0:
		return fmt.Errorf("%s %s: negative batch %d", verb, c.name(k), batch)
	}
	return nil
}

func (c *Checkpoint) add(ctx context.Context, key func(int64) string, batch int64, data []byte) error {
	k := key(batch)
	if err := c.canWrite("add", k, batch); err != nil {
		return err
	}
	err := c.store.Create(ctx, k, data)
	if errors.Is(err, ErrExists) {
		c.shape.lost(ctx, c, batch)
		return fmt.Errorf("add %s: %w", c.name(k), ErrFenced)
	}
	if err != nil {
		return fmt.Errorf("add %s: %w", c.name(k), err)
	}
	return nil
}

// Offsets reads batch's offsets entry. A missing entry is an error wrapping
// ErrNotFound; a damaged one wraps ErrDamaged, a newer one ErrNewerFormat.
func (c *Checkpoint) Offsets(ctx context.Context, batch int64) (Offsets, error) {
	data, err := c.get(ctx, OffsetsKey(batch))
	if err != nil {
		return Offsets{}, err
	}
	return c.decodeOffsets(batch, data)
}

// Commit reads batch's commit entry, with errors as Offsets.
func (c *Checkpoint) Commit(ctx context.Context, batch int64) (Commit, error) {
	data, err := c.get(ctx, CommitKey(batch))
	if err != nil {
		return Commit{}, err
	}
	return c.decodeCommit(batch, data)
}

func (c *Checkpoint) decodeOffsets(batch int64, data []byte) (Offsets, error) {
	o, err := decodeOffsets(batch, data)
	if err != nil {
		return Offsets{}, fmt.Errorf("read %s: %w", c.name(OffsetsKey(batch)), err)
	}
	return o, nil
}

func (c *Checkpoint) decodeCommit(batch int64, data []byte) (Commit, error) {
	cm, err := decodeCommit(batch, data)
	if err != nil {
		return Commit{}, fmt.Errorf("read %s: %w", c.name(CommitKey(batch)), err)
	}
	return cm, nil
}

// Batch is one batch as the logs record it.
type Batch struct {
	ID      int64    `json:"id"`
	Offsets *Offsets `json:"offsets,omitempty"` // nil when purged
	Commit  *Commit  `json:"commit,omitempty"`  // nil when not committed, or purged
}

// Batches reads every retained entry of the offsets and commit logs, oldest
// first.
func (c *Checkpoint) Batches(ctx context.Context) ([]Batch, error) {
	offsets, err := c.logBatches(ctx, OffsetsDir)
	if err != nil {
		return nil, err
	}
	commits, err := c.logBatches(ctx, CommitsDir)
	if err != nil {
		return nil, err
	}
	var batches []Batch
	for i, j := 0, 0; i < len(offsets) || j < len(commits); {
		var b Batch
		switch {
		case j == len(commits) || i < len(offsets) && offsets[i] < commits[j]:
			b.ID = offsets[i]
			i++
		case i == len(offsets) || commits[j] < offsets[i]:
			b.ID = commits[j]
			j++
		default:
			b.ID = offsets[i]
			i, j = i+1, j+1
		}
		if o, err := c.Offsets(ctx, b.ID); err == nil {
			b.Offsets = &o
		} else if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		if cm, err := c.Commit(ctx, b.ID); err == nil {
			b.Commit = &cm
		} else if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		if b.Offsets != nil || b.Commit != nil { // else purged while we read
			batches = append(batches, b)
		}
	}
	return batches, nil
}

// logBatches lists the batch numbers of a log, oldest first. Names that are
// not batch names are ignored.
func (c *Checkpoint) logBatches(ctx context.Context, dir string) ([]int64, error) {
	keys, err := ListKeys(ctx, c.store, dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", c.name(dir), err)
	}
	batches := make([]int64, 0, len(keys))
	for _, k := range keys {
		if n, ok := ParseBatchName(k[len(dir):]); ok {
			batches = append(batches, n)
		}
	}
	return batches, nil
}

func (c *Checkpoint) readMetadata(ctx context.Context) (Metadata, error) {
	data, err := c.get(ctx, MetadataKey)
	if err != nil {
		return Metadata{}, err
	}
	m, err := decodeMetadata(data)
	if err != nil {
		return Metadata{}, fmt.Errorf("read %s: %w", c.name(MetadataKey), err)
	}
	return m, nil
}

// checkEmpty refuses a location that has objects but no metadata. It
// reports raced when the listing shows metadata after all: another process
// created the checkpoint since the metadata was read.
func (c *Checkpoint) checkEmpty(ctx context.Context) (raced bool, err error) {
	keys, err := ListKeys(ctx, c.store, "")
	if err != nil {
		return false, fmt.Errorf("list %s: %w", c.Location(), err)
	}
	if slices.Contains(keys, MetadataKey) {
		return true, nil
	}
	if len(keys) > 0 {
		return false, fmt.Errorf("%w: %s holds %d objects (such as %s) but no metadata: refusing to treat it as a new checkpoint; use an empty location",
			ErrDamaged, c.Location(), len(keys), keys[0])
	}
	return false, nil
}

func (c *Checkpoint) get(ctx context.Context, key string) ([]byte, error) {
	data, err := c.store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", c.name(key), err)
	}
	return data, nil
}

// name is the full name of an object, for messages.
func (c *Checkpoint) name(key string) string { return c.store.Location() + "/" + key }
