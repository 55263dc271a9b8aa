package engine

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/state"
	"github.com/lockstep-dev/lockstep/engine/stateful"
	"github.com/lockstep-dev/lockstep/plan"
)

// streamJoinStep is a compiled stream–stream join: the rows flowing into it are
// the left side, the rows of source the right side. Its state lives in the
// run (run.state.join); the run calls joinBatch, never apply.
type streamJoinStep struct {
	name   string
	source string
	op     *stateful.StreamJoin
	// right tracks the right side's event time (join.stream.watermark).
	right *stateful.Watermark
	// out[i] is the operator's column (left columns, then right) that is
	// output column i.
	out []int
}

// apply is never called: a streamJoinStep needs its batch (run.transform).
func (s *streamJoinStep) apply(rows []Row) []Row { return rows }

// compileStreamJoin compiles a step of spec, a join with a stream side.
func compileStreamJoin(spec *v1.StreamingQuerySpec, ps *plan.Step) (step, *field.Error) {
	st, cols, i := ps.Spec, ps.In, ps.Index
	j := st.Join
	p := field.NewPath("spec", "transform").Index(i).Child("join")
	if j.Stream == nil {
		return nil, field.NotSupported(p.Child("static"), "static", []string{"stream"})
	}
	name := joinNameAt(spec, i)
	right, ok := j.RightColumns(spec)
	if !ok {
		return nil, field.Invalid(p.Child("stream", "source"), j.Stream.Source, "the source's columns are not known")
	}
	tb := j.Stream.TimeBound
	lower, err := tb.LowerBound.Parse()
	if err != nil {
		return nil, field.Invalid(p.Child("stream", "timeBound", "lowerBound"), tb.LowerBound, err.Error())
	}
	upper, err := tb.UpperBound.Parse()
	if err != nil {
		return nil, field.Invalid(p.Child("stream", "timeBound", "upperBound"), tb.UpperBound, err.Error())
	}
	cfg := stateful.StreamJoinConfig{
		Name: name, Type: j.EffectiveType(), Left: cols, Right: right,
		LeftTime: tb.LeftColumn, RightTime: tb.RightColumn, Lower: lower, Upper: upper,
	}
	for _, k := range j.Keys {
		cfg.LeftKeys = append(cfg.LeftKeys, k.Left)
		cfg.RightKeys = append(cfg.RightKeys, k.Right)
	}
	op, err := stateful.NewStreamJoin(cfg)
	if err != nil {
		return nil, field.Invalid(p, name, err.Error())
	}
	wm, err := stateful.NewWatermark(&j.Stream.Watermark, right)
	if err != nil {
		return nil, field.Invalid(p.Child("stream", "watermark"), j.Stream.Watermark.Column, err.Error())
	}
	s := &streamJoinStep{name: name, source: j.Stream.Source, op: op, right: wm}
	for _, c := range j.Output(cols, right) {
		k := c.Index
		if c.Side == v1.SideRight {
			k += len(cols)
		}
		s.out = append(s.out, k)
	}
	return s, nil
}

// streamJoin returns the query's stream–stream join step, nil if none.
func (q *Query) streamJoin() *streamJoinStep {
	for _, st := range q.steps {
		if j, ok := st.(*streamJoinStep); ok {
			return j
		}
	}
	return nil
}

func (q *Query) hasStreamJoin() bool { return q.streamJoin() != nil }

// joinRun is the run's part of a stream–stream join: the two sides' stores
// and watermarks.
type joinRun struct {
	step   *streamJoinStep
	stores [2]*state.Store
	// sideMs holds each side's watermark after the last committed batch
	// (the commit's watermarksMs), keyed by the side's operator name; a
	// side absent from it has seen no event time yet.
	sideMs map[string]int64
	// nextSideMs and nextMs are what the batch in progress computed: the
	// sides' watermarks and the query's, for its commit.
	nextSideMs map[string]int64
	nextMs     int64
	metrics    stateful.JoinMetrics
}

// openJoin opens and loads the join's two stores at the run's next batch
// and restores the sides' watermarks from the newest commit.
func (r *run) openJoin(ctx context.Context, head checkpoint.Head, parts int) error {
	step := r.q.streamJoin()
	if step == nil {
		return nil
	}
	jr := &joinRun{step: step, sideMs: map[string]int64{}}
	r.state.join = jr
	for i, meta := range step.op.Metadata() {
		st, err := state.Open(ctx, r.ckpt.Store(), meta, state.Options{
			Partitions: parts,
			Logger:     r.q.opts.logger.With("operator", meta.Operator),
		})
		if errors.Is(err, state.ErrIncompatible) {
			return fmt.Errorf("%w: %w", ErrRefused, err)
		}
		if err != nil {
			return err
		}
		jr.stores[i] = st
		if err := st.Load(ctx, r.next); err != nil {
			return err
		}
	}
	if c := head.Committed; c != nil {
		for _, meta := range step.op.Metadata() {
			if ms, ok := c.WatermarksMs[meta.Operator]; ok {
				jr.sideMs[meta.Operator] = ms
			}
		}
	}
	return nil
}

// joinBatch joins the batch's left rows (flowing into the step) with the
// right source's rows, and computes the watermarks of the next batch: each
// side's moves with its own newest event time, the query's is their
// minimum (Spark's default multipleWatermarkPolicy), never lower than now.
func (r *run) joinBatch(bp *batchPlan, s *streamJoinStep, left, right []Row) ([]Row, error) {
	jr := r.state.join
	for _, row := range right {
		s.right.Observe(row)
	}
	lin := make([]stateful.Row, len(left))
	for i, row := range left {
		lin[i] = row
	}
	rin := make([]stateful.Row, len(right))
	for i, row := range right {
		rin[i] = row
	}
	out, m, err := s.op.Process(jr.stores[0], jr.stores[1], lin, rin, stateful.Batch{WatermarkMs: bp.watermarkMs})
	if err != nil {
		return nil, err
	}
	jr.metrics = m
	rows := make([]Row, len(out))
	for i, o := range out {
		row := make(Row, len(s.out))
		for c, k := range s.out {
			row[c] = o[k]
		}
		rows[i] = row
	}
	metas := s.op.Metadata()
	prev := func(side int) int64 {
		if ms, ok := jr.sideMs[metas[side].Operator]; ok {
			return ms
		}
		return bp.watermarkMs
	}
	leftMs := prev(0)
	if w := r.state.watermark; w != nil {
		leftMs = w.wm.Advance(leftMs)
	}
	rightMs := s.right.Advance(prev(1))
	jr.nextSideMs = map[string]int64{metas[0].Operator: leftMs, metas[1].Operator: rightMs}
	jr.nextMs = max(bp.watermarkMs, min(leftMs, rightMs))
	return rows, nil
}

// commitJoin writes the batch's state of both sides and reports it in p.
func (r *run) commitJoin(ctx context.Context, bp *batchPlan, p *Progress) error {
	jr := r.state.join
	if jr == nil {
		return nil
	}
	dropped := [2]int64{jr.metrics.LeftDroppedByWatermark, jr.metrics.RightDroppedByWatermark}
	for i, st := range jr.stores {
		op, err := r.commitStore(ctx, bp, st, string(v1.StepJoin), dropped[i])
		if err != nil {
			return err
		}
		p.StateOperators = append(p.StateOperators, op)
	}
	jr.metrics = stateful.JoinMetrics{}
	return nil
}

// joinWatermarks returns the sides' watermarks after the batch the join
// just ran, for its commit, and makes them the run's; nil without a join.
func (r *run) joinWatermarks() map[string]int64 {
	if r.state == nil || r.state.join == nil {
		return nil
	}
	jr := r.state.join
	if jr.nextSideMs != nil {
		jr.sideMs = jr.nextSideMs
	}
	return jr.sideMs
}
