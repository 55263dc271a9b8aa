package engine

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/state"
	"github.com/lockstep-dev/lockstep/engine/stateful"
	"github.com/lockstep-dev/lockstep/plan"
)

// streamJoinStep is a compiled stream–stream join: the rows flowing into it are
// the left side, the rows of source the right side. It is a stateKeeper with
// a store per side.
type streamJoinStep struct {
	name   string
	source string
	op     *stateful.StreamJoin
	// left and right track the sides' event times: the query's watermark
	// step and join.stream.watermark.
	left, right *stateful.Watermark
	// rightSteps are join.stream.transform, run on the right source's rows
	// before the right watermark sees them.
	rightSteps []step
	// out[i] is the operator's column (left columns, then right) that is
	// output column i.
	out []int
	// delayMs is how far the watermark of the steps after the join is behind
	// the query's, as Spark's join propagates it (StreamingSymmetricHashJoinExec's
	// produceOutputWatermark): the smaller of the two sides' state watermarks,
	// each its bound behind (a left row can still match a right row up to
	// upperBound later, a right row a left one up to lowerBound later) and 1 ms
	// below that, the bound being inclusive. So the larger bound, in
	// milliseconds rounded up, plus 1.
	delayMs int64

	stores [2]*state.Store
	// sideMs holds each side's watermark after the last committed batch
	// (the commit's watermarksMs), keyed by the side's operator name; a
	// side absent from it has seen no event time yet.
	sideMs map[string]int64
	// nextSideMs, nextMs and metrics are what the batch in progress
	// computed: the sides' watermarks and the query's, for its commit.
	nextSideMs map[string]int64
	nextMs     int64
	metrics    stateful.JoinMetrics
}

// compileStreamJoin compiles a step of spec, a join with a stream side; left
// is the query's watermark step, before it.
func compileStreamJoin(ps *plan.Step, left *watermarkStep) (step, *field.Error) {
	st, cols := ps.Spec, ps.In
	j := st.Join
	p := ps.Path.Child("join")
	if j.Stream == nil {
		return nil, field.NotSupported(p.Child("static"), "static", []string{"stream"})
	}
	name, tb := ps.JoinName, ps.TimeBound
	right := ps.Right
	if right == nil {
		return nil, field.Invalid(p.Child("stream", "source"), j.Stream.Source, "the source's columns are not known")
	}
	var rightSteps []step
	for _, ss := range ps.RightSteps {
		var (
			s   step
			err *field.Error
		)
		if ss.Filter != nil {
			s, err = compileFilter(ss.Path, ss.Env, ss.Filter, columnIndex(ss.In))
		} else {
			s, err = compileSelect(ss.Path, ss.Env, ss.Select, columnIndex(ss.In))
		}
		if err != nil {
			return nil, err
		}
		rightSteps = append(rightSteps, s)
	}
	lower, upper := tb.Lower, tb.Upper
	cfg := stateful.StreamJoinConfig{
		Name: name, Type: ps.JoinType, Left: cols, Right: right,
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
	wm, err := stateful.NewWatermark(j.Stream.Watermark.Column, ps.Durations.Delay, right)
	if err != nil {
		return nil, field.Invalid(p.Child("stream", "watermark"), j.Stream.Watermark.Column, err.Error())
	}
	if left == nil {
		return nil, field.Required(p.Child("stream"), "a stream join needs a watermark step before it")
	}
	s := &streamJoinStep{name: name, source: j.Stream.Source, op: op, left: left.wm, right: wm, rightSteps: rightSteps,
		sideMs: map[string]int64{}, delayMs: ceilMs(max(lower, upper, 0)) + 1}
	for _, c := range ps.JoinOutput {
		k := c.Index
		if c.Side == v1.SideRight {
			k += len(cols)
		}
		s.out = append(s.out, k)
	}
	return s, nil
}

func (s *streamJoinStep) open(ctx context.Context, open openStore) error {
	for i, meta := range s.op.Metadata() {
		st, err := open(ctx, meta)
		if err != nil {
			return err
		}
		s.stores[i] = st
	}
	return nil
}

// restoreWatermarks takes the sides' watermarks from the newest commit.
func (s *streamJoinStep) restoreWatermarks(c *checkpoint.Commit) {
	if c == nil {
		return
	}
	for _, meta := range s.op.Metadata() {
		if ms, ok := c.WatermarksMs[meta.Operator]; ok {
			s.sideMs[meta.Operator] = ms
		}
	}
}

// process joins the batch's left rows (flowing into the step) with the
// right source's rows, and computes the watermarks of the next batch: each
// side's moves with its own newest event time, the query's is their
// minimum (Spark's default multipleWatermarkPolicy), never lower than now.
func (s *streamJoinStep) process(b *stepBatch, left []Row) ([]Row, error) {
	right := b.right[s.source]
	for _, st := range s.rightSteps {
		var err error
		if right, err = st.process(b, right); err != nil {
			return nil, err
		}
	}
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
	out, m, err := s.op.Process(s.stores[0], s.stores[1], lin, rin, stateful.Batch{WatermarkMs: b.watermarkMs, LateWatermarkMs: b.lateWatermarkMs})
	if err != nil {
		return nil, err
	}
	s.metrics = m
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
		if ms, ok := s.sideMs[metas[side].Operator]; ok {
			return ms
		}
		return b.queryWatermarkMs
	}
	leftMs, rightMs := s.left.Next(prev(0)), s.right.Next(prev(1))
	s.nextSideMs = map[string]int64{metas[0].Operator: leftMs, metas[1].Operator: rightMs}
	s.nextMs = max(b.queryWatermarkMs, min(leftMs, rightMs))
	// The join emits rows behind the watermark (a match found late, or an outer row at
	// eviction), so the stateful steps after it judge lateness and evict by watermarks
	// delayMs behind (Spark's watermark propagation).
	b.watermarkMs -= s.delayMs
	b.lateWatermarkMs -= s.delayMs
	return rows, nil
}

// commit writes the batch's state of both sides.
func (s *streamJoinStep) commit(ctx context.Context, b *stepBatch, write writeStore) ([]StateOperatorProgress, error) {
	dropped := [2]int64{s.metrics.LeftDroppedByWatermark, s.metrics.RightDroppedByWatermark}
	var out []StateOperatorProgress
	for i, st := range s.stores {
		op, err := write(ctx, b, st, v1.StepJoin, dropped[i])
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	return out, nil
}

// watermarks returns the sides' watermarks after the batch in progress, for
// its commit: those it computed, else those of the last committed batch.
func (s *streamJoinStep) watermarks() map[string]int64 {
	if s.nextSideMs != nil {
		return s.nextSideMs
	}
	return s.sideMs
}

// adopt makes the committed batch's watermarks the sides' own. The left
// side's event times are the watermark step's, which forgets them itself.
func (s *streamJoinStep) adopt() {
	if s.nextSideMs != nil {
		s.sideMs, s.nextSideMs = s.nextSideMs, nil
	}
	s.right.Forget()
	s.metrics = stateful.JoinMetrics{}
}

func (s *streamJoinStep) close(log *slog.Logger) {
	for i, st := range s.stores {
		if st == nil {
			continue
		}
		if err := st.Close(); err != nil {
			log.Warn("Closed state store with an error", "operator", s.op.Metadata()[i].Operator, "error", err)
		}
	}
}

// ceilMs is d in milliseconds, rounded up.
func ceilMs(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
