package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
)

// ErrRebuildRequired is the start guard's answer to a change the spec asks to rebuild the
// state for (spec.onIncompatibleChange: rebuild): Run then rebuilds (Query.Rebuild) and
// starts again on the new generation.
var ErrRebuildRequired = errors.New("the state must be rebuilt for this spec first")

// RebuildObserver is an Observer that is also told of each batch a rebuild replays: the
// batches done and the total. A rebuild commits no batch of the current generation, so
// Committed is not called for them.
type RebuildObserver interface {
	Rebuilt(done, total int64, p Progress)
}

// ErrRebuildImpossible means the checkpoint's record or the sources no longer hold what a
// rebuild must replay; the error says what is missing.
var ErrRebuildImpossible = errors.New("rebuild not possible")

// RebuildPlan is what a rebuild of the query's checkpoint would do (Query.PlanRebuild).
type RebuildPlan struct {
	Location string `json:"checkpoint"`
	// From is the current generation, whose offsets log the rebuild replays; To the one it
	// writes.
	From int64 `json:"fromGeneration"`
	To   int64 `json:"toGeneration"`
	// Replay is what the rebuild replays: the committed batches (their input and how long
	// they took when they first ran; a rebuild reads the same input and writes no output),
	// and the pending batch the new query runs first after the switch.
	checkpoint.Replay
}

// RebuildOptions configures Query.Rebuild.
type RebuildOptions struct {
	// Progress, when set, is called after each replayed batch with the batches done and
	// the total.
	Progress func(done, total int64, p Progress)
	// Reason is recorded in the generation's record ("spec.transform[1].aggregate.groupBy
	// changed").
	Reason string
}

// RebuildSummary is what Query.Rebuild did.
type RebuildSummary struct {
	Plan       RebuildPlan   `json:"plan"`
	Generation int64         `json:"generation"`
	Replayed   int64         `json:"replayed"` // batches run by this call; fewer than Plan.Batches when it continued a crashed one
	InputRows  int64         `json:"inputRows"`
	Duration   time.Duration `json:"durationMs"`
}

// PlanRebuild reads the current generation of the query's checkpoint and says what Rebuild
// would replay, or why it cannot (an error wrapping ErrRebuildImpossible). It writes
// nothing.
func (q *Query) PlanRebuild(ctx context.Context) (RebuildPlan, error) {
	root, err := q.openStore(ctx)
	if err != nil {
		return RebuildPlan{}, err
	}
	old, err := checkpoint.Load(ctx, root)
	if err != nil {
		return RebuildPlan{}, fmt.Errorf("plan rebuild: %w", err)
	}
	p, _, err := planRebuild(ctx, old)
	if err != nil {
		return p, err
	}
	return p, q.CheckRetained(ctx, old, p.Replay)
}

// CheckRetained asks each source the committed batches of c read whether it still holds
// their input (RetainingSource): nil when every source does, an error wrapping
// ErrRebuildImpossible that says what is gone, or one wrapping ErrRetentionUnknown when a
// source could not find out. It opens the sources on c's private files and writes nothing.
func (q *Query) CheckRetained(ctx context.Context, c *checkpoint.Checkpoint, r checkpoint.Replay) error {
	if r.Batches == 0 {
		return nil
	}
	last, err := c.Offsets(ctx, r.Batches-1)
	if err != nil {
		return fmt.Errorf("check the sources: %w", err)
	}
	for _, so := range last.Sources {
		i := slices.IndexFunc(q.spec.Sources, func(s v1.Source) bool { return s.Name == so.Source })
		if i < 0 {
			continue
		}
		spec := &q.spec.Sources[i]
		src, err := q.reg.sources[spec.Kind()].new(ctx, spec, SourceEnv{
			Name: spec.Name, QueryID: c.Metadata().ID,
			Store:  checkpoint.Sub(c.Store(), checkpoint.SourceKey(spec.Name, "")),
			Open:   q.folderOpener(spec.S3Connection(), spec.Name),
			Logger: q.opts.logger.With("source", spec.Name), Getenv: q.opts.getenv, Wake: func() {},
		})
		if err != nil {
			return fmt.Errorf("%w: source %s: %w", ErrRetentionUnknown, spec.Name, err)
		}
		if rs, ok := src.(RetainingSource); ok {
			err = rs.Retained(ctx, so.Offset)
		}
		if c, ok := src.(io.Closer); ok {
			_ = c.Close()
		}
		switch {
		case err == nil:
		case errors.Is(err, ErrRetentionUnknown):
			return fmt.Errorf("source %s: %w", spec.Name, err)
		default:
			return &SourceLostError{Source: spec.Name, Batches: r.Batches, Err: err}
		}
	}
	return nil
}

// SourceLostError says which source no longer holds what a rebuild would replay. It is an
// ErrRebuildImpossible.
type SourceLostError struct {
	Source  string
	Batches int64 // the committed batches: 0 through Batches-1
	Err     error // what is gone, as the source says it
}

func (e *SourceLostError) Error() string {
	return fmt.Sprintf("source %s no longer holds what batches 0–%d read: %v", e.Source, e.Batches-1, e.Err)
}

func (e *SourceLostError) Unwrap() error { return e.Err }

func (e *SourceLostError) Is(target error) bool { return target == ErrRebuildImpossible }

// PlanRebuildFrom is PlanRebuild of the current generation old, which the caller loaded.
func PlanRebuildFrom(ctx context.Context, old *checkpoint.Checkpoint) (RebuildPlan, error) {
	p, _, err := planRebuild(ctx, old)
	return p, err
}

// planRebuild reads old's logs: the plan, and the head it was made from.
func planRebuild(ctx context.Context, old *checkpoint.Checkpoint) (RebuildPlan, checkpoint.Head, error) {
	gen := old.Generation()
	p := RebuildPlan{Location: old.Location(), From: gen.Number, To: gen.Number + 1}
	r, err := old.Replayable(ctx)
	p.Replay = r
	switch {
	case errors.Is(err, checkpoint.ErrNoCommit):
		return p, r.Head(), fmt.Errorf("%w: %s has run no batch: there is no state to rebuild; the new query starts there as it is", ErrRebuildImpossible, old.Location())
	case errors.Is(err, checkpoint.ErrNotReplayable):
		return p, r.Head(), fmt.Errorf("%w: %w", ErrRebuildImpossible, err)
	case err != nil:
		return p, r.Head(), fmt.Errorf("plan rebuild: %w", err)
	}
	return p, r.Head(), nil
}

// Rebuild computes the state this query would have after the checkpoint's newest committed
// batch N had it run from the start, and switches the checkpoint to it: the next Run
// continues at batch N+1 with this query's spec. It runs the query over the batches the
// current generation's offsets log recorded, with the same boundaries and timestamps (so
// watermarks and late-row drops come out as an uninterrupted run's would), writing no
// output, into a new generation beside the current one; then it seals the current
// generation at its next batch (an empty offsets entry, so a writer still running on it is
// fenced there) and switches (checkpoint.SwitchGeneration). A batch planned and not
// committed is carried over unrun: the next Run runs it with this query's spec, and an
// exactly-once sink that had committed it keeps the output it has.
//
// Until the switch the current generation is untouched and stays the one every run opens;
// a crash leaves a partial new generation that a retried Rebuild of the same spec
// continues (another spec starts it again). Output already written stays as it was.
func (q *Query) Rebuild(ctx context.Context, opts RebuildOptions) (RebuildSummary, error) {
	root, err := q.openStore(ctx)
	if err != nil {
		return RebuildSummary{}, err
	}
	fp, err := SpecFingerprint(q.spec)
	if err != nil {
		return RebuildSummary{}, err
	}
	b := Rebuilder{Root: root, Owner: q.owner(), Fingerprint: fp, Now: q.opts.clock.Now,
		Plan: func(ctx context.Context, old *checkpoint.Checkpoint, p *RebuildPlan) error {
			return q.CheckRetained(ctx, old, p.Replay)
		},
		Replay: func(ctx context.Context, old, gen *checkpoint.Checkpoint, plan RebuildPlan) (int64, int64, error) {
			if err := checkpoint.CopyPrefix(ctx, old.Store(), gen.Store(), checkpoint.SourcesDir, nil); err != nil {
				return 0, 0, fmt.Errorf("rebuild: copy the sources' files: %w", err)
			}
			r, err := q.begin(ctx, gen, discardSink{})
			if err != nil {
				return 0, 0, err
			}
			defer r.close()
			return r.replayLog(ctx, old, plan, opts.Progress)
		}}
	return b.Rebuild(ctx, opts)
}

// Rebuilder is the part of a rebuild both runtimes share (Query.Rebuild, and the spark
// runtime's): it plans from the current generation's records, claims the next generation
// for the spec (continuing a crashed rebuild of the same spec, else starting it afresh),
// has the runtime replay the batches into it, seals the current generation and switches.
type Rebuilder struct {
	// Root is the store that holds the generations (checkpoint.GenerationStore).
	Root  checkpoint.Store
	Owner checkpoint.Owner
	// Fingerprint identifies the spec the generation is rebuilt for (SpecFingerprint).
	Fingerprint string
	Now         func() time.Time
	// Plan, when set, amends the plan read from the records with what the runtime's own
	// logs say (nil: as read).
	Plan func(ctx context.Context, old *checkpoint.Checkpoint, p *RebuildPlan) error
	// OwnLog is set when the runtime replays the boundaries of its own offsets log, which
	// Plan reads and answers for: then the records need not hold every batch from 0 (those
	// of a Spark checkpoint Lockstep adopted start at the batch it adopted).
	OwnLog bool
	// Clear, when set, deletes the runtime's own files of the next generation when the
	// rebuild starts it afresh, before its record names the spec.
	Clear func(ctx context.Context) error
	// Replay runs every batch of plan that gen has not run yet, with old's boundaries,
	// writing no output, and carries old's pending batch over. It returns the batches it
	// ran and their input rows.
	Replay func(ctx context.Context, old, gen *checkpoint.Checkpoint, plan RebuildPlan) (ran, rows int64, err error)
}

// Rebuild rebuilds (see Query.Rebuild).
func (b Rebuilder) Rebuild(ctx context.Context, opts RebuildOptions) (RebuildSummary, error) {
	began := b.Now()
	old, err := checkpoint.Load(ctx, b.Root)
	if err != nil {
		return RebuildSummary{}, fmt.Errorf("rebuild: %w", err)
	}
	if !old.Metadata().Owner.Matches(b.Owner) {
		return RebuildSummary{}, fmt.Errorf("%w: %w", ErrRefused, &checkpoint.OwnerMismatchError{
			Location: old.Location(), ID: old.Metadata().ID, Recorded: old.Metadata().Owner, Claimed: b.Owner})
	}
	sum := RebuildSummary{}
	for attempt := 0; ; attempt++ {
		plan, head, err := planRebuild(ctx, old)
		if b.OwnLog && errors.Is(err, checkpoint.ErrNotReplayable) {
			err = nil
		}
		if err == nil && b.Plan != nil {
			err = b.Plan(ctx, old, &plan)
		}
		if err != nil {
			return sum, err
		}
		sum.Plan = plan
		gen, err := b.claimGeneration(ctx, old, plan)
		if err != nil {
			return sum, err
		}
		n, rows, err := b.Replay(ctx, old, gen, plan)
		sum.Replayed += n
		sum.InputRows += rows
		if err != nil {
			return sum, err
		}
		err = seal(ctx, old, head, plan.To)
		if errors.Is(err, checkpoint.ErrFenced) && attempt < 3 {
			continue // the current generation moved on meanwhile: replay what it added
		}
		if err != nil {
			return sum, fmt.Errorf("rebuild: seal %s: %w", old.Location(), err)
		}
		g := checkpoint.Generation{Number: plan.To, RebuiltFrom: plan.From, Batches: plan.Batches, Reason: opts.Reason, CreatedAt: b.Now().UTC().Truncate(time.Millisecond)}
		if err := checkpoint.SwitchGeneration(ctx, b.Root, g); err != nil {
			return sum, fmt.Errorf("rebuild: %w", err)
		}
		sum.Generation = g.Number
		sum.Duration = b.Now().Sub(began)
		return sum, nil
	}
}

// claimGeneration claims the generation after old's current one for the spec: a crashed
// rebuild of the same spec is continued, another spec's (or one that crashed before it
// recorded its spec) is cleared first.
func (b Rebuilder) claimGeneration(ctx context.Context, old *checkpoint.Checkpoint, plan RebuildPlan) (*checkpoint.Checkpoint, error) {
	next := checkpoint.Generation{Number: old.Generation().Number + 1}
	store := checkpoint.GenerationStore(b.Root, next)
	rec, err := checkpoint.ReadRebuildRecord(ctx, store)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound) || err == nil && rec.Fingerprint != b.Fingerprint || errors.Is(err, checkpoint.ErrDamaged):
		if err := clearStore(ctx, store); err != nil {
			return nil, fmt.Errorf("rebuild: clear %s: %w", store.Location(), err)
		}
		if b.Clear != nil {
			if err := b.Clear(ctx); err != nil {
				return nil, fmt.Errorf("rebuild: %w", err)
			}
		}
	case err != nil:
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	meta := old.Metadata()
	ckpt, err := checkpoint.Claim(ctx, store, meta.Owner, checkpoint.WithQueryID(meta.ID), checkpoint.WithClock(b.Now))
	if err != nil {
		return nil, fmt.Errorf("rebuild: claim %s: %w", store.Location(), err)
	}
	rec = checkpoint.RebuildRecord{Fingerprint: b.Fingerprint, From: old.Generation().Number, Batches: plan.Batches}
	if err := checkpoint.PutRebuildRecord(ctx, store, rec); err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	return ckpt, nil
}

// replayLog runs, in r's generation, every committed batch of old it has not run yet, with
// old's boundaries, and carries old's pending batch over. It returns the batches it ran
// and their input rows.
func (r *run) replayLog(ctx context.Context, old *checkpoint.Checkpoint, plan RebuildPlan, progress func(done, total int64, p Progress)) (ran, rows int64, err error) {
	report := func(p Progress) {
		ran++
		rows += p.NumInputRows
		if progress != nil {
			progress(p.Batch+1, plan.Batches, p)
		}
	}
	if r.replay != nil && r.replay.id < plan.Batches {
		p, err := r.execute(ctx, r.replay, r.now(), newPhases(r.q.opts.clock))
		if err != nil {
			return ran, rows, err
		}
		report(p)
	}
	for r.next < plan.Batches || r.next == plan.Pending && r.replay == nil {
		o, err := old.Offsets(ctx, r.next)
		if err != nil {
			return ran, rows, fmt.Errorf("rebuild batch %d: %w", r.next, err)
		}
		bp := &batchPlan{
			id:              o.BatchID,
			time:            time.UnixMilli(o.BatchTimestampMs).UTC(),
			watermarkMs:     r.watermarkMs,
			lateWatermarkMs: r.ranWatermarkMs,
			starts:          maps.Clone(r.starts),
			ends:            map[string]Offset{},
			joins:           o.Joins,
		}
		entry := checkpoint.Offsets{BatchID: bp.id, BatchWatermarkMs: bp.watermarkMs, BatchTimestampMs: o.BatchTimestampMs, Conf: r.conf, Joins: o.Joins}
		for _, s := range o.Sources {
			if r.q.hasSource(s.Source) {
				bp.ends[s.Source] = s.Offset
				entry.Sources = append(entry.Sources, s)
			}
		}
		if err := r.ckpt.AddOffsets(ctx, entry); err != nil {
			return ran, rows, r.fenced(err, bp.id, "offsets")
		}
		r.reached(PhaseOffsetsWritten, bp.id)
		if bp.id == plan.Pending {
			return ran, rows, nil // the next run's first batch
		}
		p, err := r.execute(ctx, bp, r.now(), newPhases(r.q.opts.clock))
		if err != nil {
			return ran, rows, err
		}
		report(p)
	}
	return ran, rows, nil
}

// seal ends old at the batch after head's planned one: it creates that batch's offsets entry
// as a seal (checkpoint.ConfSealed), so a writer still running on old loses its next batch
// with ErrFenced. A seal an earlier attempt wrote is kept; when old moved on since head was
// read, the error wraps ErrFenced.
func seal(ctx context.Context, old *checkpoint.Checkpoint, head checkpoint.Head, next int64) error {
	if head.Sealed != nil {
		return nil
	}
	last := head.Planned
	conf := maps.Clone(last.Conf)
	if conf == nil {
		conf = map[string]string{}
	}
	conf[checkpoint.ConfSealed] = fmt.Sprintf("generation %d", next)
	o := checkpoint.Offsets{BatchID: last.BatchID + 1, BatchWatermarkMs: last.BatchWatermarkMs, BatchTimestampMs: last.BatchTimestampMs, Conf: conf, Sources: last.Sources, Joins: last.Joins}
	w, err := checkpoint.Claim(ctx, old.Store(), old.Metadata().Owner)
	if err != nil {
		return err
	}
	return w.AddOffsets(ctx, o)
}

// SpecFingerprint identifies the spec a generation is rebuilt for.
func SpecFingerprint(spec *v1.StreamingQuerySpec) (string, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("rebuild: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// clearStore deletes every object of s.
func clearStore(ctx context.Context, s checkpoint.Store) error {
	keys, err := checkpoint.ListKeys(ctx, s, "")
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := s.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// discardSink is a rebuild's sink: the replayed batches' output was written when they
// first ran.
type discardSink struct{}

func (discardSink) Write(context.Context, *Batch) error { return nil }
