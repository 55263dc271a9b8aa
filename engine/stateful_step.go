package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/interpreter"

	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/state"
	"github.com/lockstep-dev/lockstep/engine/stateful"
	"github.com/lockstep-dev/lockstep/plan"
)

// StateOperatorProgress describes what a batch did to one stateful
// operator's state, as Spark's StateOperatorProgress.
type StateOperatorProgress struct {
	// Operator is the operator's name in the checkpoint; Kind its step kind.
	Operator string `json:"operator"`
	Kind     string `json:"kind"`
	// Version is the state version the batch wrote (batch id + 1).
	Version int64 `json:"version"`
	// NumRowsTotal counts the keys after the batch; NumRowsUpdated and
	// NumRowsRemoved the keys it put and removed (evicted).
	NumRowsTotal   int64 `json:"numRowsTotal"`
	NumRowsUpdated int64 `json:"numRowsUpdated"`
	NumRowsRemoved int64 `json:"numRowsRemoved"`
	// NumRowsDroppedByWatermark counts the input rows dropped as late.
	NumRowsDroppedByWatermark int64 `json:"numRowsDroppedByWatermark"`
	// MemoryUsedBytes estimates the state's memory.
	MemoryUsedBytes int64 `json:"memoryUsedBytes"`
	// CommitTimeMs is the time to write the batch's state files.
	CommitTimeMs int64 `json:"commitTimeMs"`
	// DeltaFiles and DeltaBytes count the delta files written.
	DeltaFiles int   `json:"deltaFiles"`
	DeltaBytes int64 `json:"deltaBytes"`
}

// watermarkStep is a compiled watermark step: rows pass unchanged, and it
// notes their newest event time for the next batch's watermark.
type watermarkStep struct {
	wm *stateful.Watermark
}

func (s *watermarkStep) process(_ *stepBatch, rows []Row) ([]Row, error) {
	for _, r := range rows {
		s.wm.Observe(r)
	}
	return rows, nil
}

// statefulStep is a compiled aggregate or dropDuplicates: a stateKeeper with
// one store.
type statefulStep struct {
	name string
	kind v1.StepKind
	op   stateful.Operator
	// store is the operator's state, open from open to close; metrics what
	// the batch in progress did to it.
	store   *state.Store
	metrics stateful.Metrics
}

func (s *statefulStep) process(b *stepBatch, rows []Row) ([]Row, error) {
	in := make([]stateful.Row, len(rows))
	for i, row := range rows {
		in[i] = row
	}
	out, m, err := s.op.Process(s.store, in, stateful.Batch{WatermarkMs: b.watermarkMs, LateWatermarkMs: b.lateWatermarkMs})
	if err != nil {
		return nil, err
	}
	s.metrics = m
	rows = rows[:0]
	for _, row := range out {
		rows = append(rows, row)
	}
	return rows, nil
}

func (s *statefulStep) open(ctx context.Context, open openStore) (err error) {
	s.store, err = open(ctx, s.op.Metadata())
	return err
}

func (s *statefulStep) commit(ctx context.Context, b *stepBatch, write writeStore) ([]StateOperatorProgress, error) {
	p, err := write(ctx, b, s.store, s.kind, s.metrics.DroppedByWatermark)
	if err != nil {
		return nil, err
	}
	return []StateOperatorProgress{p}, nil
}

func (s *statefulStep) adopt() { s.metrics = stateful.Metrics{} }

func (s *statefulStep) close(log *slog.Logger) {
	if s.store == nil {
		return
	}
	if err := s.store.Close(); err != nil {
		log.Warn("Closed state store with an error", "operator", s.name, "error", err)
	}
}

// compileStatefulStep compiles a watermark, aggregate or dropDuplicates step
// of spec.
func compileStatefulStep(spec *v1.StreamingQuerySpec, ps *plan.Step) (step, *field.Error) {
	st, p, cols, eventTime := ps.Spec, ps.Path, ps.In, ps.EventTime
	switch ps.Kind {
	case v1.StepWatermark:
		wm, err := stateful.NewWatermark(st.Watermark.Column, ps.Durations.Delay, cols)
		if err != nil {
			return nil, field.Invalid(p.Child("watermark"), st.Watermark.Column, err.Error())
		}
		return &watermarkStep{wm: wm}, nil
	case v1.StepAggregate:
		name := ps.Operator.Name
		cfg := stateful.AggregateConfig{
			Name: name, Spec: st.Aggregate, Input: cols, EventTime: eventTime, WindowTime: ps.WindowTime, Mode: spec.OutputMode,
			Size: ps.Durations.Size, Slide: ps.Durations.Slide, Gap: ps.Durations.Gap,
		}
		var (
			op  stateful.Operator
			err error
		)
		if st.Aggregate.Session() != nil {
			if ps.SessionGap != nil {
				gap, ferr := compileGap(p.Child("aggregate"), ps)
				if ferr != nil {
					return nil, ferr
				}
				cfg.GapOf = gap.of
			}
			op, err = stateful.NewSession(cfg)
		} else {
			op, err = stateful.NewAggregate(cfg)
		}
		if err != nil {
			return nil, field.Invalid(p.Child("aggregate"), name, err.Error())
		}
		return &statefulStep{name: name, kind: v1.StepAggregate, op: op}, nil
	case v1.StepDropDuplicates:
		name := ps.Operator.Name
		d, err := stateful.NewDropDuplicates(stateful.DropDuplicatesConfig{
			Name: name, Spec: st.DropDuplicates, Input: cols, EventTime: eventTime,
		})
		if err != nil {
			return nil, field.Invalid(p.Child("dropDuplicates"), name, err.Error())
		}
		return &statefulStep{name: name, kind: v1.StepDropDuplicates, op: d}, nil
	}
	return nil, field.NotSupported(p, ps.Kind, []v1.StepKind{v1.StepFilter, v1.StepSelect, v1.StepWatermark, v1.StepAggregate, v1.StepDropDuplicates, v1.StepJoin})
}

// gapEval evaluates a session window's gapExpr for a row. It is used by one
// goroutine at a time (the aggregate's Process).
type gapEval struct {
	prg   cel.Program
	act   rowActivation
	frame *interpreter.ExecutionFrame
}

// compileGap compiles the gapExpr of the aggregate step ps.
func compileGap(p *field.Path, ps *plan.Step) (*gapEval, *field.Error) {
	prg, err := program(ps.Env, ps.SessionGap.AST)
	if err != nil {
		return nil, field.Invalid(p, ps.SessionGap.Text, err.Error())
	}
	g := &gapEval{prg: prg, act: rowActivation{index: columnIndex(ps.In)}}
	if g.frame, err = interpreter.NewExecutionFrame(&g.act); err != nil {
		return nil, field.InternalError(p, err)
	}
	return g, nil
}

// of returns the gap of row r; false when it cannot be evaluated (a null
// input), as a select yields null then.
func (g *gapEval) of(r stateful.Row) (time.Duration, bool) {
	g.act.row = r
	v, _, err := g.prg.Eval(g.frame)
	if err != nil {
		return 0, false
	}
	d, ok := v.Value().(time.Duration)
	return d, ok
}

// stateRun is a run's stateful part: the steps that keep state, the
// watermark step and the stream joins.
type stateRun struct {
	keepers   []stateKeeper
	watermark *watermarkStep
	joins     []*streamJoinStep
}

// openState opens and loads the state of every stateful step at the version
// of the batch the run executes first (its replay, or the next new batch):
// the state of the last committed batch. It registers state retention with
// the logs' purge.
func (r *run) openState(ctx context.Context, head checkpoint.Head) error {
	sr := &stateRun{}
	for _, st := range r.q.steps {
		switch s := st.(type) {
		case *watermarkStep:
			sr.watermark = s
		case *streamJoinStep:
			sr.joins = append(sr.joins, s)
		}
		if k, ok := st.(stateKeeper); ok {
			sr.keepers = append(sr.keepers, k)
		}
	}
	r.state = sr
	if len(sr.keepers) == 0 {
		return nil
	}
	parts, err := strconv.Atoi(r.conf[ConfStatePartitions])
	if err != nil || parts < 1 {
		return fmt.Errorf("state partitions %q pinned by the checkpoint: want a positive number", r.conf[ConfStatePartitions])
	}
	open := func(ctx context.Context, meta state.Metadata) (*state.Store, error) {
		st, err := state.Open(ctx, r.ckpt.Store(), meta, state.Options{
			Partitions: parts,
			Logger:     r.q.opts.logger.With("operator", meta.Operator),
		})
		if errors.Is(err, state.ErrIncompatible) {
			return nil, fmt.Errorf("%w: %w", ErrRefused, err)
		}
		if err != nil {
			return nil, err
		}
		if err := st.Load(ctx, r.next); err != nil {
			st.Close()
			return nil, err
		}
		return st, nil
	}
	for _, k := range sr.keepers {
		if err := k.open(ctx, open); err != nil {
			return err
		}
	}
	for _, j := range sr.joins {
		j.restoreWatermarks(head.Committed)
	}
	r.purgers = append(r.purgers, checkpoint.PurgeState)
	return nil
}

// closeState stops the stores' snapshot goroutines, after their snapshots.
func (r *run) closeState() {
	if r.state == nil {
		return
	}
	for _, k := range r.state.keepers {
		k.close(r.q.opts.logger)
	}
}

// newStepBatch is what the steps see of the batch bp; right holds the rows of each stream
// join's right source, by name.
func newStepBatch(bp *batchPlan, right map[string][]Row) *stepBatch {
	return &stepBatch{id: bp.id, watermarkMs: bp.watermarkMs, lateWatermarkMs: bp.lateWatermarkMs, queryWatermarkMs: bp.watermarkMs, right: right}
}

// runSteps runs the steps over rows of the batch b: the whole batch, or one chunk of a
// streamed one (streamBatch).
func (r *run) runSteps(b *stepBatch, rows []Row) ([]Row, error) {
	for _, st := range r.q.steps {
		var err error
		if rows, err = st.process(b, rows); err != nil {
			return nil, fmt.Errorf("batch %d: %w", b.id, err)
		}
	}
	return rows, nil
}

// commitState writes the batch's state (version bp.id+1) of every operator
// and reports it in p.
func (r *run) commitState(ctx context.Context, bp *batchPlan, p *Progress) error {
	if r.state == nil {
		return nil
	}
	b := &stepBatch{id: bp.id, watermarkMs: bp.watermarkMs}
	for _, k := range r.state.keepers {
		ops, err := k.commit(ctx, b, r.commitStore)
		if err != nil {
			return err
		}
		p.StateOperators = append(p.StateOperators, ops...)
	}
	return nil
}

// commitStore writes an operator's state store for the batch and returns
// the operator's progress: kind names the operator's step, dropped the
// input rows it dropped as late.
func (r *run) commitStore(ctx context.Context, b *stepBatch, st *state.Store, kind v1.StepKind, dropped int64) (StateOperatorProgress, error) {
	began := r.q.opts.clock.Now()
	name := st.Metadata().Operator
	cm, err := st.Commit(ctx)
	if err != nil {
		return StateOperatorProgress{}, r.fenced(err, b.id, "state of operator "+name)
	}
	return StateOperatorProgress{
		Operator:                  name,
		Kind:                      string(kind),
		Version:                   cm.Version,
		NumRowsTotal:              cm.Rows,
		NumRowsUpdated:            cm.Updated,
		NumRowsRemoved:            cm.Removed,
		NumRowsDroppedByWatermark: dropped,
		MemoryUsedBytes:           cm.MemoryBytes,
		CommitTimeMs:              r.q.opts.clock.Since(began).Milliseconds(),
		DeltaFiles:                cm.Files,
		DeltaBytes:                cm.Bytes,
	}, nil
}

// nextWatermark returns the watermark of the batch after bp: it moves with
// the newest event time the watermark step saw, never backwards; with a
// stream join, with both sides'. It changes nothing.
func (r *run) nextWatermark(bp *batchPlan) int64 {
	switch {
	case len(r.state.joins) > 0:
		// Each join's is the minimum of its sides' (never lower than now); the
		// query's the minimum of all (Spark's default multipleWatermarkPolicy).
		next := r.state.joins[0].nextMs
		for _, j := range r.state.joins[1:] {
			next = min(next, j.nextMs)
		}
		return next
	case r.state.watermark != nil:
		return r.state.watermark.wm.Next(bp.watermarkMs)
	}
	return bp.watermarkMs
}

// adoptState makes the batch whose commit just became durable the steps'
// past: the watermark step forgets the batch's event times, the stream join
// takes its sides' watermarks.
func (r *run) adoptState() {
	if w := r.state.watermark; w != nil {
		w.wm.Forget()
	}
	for _, k := range r.state.keepers {
		k.adopt()
	}
}

// noDataBatchDue reports whether a batch must run although no source has
// new data: the query keeps state and the watermark moved since the last
// batch, so windows may close and state may be evicted.
func (r *run) noDataBatchDue() bool {
	return r.state != nil && len(r.state.keepers) > 0 && r.watermarkMs > r.ranWatermarkMs
}
