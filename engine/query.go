package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/internal/storeconn"
	"github.com/lockstep-dev/lockstep/plan"
)

// Pinned settings: recorded in every offsets entry from the first batch on
// and kept on restart, whatever the spec says now.
const (
	// ConfStatePartitions is spec.stateStore.partitions: state keys are
	// hashed into this many partitions, so it can never change.
	ConfStatePartitions = "lockstep.stateStore.partitions"
)

// Query is a compiled streaming query, ready to run once. New compiles it;
// Run executes micro-batches until the trigger is done, Stop is called or an
// error occurs.
type Query struct {
	obj     *v1.StreamingQuery
	spec    *v1.StreamingQuerySpec
	reg     *Registry
	opts    options
	outCols v1.Columns
	steps   []step
	// interval is a processingTime trigger's (plan.Plan.Interval).
	interval time.Duration
	// s3Stats counts the retries of every S3 location the query opens; a
	// batch's progress reports its share.
	s3Stats s3.Stats

	running  atomic.Bool
	stopOnce sync.Once
	stop     chan struct{}
}

// New compiles q with the components of reg. It validates the spec, checks
// that reg has every source and sink kind it names, and compiles every CEL expression
// once. It does no I/O. An invalid query is an *InvalidSpecError listing
// every problem. q is copied and defaulted; later changes to it do not
// affect the Query.
func New(q *v1.StreamingQuery, reg *Registry, opts ...Option) (*Query, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt.apply(&o)
	}
	obj := q.DeepCopy()
	obj.Default()
	spec := &obj.Spec
	// Every problem at once: the spec's own, then the kinds this program
	// does not run.
	pl, errs := plan.Compile(obj)
	for i := range spec.Sources {
		k := spec.Sources[i].Kind()
		if _, ok := reg.sources[k]; !ok && k != "" {
			errs = append(errs, field.NotSupported(field.NewPath("spec", "sources").Index(i).Child(string(k)), k, reg.SourceKinds()))
		}
	}
	for i := range spec.Transform {
		if j := spec.Transform[i].Join; j != nil && j.Static != nil {
			if k := j.Static.Kind(); k != "" && reg.statics[k].new == nil {
				errs = append(errs, field.NotSupported(field.NewPath("spec", "transform").Index(i).Child("join", "static", string(k)), k, reg.StaticKinds()))
			}
		}
	}
	if k := spec.Sink.Kind(); reg.sinks[k].new == nil && k != "" {
		errs = append(errs, field.NotSupported(field.NewPath("spec", "sink").Child(string(k)), k, reg.SinkKinds()))
	}
	if len(errs) > 0 {
		return nil, &InvalidSpecError{Errs: errs}
	}
	steps, errs := compileSteps(pl)
	if len(errs) > 0 {
		return nil, &InvalidSpecError{Errs: errs}
	}
	return &Query{
		obj:      obj,
		spec:     spec,
		reg:      reg,
		opts:     o,
		outCols:  pl.Output(),
		steps:    steps,
		interval: pl.Interval,
		stop:     make(chan struct{}),
	}, nil
}

// Columns returns the columns of the rows the sink receives.
func (q *Query) Columns() v1.Columns { return q.outCols }

// Guarantee returns the query's delivery guarantee (GuaranteeOf); Run reports it in Start.
func (q *Query) Guarantee() Guarantee { return GuaranteeOf(q.spec) }

// Stop asks a run to end at the next batch boundary: the batch in progress
// finishes and commits, no new one starts, and Run returns a Summary with
// StopRequested. It may be called from any goroutine, any number of times,
// before or during Run.
func (q *Query) Stop() { q.stopOnce.Do(func() { close(q.stop) }) }

func (q *Query) stopped() bool {
	select {
	case <-q.stop:
		return true
	default:
		return false
	}
}

// Run runs the query on its checkpoint: it claims the checkpoint, finishes
// a batch that an earlier run planned but did not commit, then runs batches
// as the trigger says. It returns when the trigger is done (availableNow,
// once), after Stop at a batch boundary, or on the first error. Cancelling
// ctx aborts at once, even mid-batch; the next run replays that batch.
//
// Errors: ErrRefused (with checkpoint.ErrOwnerMismatch, ErrOwnedByAnotherWriter
// or the start guard's error) when the checkpoint refuses this query;
// anything else is a runtime failure. Run may be called once per Query.
func (q *Query) Run(ctx context.Context) (Summary, error) {
	if !q.running.CompareAndSwap(false, true) {
		return Summary{}, errors.New("run query: a Query runs once; compile a new one")
	}
	began := q.opts.clock.Now()
	sum := Summary{LastCommitted: -1}
	finish := func(reason StopReason, err error) (Summary, error) {
		sum.Reason = reason
		sum.Duration = q.opts.clock.Since(began)
		sum.DurationMs = sum.Duration.Milliseconds()
		return sum, err
	}
	if q.spec.Suspend {
		return finish(StopSuspended, nil)
	}
	r, err := q.openRebuilding(ctx)
	if err != nil {
		return finish("", err)
	}
	defer r.close()
	sum.QueryID, sum.LastCommitted = r.queryID, r.lastCommitted
	onBatch := func(p Progress) {
		sum.Batches++
		sum.NumInputRows += p.NumInputRows
		sum.NumOutputRows += p.NumOutputRows
		sum.NumMalformedRows += p.NumMalformedRows
		sum.LastCommitted = p.Batch
		if q.opts.observer != nil {
			q.opts.observer.Committed(p)
		}
	}
	if q.opts.observer != nil {
		q.opts.observer.Started(r.start)
	}
	trig := q.spec.Trigger
	if trig.AvailableNow {
		for _, s := range r.sources {
			if an, ok := s.src.(AvailableNowSource); ok {
				if err := an.PrepareAvailableNow(ctx, r.now()); err != nil {
					return finish("", fmt.Errorf("source %s: prepare availableNow: %w", s.name, err))
				}
			}
		}
	}
	if r.replay != nil && !q.stopped() {
		p, err := r.execute(ctx, r.replay, q.opts.clock.Now(), newPhases(q.opts.clock))
		if err != nil {
			return finish("", err)
		}
		onBatch(p)
	}
	// step plans and runs one new batch; ran is false when no source had
	// new data.
	step := func(limit bool) (ran bool, err error) {
		began := q.opts.clock.Now()
		bp, ph, err := r.plan(ctx, limit)
		if err != nil {
			return false, err
		}
		if bp == nil {
			if idle, ok := q.opts.observer.(IdleObserver); ok {
				idle.Idle(q.opts.clock.Now())
			}
			return false, nil
		}
		p, err := r.execute(ctx, bp, began, ph)
		if err != nil {
			return true, err
		}
		onBatch(p)
		return true, nil
	}
	switch {
	case trig.Once:
		if !q.stopped() {
			if _, err := step(false); err != nil {
				return finish("", err)
			}
		}
		return finish(StopTriggerDone, nil)
	case trig.AvailableNow:
		for !q.stopped() {
			ran, err := step(true)
			if err != nil {
				return finish("", err)
			}
			if !ran {
				return finish(StopTriggerDone, nil)
			}
		}
	case trig.ProcessingTime != "":
		interval := q.interval
		if interval <= 0 {
			return finish("", fmt.Errorf("trigger processingTime %q: want a positive duration", trig.ProcessingTime))
		}
		for !q.stopped() {
			at := q.opts.clock.Now()
			if _, err := step(true); err != nil {
				return finish("", err)
			}
			if err := q.waitUntil(ctx, nextBoundary(at, interval)); err != nil {
				return finish("", err)
			}
		}
	default:
		for !q.stopped() {
			// A wake-up from before this plan is answered by it.
			select {
			case <-r.wake:
			default:
			}
			ran, err := step(true)
			if err != nil {
				return finish("", err)
			}
			if !ran {
				if err := q.waitIdle(ctx, r.wake); err != nil {
					return finish("", err)
				}
			}
		}
	}
	return finish(StopRequested, nil)
}

// nextBoundary returns the first multiple of interval since the epoch after
// at: processing-time batches start on these boundaries, and a batch that
// overran one starts the next at once (as Spark's ProcessingTimeExecutor).
func nextBoundary(at time.Time, interval time.Duration) time.Time {
	return time.Unix(0, (at.UnixNano()/int64(interval)+1)*int64(interval))
}

// waitUntil waits until the clock reaches t, Stop is called or ctx ends
// (then it returns ctx's error).
func (q *Query) waitUntil(ctx context.Context, t time.Time) error {
	return q.wait(ctx, t.Sub(q.opts.clock.Now()))
}

func (q *Query) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := q.opts.clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C():
		return nil
	case <-q.stop:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitIdle waits out the idle poll of the default trigger, or less: until a
// source wakes the run (new data), Stop is called or ctx ends (then it
// returns ctx's error).
func (q *Query) waitIdle(ctx context.Context, wake <-chan struct{}) error {
	timer := q.opts.clock.NewTimer(q.opts.idlePoll)
	defer timer.Stop()
	select {
	case <-timer.C():
		return nil
	case <-wake:
		return nil
	case <-q.stop:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sourceRun is one source of a run.
type sourceRun struct {
	name string
	src  Source
}

// run is the state of one Run: the claimed checkpoint, the components, and
// where the next batch starts.
type run struct {
	q       *Query
	ckpt    *checkpoint.Checkpoint
	queryID string
	sources []sourceRun
	sink    Sink
	start   Start
	// replay is the batch to re-run first, nil if none.
	replay *batchPlan
	// next is the id of the next batch to plan.
	next int64
	// starts holds each source's committed end offset: the start of the
	// next batch. A source absent from it starts at its starting position.
	starts map[string]Offset
	// watermarkMs is the watermark of the next batch to plan.
	watermarkMs int64
	// ranWatermarkMs is the watermark the newest committed batch ran with
	// (its offsets entry's; 0 before the first batch): the next batch's
	// late-event watermark, and the one state was last evicted by.
	ranWatermarkMs int64
	conf           map[string]string
	lastCommitted  int64
	purgers        []checkpoint.PurgeFunc
	// state holds the stateful steps' stores (stateful_step.go).
	state *stateRun
	// s3Seen is the query's S3 stats when the last batch committed.
	s3Seen s3.StatsSnapshot
	// joinSnaps holds, per stream–static join, the snapshot the newest planned batch joins
	// against (join.go).
	joinSnaps map[string]checkpoint.JoinSnapshot
	// wake holds a wake-up from a source (SourceEnv.Wake) until the
	// default trigger's next plan.
	wake chan struct{}
}

// wakeUp is every source's SourceEnv.Wake.
func (r *run) wakeUp() {
	select {
	case r.wake <- struct{}{}:
	default: // one is pending already
	}
}

// openRebuilding is open, after a rebuild of the state when the start guard asks for one
// (ErrRebuildRequired).
func (q *Query) openRebuilding(ctx context.Context) (*run, error) {
	r, err := q.open(ctx)
	if !errors.Is(err, ErrRebuildRequired) {
		return r, err
	}
	q.opts.logger.Warn("Rebuilding the state for the new spec from the retained input first", "reason", err)
	opts := RebuildOptions{Reason: err.Error()}
	if o, ok := q.opts.observer.(RebuildObserver); ok {
		opts.Progress = o.Rebuilt
	}
	if _, err := q.Rebuild(ctx, opts); err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	return q.open(ctx)
}

// open claims the checkpoint, reads where it stands, asks the start guard,
// and builds the components.
func (q *Query) open(ctx context.Context) (*run, error) {
	root, err := q.openStore(ctx)
	if err != nil {
		return nil, err
	}
	ckpt, err := checkpoint.Claim(ctx, root, q.owner(), checkpoint.WithClock(q.opts.clock.Now))
	if errors.Is(err, checkpoint.ErrOwnerMismatch) {
		return nil, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if err != nil {
		return nil, fmt.Errorf("claim checkpoint: %w", err)
	}
	return q.begin(ctx, ckpt, nil)
}

// openStore opens the root of the query's checkpoint location.
func (q *Query) openStore(ctx context.Context) (checkpoint.Store, error) {
	loc, err := q.location()
	if err != nil {
		return nil, err
	}
	opts, err := q.s3Options(storeconn.From{})
	if err != nil {
		return nil, fmt.Errorf("open checkpoint: %w", err)
	}
	store, err := checkpoint.Open(ctx, loc, checkpoint.WithS3(s3.Opener(opts...)))
	if err != nil {
		return nil, fmt.Errorf("open checkpoint: %w", err)
	}
	if obs, ok := q.opts.observer.(StoreObserver); ok {
		// The real clock: a test's fake clock would make every operation take no time.
		store = observedStore{store: store, obs: obs, now: time.Now}
	}
	return store, nil
}

// owner is who the query claims its checkpoint as.
func (q *Query) owner() checkpoint.Owner {
	if q.opts.owner != nil {
		return *q.opts.owner
	}
	return checkpoint.Owner{Namespace: q.obj.Namespace, Name: q.obj.Name, UID: string(q.obj.UID)}
}

// begin reads where the claimed checkpoint stands, asks the start guard and builds the
// components. A rebuild (rebuild.go) passes the sink its batches write to instead of the
// spec's; nil builds the spec's.
func (q *Query) begin(ctx context.Context, ckpt *checkpoint.Checkpoint, sink Sink) (*run, error) {
	head, err := ckpt.Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	r := &run{
		q:             q,
		ckpt:          ckpt,
		queryID:       ckpt.Metadata().ID,
		sink:          sink,
		next:          head.Next(),
		starts:        map[string]Offset{},
		lastCommitted: -1,
		wake:          make(chan struct{}, 1),
		joinSnaps:     map[string]checkpoint.JoinSnapshot{},
	}
	if head.Committed != nil {
		r.lastCommitted = head.Committed.BatchID
	}
	if err := r.recover(ctx, head); err != nil {
		return nil, err
	}
	if g := q.opts.guard; g != nil {
		if err := g(ctx, GuardRequest{Checkpoint: ckpt, Spec: q.spec.DeepCopy(), Head: head, NextBatch: r.next, Getenv: q.opts.getenv,
			Retained: func(ctx context.Context, rp checkpoint.Replay) error { return q.CheckRetained(ctx, ckpt, rp) }}); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrRefused, err)
		}
	}
	if s := head.Sealed; s != nil {
		return nil, fmt.Errorf("%w: %s was sealed at batch %d by a rebuild to its %s, which has not switched yet: run the rebuild again to finish it (lockstep checkpoint rebuild, or the new spec with spec.onIncompatibleChange: rebuild), or delete %s/%s to cancel it",
			ErrRefused, ckpt.Location(), s.BatchID, s.Conf[checkpoint.ConfSealed], ckpt.Location(), checkpoint.OffsetsKey(s.BatchID))
	}
	if err := r.build(ctx); err != nil {
		r.close()
		return nil, err
	}
	if err := r.openState(ctx, head); err != nil {
		r.close()
		return nil, err
	}
	r.start = Start{
		QueryID:       r.queryID,
		Location:      ckpt.Location(),
		Owner:         q.owner(),
		New:           head.Planned == nil,
		NextBatch:     r.next,
		Replay:        r.replay != nil,
		LastCommitted: r.lastCommitted,
		Trigger:       q.spec.Trigger.Name(),
		Guarantee:     r.q.Guarantee(),
		Pinned:        maps.Clone(r.conf),
	}
	return r, nil
}

// location returns the checkpoint location to use, local paths made absolute.
func (q *Query) location() (string, error) {
	loc := q.opts.location
	if loc == "" {
		loc = q.spec.Checkpoint.Location
	}
	if loc == "" {
		return "", errors.New("no checkpoint location: set spec.checkpoint.location or pass one")
	}
	parsed, err := checkpoint.ParseLocation(loc)
	if err != nil {
		return "", err
	}
	if parsed, err = parsed.Abs(); err != nil {
		return "", err
	}
	return parsed.String(), nil
}

// recover sets where the run starts from the checkpoint's head (DESIGN §3):
// with no batch, at batch 0; when the newest planned batch L was committed,
// at L+1 with today's settings; otherwise by re-running L with exactly its
// logged offsets, timestamp and watermark.
func (r *run) recover(ctx context.Context, head checkpoint.Head) error {
	today := map[string]string{ConfStatePartitions: strconv.Itoa(int(r.q.spec.StateStore.Partitions))}
	if head.Planned == nil {
		r.conf = today
		return nil
	}
	planned := head.Planned
	for _, j := range planned.Joins {
		r.joinSnaps[j.Join] = j
	}
	r.conf = maps.Clone(planned.Conf)
	if r.conf == nil {
		r.conf = map[string]string{}
	}
	for k, v := range today {
		old, ok := r.conf[k]
		switch {
		case !ok:
			r.conf[k] = v
		case old != v:
			r.q.opts.logger.Warn("Kept setting pinned by the checkpoint", "setting", k, "checkpoint", old, "spec", v)
		}
	}
	if !head.Replay() {
		for _, s := range planned.Sources {
			r.starts[s.Source] = s.Offset
		}
		r.watermarkMs = head.Committed.NextBatchWatermarkMs
		r.ranWatermarkMs = planned.BatchWatermarkMs
		return nil
	}
	// The replay runs as the first attempt ran: its late-event watermark is
	// the one the batch before logged, as its starts are that batch's ends.
	starts := map[string]Offset{}
	if planned.BatchID > 0 {
		prev, err := r.ckpt.Offsets(ctx, planned.BatchID-1)
		if err != nil {
			return fmt.Errorf("replay batch %d: the previous batch's offsets are needed: %w", planned.BatchID, err)
		}
		for _, s := range prev.Sources {
			starts[s.Source] = s.Offset
		}
		r.ranWatermarkMs = prev.BatchWatermarkMs
	}
	bp := &batchPlan{
		id:              planned.BatchID,
		time:            time.UnixMilli(planned.BatchTimestampMs).UTC(),
		watermarkMs:     planned.BatchWatermarkMs,
		lateWatermarkMs: r.ranWatermarkMs,
		starts:          starts,
		ends:            map[string]Offset{},
		joins:           planned.Joins,
		replay:          true,
	}
	for _, s := range planned.Sources {
		if !r.q.hasSource(s.Source) {
			r.q.opts.logger.Warn("Skipped a removed source in a replayed batch", "batch", planned.BatchID, "source", s.Source)
			continue
		}
		bp.ends[s.Source] = s.Offset
	}
	maps.Copy(r.starts, starts)
	r.watermarkMs = planned.BatchWatermarkMs
	r.replay = bp
	return nil
}

func (q *Query) hasSource(name string) bool {
	for i := range q.spec.Sources {
		if q.spec.Sources[i].Name == name {
			return true
		}
	}
	return false
}

// s3Options are the options of an S3 location the query opens: its settings
// resolved from the environment (and from a source's or sink's own spec.s3),
// with the engine's options and the counting of retries into the query's
// stats. The settings of a spec.s3 apply over the engine's options.
func (q *Query) s3Options(from storeconn.From) ([]s3.Option, error) {
	env, err := storeconn.Resolve(q.opts.getenv, storeconn.From{})
	if err != nil {
		return nil, err
	}
	opts := make([]s3.Option, 0, len(q.opts.s3)+3)
	opts = append(opts, s3.WithSettings(env))
	opts = append(opts, q.opts.s3...)
	if from.Conn != nil {
		own, err := storeconn.Resolve(q.opts.getenv, from)
		if err != nil {
			return nil, err
		}
		opts = append(opts, s3.WithSettings(own))
	}
	return append(opts, s3.WithStats(&q.s3Stats)), nil
}

// folderOpener opens the locations of the source or sink called name (""
// for the sink): with the engine's S3 settings, and its own spec.s3 on top.
func (q *Query) folderOpener(conn *v1.S3Connection, name string) FolderOpener {
	opts, err := q.s3Options(storeconn.From{Conn: conn, Name: name})
	return func(location string) (checkpoint.Store, error) {
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", location, err)
		}
		return s3.OpenFolder(location, opts...)
	}
}

// build constructs the sources and the sink.
func (r *run) build(ctx context.Context) error {
	q := r.q
	for i := range q.spec.Sources {
		spec := &q.spec.Sources[i]
		env := SourceEnv{
			Name:    spec.Name,
			QueryID: r.queryID,
			Store:   checkpoint.Sub(r.ckpt.Store(), checkpoint.SourceKey(spec.Name, "")),
			Open:    q.folderOpener(spec.S3Connection(), spec.Name),
			Logger:  q.opts.logger.With("source", spec.Name),
			Getenv:  q.opts.getenv,
			Wake:    r.wakeUp,
		}
		src, err := q.reg.sources[spec.Kind()].new(ctx, spec, env)
		if err != nil {
			return fmt.Errorf("source %s: %w", spec.Name, err)
		}
		r.sources = append(r.sources, sourceRun{name: spec.Name, src: src})
		if p, ok := src.(PurgingSource); ok {
			r.purgers = append(r.purgers, func(ctx context.Context, _ checkpoint.Store, oldest int64) error {
				return p.Purge(ctx, oldest)
			})
		}
	}
	if err := r.buildJoins(ctx); err != nil {
		return err
	}
	if r.sink != nil {
		return nil // a rebuild's
	}
	hook := q.opts.hook
	if hook == nil {
		hook = func(Phase, int64) {}
	}
	keys, _ := q.spec.UpsertKeys()
	sink, err := q.reg.sinks[q.spec.Sink.Kind()].new(ctx, &q.spec.Sink, SinkEnv{
		QueryID:    r.queryID,
		Columns:    q.outCols,
		OutputMode: q.spec.OutputMode,
		Keys:       keys,
		Open:       q.folderOpener(q.spec.Sink.S3Connection(), ""),
		Stdout:     q.opts.stdout,
		Logger:     q.opts.logger.With("sink", string(q.spec.Sink.Kind())),
		Getenv:     q.opts.getenv,
		Reached:    hook,
	})
	if err != nil {
		return fmt.Errorf("sink %s: %w", q.spec.Sink.Kind(), err)
	}
	r.sink = sink
	return nil
}

// close closes the components that are io.Closers, and the state stores.
func (r *run) close() {
	r.closeState()
	for _, s := range r.sources {
		if c, ok := s.src.(io.Closer); ok {
			if err := c.Close(); err != nil {
				r.q.opts.logger.Warn("Closed source with an error", "source", s.name, "error", err)
			}
		}
	}
	if c, ok := r.sink.(io.Closer); ok {
		if err := c.Close(); err != nil {
			r.q.opts.logger.Warn("Closed sink with an error", "error", err)
		}
	}
}

func (r *run) now() time.Time { return r.q.opts.clock.Now() }
