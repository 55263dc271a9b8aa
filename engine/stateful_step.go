package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"

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

// watermarkStep is a compiled watermark step: rows pass unchanged, and the
// run notes their newest event time for the next batch's watermark.
type watermarkStep struct {
	wm *stateful.Watermark
}

// apply passes the rows; the run calls observe.
func (s *watermarkStep) apply(rows []Row) []Row { return rows }

func (s *watermarkStep) observe(rows []Row) {
	for _, r := range rows {
		s.wm.Observe(r)
	}
}

// statefulStep is a compiled aggregate or dropDuplicates. Its state lives in
// the run (run.state); the run calls process, never apply.
type statefulStep struct {
	name string
	kind v1.StepKind
	op   stateful.Operator
}

// apply is never called: a statefulStep needs its batch (run.transform).
func (s *statefulStep) apply(rows []Row) []Row { return rows }

// compileStatefulStep compiles a watermark, aggregate or dropDuplicates step
// of spec.
func compileStatefulStep(spec *v1.StreamingQuerySpec, ps *plan.Step) (step, *field.Error) {
	st, p, cols, eventTime := ps.Spec, ps.Path, ps.In, ps.EventTime
	switch st.Kind() {
	case v1.StepWatermark:
		wm, err := stateful.NewWatermark(st.Watermark, cols)
		if err != nil {
			return nil, field.Invalid(p.Child("watermark"), st.Watermark.Column, err.Error())
		}
		return &watermarkStep{wm: wm}, nil
	case v1.StepAggregate:
		name := ps.Operator.Name
		a, err := stateful.NewAggregate(stateful.AggregateConfig{
			Name: name, Spec: st.Aggregate, Input: cols, EventTime: eventTime, Mode: spec.OutputMode,
		})
		if err != nil {
			return nil, field.Invalid(p.Child("aggregate"), name, err.Error())
		}
		return &statefulStep{name: name, kind: v1.StepAggregate, op: a}, nil
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
	return nil, field.NotSupported(p, st.Kind(), []v1.StepKind{v1.StepFilter, v1.StepSelect, v1.StepWatermark, v1.StepAggregate, v1.StepDropDuplicates, v1.StepJoin})
}

// stateRun is a run's stateful part: each operator's store, the watermark,
// and what the batch in progress did.
type stateRun struct {
	stores    map[string]*state.Store
	ops       []*statefulStep
	watermark *watermarkStep
	// ranWatermarkMs is the watermark the newest committed batch ran with:
	// when the next watermark passes it, a batch runs even without new data,
	// so that windows close and state is evicted.
	ranWatermarkMs int64
	// metrics holds the batch's per-operator counts, in ops order.
	metrics []stateful.Metrics
	// join is the stream–stream join, nil if none (stateful_join.go).
	join *joinRun
}

// openState opens and loads the state of every stateful step at the version
// of the batch the run executes first (its replay, or the next new batch):
// the state of the last committed batch. It registers state retention with
// the logs' purge.
func (r *run) openState(ctx context.Context, head checkpoint.Head) error {
	sr := &stateRun{stores: map[string]*state.Store{}}
	for _, st := range r.q.steps {
		switch s := st.(type) {
		case *watermarkStep:
			sr.watermark = s
		case *statefulStep:
			sr.ops = append(sr.ops, s)
		}
	}
	if head.Planned != nil && !head.Replay() {
		sr.ranWatermarkMs = head.Planned.BatchWatermarkMs
	}
	r.state = sr
	if len(sr.ops) == 0 && !r.q.hasStreamJoin() {
		return nil
	}
	parts, err := strconv.Atoi(r.conf[ConfStatePartitions])
	if err != nil || parts < 1 {
		return fmt.Errorf("state partitions %q pinned by the checkpoint: want a positive number", r.conf[ConfStatePartitions])
	}
	for _, s := range sr.ops {
		st, err := state.Open(ctx, r.ckpt.Store(), s.op.Metadata(), state.Options{
			Partitions: parts,
			Logger:     r.q.opts.logger.With("operator", s.name),
		})
		if errors.Is(err, state.ErrIncompatible) {
			return fmt.Errorf("%w: %w", ErrRefused, err)
		}
		if err != nil {
			return err
		}
		sr.stores[s.name] = st
		if err := st.Load(ctx, r.next); err != nil {
			return err
		}
	}
	if err := r.openJoin(ctx, head, parts); err != nil {
		return err
	}
	r.purgers = append(r.purgers, checkpoint.PurgeState)
	return nil
}

// closeState stops the stores' snapshot goroutines, after their snapshots.
func (r *run) closeState() {
	if r.state == nil {
		return
	}
	for name, st := range r.state.stores {
		if err := st.Close(); err != nil {
			r.q.opts.logger.Warn("Closed state store with an error", "operator", name, "error", err)
		}
	}
	if j := r.state.join; j != nil {
		for i, st := range j.stores {
			if st == nil {
				continue
			}
			if err := st.Close(); err != nil {
				r.q.opts.logger.Warn("Closed state store with an error", "operator", j.step.op.Metadata()[i].Operator, "error", err)
			}
		}
	}
}

// transform runs the batch's rows through the steps: the watermark step
// notes event times, the stateful steps process the batch against their
// state with the batch's watermark. right holds the rows of a stream join's
// right source.
func (r *run) transform(bp *batchPlan, rows, right []Row) ([]Row, error) {
	if r.state != nil {
		r.state.metrics = r.state.metrics[:0]
	}
	for _, st := range r.q.steps {
		switch s := st.(type) {
		case *watermarkStep:
			s.observe(rows)
		case *statefulStep:
			in := make([]stateful.Row, len(rows))
			for i, row := range rows {
				in[i] = row
			}
			out, m, err := s.op.Process(r.state.stores[s.name], in, stateful.Batch{WatermarkMs: bp.watermarkMs})
			if err != nil {
				return nil, fmt.Errorf("batch %d: %w", bp.id, err)
			}
			rows = rows[:0]
			for _, row := range out {
				rows = append(rows, row)
			}
			r.state.metrics = append(r.state.metrics, m)
		case *streamJoinStep:
			out, err := r.joinBatch(bp, s, rows, right)
			if err != nil {
				return nil, fmt.Errorf("batch %d: %w", bp.id, err)
			}
			rows = out
		default:
			rows = st.apply(rows)
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
	for i, s := range r.state.ops {
		var m stateful.Metrics
		if i < len(r.state.metrics) {
			m = r.state.metrics[i]
		}
		op, err := r.commitStore(ctx, bp, r.state.stores[s.name], string(s.kind), m.DroppedByWatermark)
		if err != nil {
			return err
		}
		p.StateOperators = append(p.StateOperators, op)
	}
	return r.commitJoin(ctx, bp, p)
}

// commitStore writes an operator's state store for the batch and returns
// the operator's progress: kind names the operator's step, dropped the
// input rows it dropped as late.
func (r *run) commitStore(ctx context.Context, bp *batchPlan, st *state.Store, kind string, dropped int64) (StateOperatorProgress, error) {
	began := r.q.opts.clock.Now()
	name := st.Metadata().Operator
	cm, err := st.Commit(ctx)
	if err != nil {
		return StateOperatorProgress{}, r.fenced(err, bp.id, "state of operator "+name)
	}
	return StateOperatorProgress{
		Operator:                  name,
		Kind:                      kind,
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
// the newest event time the watermark step saw, never backwards.
func (r *run) nextWatermark(bp *batchPlan) int64 {
	r.state.ranWatermarkMs = bp.watermarkMs
	if j := r.state.join; j != nil {
		return j.nextMs
	}
	if r.state.watermark == nil {
		return bp.watermarkMs
	}
	return r.state.watermark.wm.Advance(bp.watermarkMs)
}

// noDataBatchDue reports whether a batch must run although no source has
// new data: the query keeps state and the watermark moved since the last
// batch, so windows may close and state may be evicted.
func (r *run) noDataBatchDue() bool {
	return r.state != nil && (len(r.state.ops) > 0 || r.state.join != nil) && r.watermarkMs > r.state.ranWatermarkMs
}
