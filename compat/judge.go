package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/sparkckpt"
)

// Facts are what a caller gathered about the checkpoint at a query's location, the judge's
// only input besides the spec. Gathering (reading Lockstep's records or Spark's files, the
// Secret a sink names) is each caller's: the admission webhook and the reconciler within a
// budget, `lockstep plan` read-only, the engine and the spark runtime at start. Judging is
// Judge's, and does no I/O.
type Facts struct {
	// Committed is the shape the committed batches ran under (ReadShape); nil when no batch
	// has committed under a recorded shape, or there is no checkpoint.
	Committed *Shape
	// Spark is a checkpoint that Apache Spark wrote at the location (a Spark job Lockstep did
	// not start), for a query whose records hold no committed batch; nil when there is none.
	Spark *sparkckpt.Checkpoint
	// Rebuild is what rebuilding the state would replay, or why it cannot; nil when the
	// caller did not look (the verdict then offers only revert and start fresh).
	Rebuild *Rebuild
}

// A Judgement is Judge's answer: the verdict, how the shape judged against was read, and
// the new spec's shape.
type Judgement struct {
	Verdict
	// Inference says what was inferred from Spark's files and what was assumed unchanged;
	// nil when the shape judged against is Lockstep's own (or there was none).
	Inference *Inference `json:"inference,omitempty"`
	// Shape is the new spec's shape: what the engine records for the first batch it runs
	// when it differs from Facts.Committed.
	Shape Shape `json:"-"`
}

// Judge is the one judge of a change (DESIGN.md §5): it judges spec against what f says the
// checkpoint recorded. Lockstep's committed shape is judged against when there is one; else
// the shape inferred from Spark's files (ShapeOfSpark), with the Inference; else nothing: a
// fresh start, where everything is allowed and only the rules that judge the new spec alone
// run. The admission webhook, the reconciler, `lockstep plan`, the engine's start guard and
// the spark runtime's adopt guard all call it. The error is ShapeOf's, for a spec it cannot
// read; a rejected change is a verdict, not an error (Judgement.Err).
func Judge(f Facts, spec *v1.StreamingQuerySpec, opts ...Option) (Judgement, error) {
	shape, err := ShapeOf(spec, opts...)
	if err != nil {
		return Judgement{}, err
	}
	j := Judgement{Shape: shape}
	switch {
	case f.Committed != nil:
		j.Verdict = Check(*f.Committed, spec, opts...)
		j.Verdict.offerRebuild(f.Rebuild, spec)
	case f.Spark != nil && f.Spark.Latest != nil:
		old, inf, err := ShapeOfSpark(f.Spark, spec, opts...)
		if err != nil {
			return Judgement{}, err
		}
		j.Verdict = Check(old, spec, append(slices.Clone(opts), FromSpark(inf, len(f.Spark.Sources)))...)
		j.Inference = &inf
	default:
		// A Spark checkpoint that has planned no batch records nothing to judge against.
		j.Verdict = Check(Shape{}, spec, opts...)
	}
	return j, nil
}

// Err is a *RejectedError when the verdict rejects the change, else nil: the engine's start
// guard and the adopt guard stop on it, without writing the checkpoint.
func (j Judgement) Err() error {
	switch {
	case j.Severity == Rejected:
		return &RejectedError{Verdict: j.Verdict}
	case j.Rebuild:
		return &RebuildRequiredError{Verdict: j.Verdict}
	}
	return nil
}

// RecordShape records s in c as the shape batch runs under (checkpoint.RecordShape), the
// counterpart of ReadShape.
func RecordShape(ctx context.Context, c *checkpoint.Checkpoint, batch int64, s Shape) error {
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode shape: %w", err)
	}
	return c.RecordShape(ctx, batch, data)
}

// ReadShape reads the shape the committed batches of c ran under, and the batch from which
// it is in force: "the committed shape", read by this one function wherever a change is
// judged or a checkpoint described. Its errors wrap checkpoint.ErrNoCommit when no batch has
// committed and checkpoint.ErrNotFound when batches committed under no recorded shape (both
// errors.Is ErrNotFound); a shape it cannot parse is an error naming the batch.
func ReadShape(ctx context.Context, c *checkpoint.Checkpoint) (Shape, int64, error) {
	from, data, err := c.CommittedShape(ctx)
	if err != nil {
		return Shape{}, 0, err
	}
	s, err := ParseShape(data)
	if err != nil {
		return Shape{}, 0, fmt.Errorf("read the shape of %s from batch %d: %w", c.Location(), from, err)
	}
	return s, from, nil
}
