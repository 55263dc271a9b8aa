package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Generations. A location's checkpoint starts as generation 0, whose objects sit at the
// location's root (the layout every earlier Lockstep wrote). A rebuild (DESIGN.md §3,
// docs/rebuild.md) writes generation n+1 beside it, under generation-<n+1>/, and makes
// it current by creating _generations/<n+1>: one create-if-absent, so of two rebuilds
// one switches and the other gets ErrFenced, and a crash before it leaves generation n
// current and whole. Claim and Load open the current generation; nothing else needs
// to know that there are several.
const (
	// GenerationsDir holds one record per generation after the first.
	GenerationsDir   = "_generations/"
	generationPrefix = "generation-"
)

// Generation records one switch to a rebuilt checkpoint.
type Generation struct {
	// Number counts the generations: 0 is the location's root, which has no record.
	Number int64 `json:"generation"`
	// RebuiltFrom is the generation whose offsets log the rebuild replayed.
	RebuiltFrom int64 `json:"rebuiltFrom"`
	// Batches is the number of batches the rebuild ran: 0 through Batches-1.
	Batches int64 `json:"batches"`
	// Reason says what changed, for `lockstep checkpoint describe`.
	Reason    string    `json:"reason,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// Dir is the folder of the generation's objects under the location: "" for generation 0.
func (g Generation) Dir() string {
	if g.Number == 0 {
		return ""
	}
	return fmt.Sprintf("%s%d/", generationPrefix, g.Number)
}

// GenerationKey is the key of generation n's record.
func GenerationKey(n int64) string { return GenerationsDir + BatchName(n) }

// Generations reads the records of root's generations after the first, oldest first.
func Generations(ctx context.Context, root Store) ([]Generation, error) {
	keys, err := ListKeys(ctx, root, GenerationsDir)
	if err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", root.Location(), GenerationsDir, err)
	}
	var gens []Generation
	for _, k := range keys {
		n, ok := ParseBatchName(strings.TrimPrefix(k, GenerationsDir))
		if !ok {
			continue
		}
		data, err := root.Get(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("read %s/%s: %w", root.Location(), k, err)
		}
		var g Generation
		if err := json.Unmarshal(data, &g); err != nil || g.Number != n {
			return nil, fmt.Errorf("%w: %s/%s is not generation %d's record", ErrDamaged, root.Location(), k, n)
		}
		gens = append(gens, g)
	}
	return gens, nil
}

// CurrentGeneration returns root's current generation: the newest record, or generation 0.
func CurrentGeneration(ctx context.Context, root Store) (Generation, error) {
	gens, err := Generations(ctx, root)
	if err != nil || len(gens) == 0 {
		return Generation{}, err
	}
	return gens[len(gens)-1], nil
}

// GenerationStore is the store of generation g's objects in root.
func GenerationStore(root Store, g Generation) Store {
	if g.Number == 0 {
		return root
	}
	return Sub(root, g.Dir())
}

// SwitchGeneration makes g current in root. It must be the generation after the current
// one; when another writer switched first the error wraps ErrFenced.
func SwitchGeneration(ctx context.Context, root Store, g Generation) error {
	if g.Number < 1 {
		return fmt.Errorf("switch to generation %d: generations after the first start at 1", g.Number)
	}
	data, err := json.Marshal(g)
	if err != nil {
		return fmt.Errorf("switch to generation %d: %w", g.Number, err)
	}
	err = root.Create(ctx, GenerationKey(g.Number), append(data, '\n'))
	if errors.Is(err, ErrExists) {
		return fmt.Errorf("switch %s to generation %d: another rebuild switched first: %w", root.Location(), g.Number, ErrFenced)
	}
	if err != nil {
		return fmt.Errorf("switch %s to generation %d: %w", root.Location(), g.Number, err)
	}
	return nil
}

// Sub is the part of s under prefix (which ends with "/"), as a Store of its own: keys,
// listings and the location are relative to it.
func Sub(s Store, prefix string) Store { return subStore{store: s, prefix: prefix} }

type subStore struct {
	store  Store
	prefix string
}

func (p subStore) Get(ctx context.Context, key string) ([]byte, error) {
	return p.store.Get(ctx, p.prefix+key)
}

func (p subStore) Create(ctx context.Context, key string, data []byte) error {
	return p.store.Create(ctx, p.prefix+key, data)
}

func (p subStore) Put(ctx context.Context, key string, data []byte) error {
	return p.store.Put(ctx, p.prefix+key, data)
}

func (p subStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	infos, err := p.store.List(ctx, p.prefix+prefix)
	if err != nil {
		return nil, err
	}
	for i := range infos {
		infos[i].Key = strings.TrimPrefix(infos[i].Key, p.prefix)
	}
	return infos, nil
}

func (p subStore) Delete(ctx context.Context, key string) error {
	return p.store.Delete(ctx, p.prefix+key)
}

func (p subStore) Location() string {
	return strings.TrimSuffix(p.store.Location(), "/") + "/" + strings.TrimSuffix(p.prefix, "/")
}

// ErrNotReplayable means the logs no longer say what every committed batch read, so the
// state cannot be rebuilt from them; the error says which batches are missing.
var ErrNotReplayable = errors.New("the offsets log does not hold every batch")

// Replay is what the logs say a rebuild of the state would replay (see Replayable).
type Replay struct {
	// Batches is the number of committed batches: 0 through Batches-1.
	Batches int64 `json:"batches"`
	// Pending is the batch planned and not committed, -1 if none.
	Pending int64 `json:"pending"`
	// Records is the number of input rows the committed batches read, as their commits
	// recorded them; Took how long they took to run.
	Records int64         `json:"records"`
	Took    time.Duration `json:"tookMs"`
	head    Head
}

// Replayable reads what the logs say each batch read: a rebuild replays batches 0 through
// the newest committed one with their recorded boundaries. It needs the offsets log from
// batch 0 on; when retention purged older batches the error wraps ErrNotReplayable and
// names them. A checkpoint that has run no batch is an error wrapping ErrNoCommit.
func (c *Checkpoint) Replayable(ctx context.Context) (Replay, error) {
	r := Replay{Pending: -1}
	head, err := c.Head(ctx)
	if err != nil {
		return r, err
	}
	r.head = head
	if head.Planned == nil {
		return r, fmt.Errorf("%s has run no batch: %w", c.Location(), ErrNoCommit)
	}
	if head.Committed != nil {
		r.Batches = head.Committed.BatchID + 1
	}
	if head.Replay() {
		r.Pending = head.Planned.BatchID
	}
	batches, err := c.Batches(ctx)
	if err != nil {
		return r, err
	}
	if len(batches) == 0 || batches[0].ID != 0 || batches[0].Offsets == nil {
		first := head.Planned.BatchID
		if len(batches) > 0 {
			first = batches[0].ID
		}
		return r, fmt.Errorf("%w: the offsets log of %s keeps batches %d–%d only (spec.checkpoint.minBatchesToRetain purged the older ones), so what batches 0–%d read is no longer recorded",
			ErrNotReplayable, c.Location(), first, head.Planned.BatchID, first-1)
	}
	for _, b := range batches {
		if b.Commit != nil {
			r.Records += b.Commit.Progress.NumInputRows
			r.Took += time.Duration(b.Commit.Progress.DurationMs[DurationTotal]) * time.Millisecond
		}
	}
	return r, nil
}

// Head is the head the replay was read from.
func (r Replay) Head() Head { return r.head }

// ConfSealed, in an offsets entry's settings, makes the entry a seal: a rebuild wrote it after
// the generation's newest planned batch before switching to the next generation, so that a
// writer still running there loses its next batch with ErrFenced. Its value names the
// generation that replaces this one. Head does not report a seal as the planned batch.
const ConfSealed = "lockstep.sealedBy"

// Sealed reports whether o is a seal (ConfSealed).
func (o Offsets) Sealed() bool {
	_, ok := o.Conf[ConfSealed]
	return ok
}

// RebuildKey holds, in a generation being rebuilt, its RebuildRecord.
const RebuildKey = "_rebuild"

// RebuildRecord describes a generation being rebuilt: for which spec (a retried rebuild of
// the same spec continues it, another starts again), from which generation, and how many
// batches it replays in all.
type RebuildRecord struct {
	Fingerprint string `json:"fingerprint"`
	From        int64  `json:"fromGeneration"`
	Batches     int64  `json:"batches"`
}

// PutRebuildRecord writes rec into the store of the generation being rebuilt.
func PutRebuildRecord(ctx context.Context, gen Store, rec RebuildRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return gen.Put(ctx, RebuildKey, append(data, '\n'))
}

// ReadRebuildRecord reads the record of the generation being rebuilt in gen; an error
// wrapping ErrNotFound when none is.
func ReadRebuildRecord(ctx context.Context, gen Store) (RebuildRecord, error) {
	data, err := gen.Get(ctx, RebuildKey)
	if err != nil {
		return RebuildRecord{}, fmt.Errorf("read %s/%s: %w", gen.Location(), RebuildKey, err)
	}
	var rec RebuildRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return RebuildRecord{}, fmt.Errorf("%w: %s/%s: %w", ErrDamaged, gen.Location(), RebuildKey, err)
	}
	return rec, nil
}

// RebuildProgress is how far a rebuild of the generation after current has come.
type RebuildProgress struct {
	Generation int64 // the one being rebuilt
	Done       int64 // batches replayed
	Total      int64
}

// ReadRebuildProgress reads, in root, how far a rebuild of the generation after current has
// come: nil when none is under way (one GET), else its record and head.
func ReadRebuildProgress(ctx context.Context, root Store, current Generation) (*RebuildProgress, error) {
	next := Generation{Number: current.Number + 1}
	gen := GenerationStore(root, next)
	rec, err := ReadRebuildRecord(ctx, gen)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p := &RebuildProgress{Generation: next.Number, Total: rec.Batches}
	c, err := Load(ctx, gen)
	if errors.Is(err, ErrNotFound) {
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	h, err := c.Head(ctx)
	if err != nil {
		return nil, err
	}
	if h.Committed != nil {
		p.Done = min(h.Committed.BatchID+1, p.Total)
	}
	return p, nil
}
