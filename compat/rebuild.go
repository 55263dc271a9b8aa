package compat

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
)

// Rebuild is what a caller learned about rebuilding the state from the retained input
// (docs/rebuild.md): the third way forward for a change whose only obstacle is the state.
type Rebuild struct {
	// Replay is what the logs say a rebuild replays (checkpoint.Checkpoint.Replayable).
	Replay checkpoint.Replay
	// Impossible says why the sources or the logs no longer hold what a rebuild must replay;
	// "" when it is possible.
	Impossible string
	// Unchecked, when set, says why whether the sources still hold that input is not known
	// (the caller could not ask them); the rebuild asks them again before it replays.
	Unchecked string
}

// rebuildable holds the rules whose rejection a rebuild answers: the stateful step, its key,
// windows, aggregates, eviction, joins and partitions may change, since the rebuild computes
// the new query's state from the same input with the same batch boundaries. Changes to the
// sources (what the offsets mean) and to the sink (what was written) are not.
var rebuildable = map[string]bool{
	"operator-added": true, "operator-removed": true, "operator-renamed": true, "operator-reordered": true,
	"operator-kind": true, "key-columns": true, "key-order": true, "key-type": true,
	"window-column": true, "window-size": true, "window-slide": true, "session-column": true,
	"session-gap": true, "aggregate-function": true, "aggregate-input": true,
	"aggregate-input-type": true, "aggregate-added": true, "aggregate-removed": true,
	"state-input-expression": true, "watermark-column": true, "watermark-removed": true,
	"state-eviction": true, "watermark-added": true, "watermark-delay": true,
	"join-added": true, "join-removed": true, "join-renamed": true, "join-type": true, "join-keys": true,
	"join-side-transform": true, "join-time-bound": true, "join-watermark": true,
	"state-partitions": true,
}

// Rebuildable reports whether a rebuild answers a rejection by the rule.
func Rebuildable(rule string) bool { return rebuildable[rule] }

// RebuildAnswers reports whether the verdict rejects the change and a rebuild answers every
// rejected finding.
func (v Verdict) RebuildAnswers() bool {
	rejected := v.Rejected()
	for _, f := range rejected {
		if !rebuildable[f.Rule] {
			return false
		}
	}
	return len(rejected) > 0
}

// offerRebuild adds the third way to the remedy of every rejected finding when a rebuild
// answers them all: what it replays and at what cost, or why it is not possible. When the
// spec asks for a rebuild and one is possible, the change is accepted instead: each such
// finding becomes a warning that says what the rebuild replays, and v.Rebuild is set.
// Both runtimes rebuild (docs/rebuild.md).
func (v *Verdict) offerRebuild(r *Rebuild, spec *v1.StreamingQuerySpec) {
	if r == nil || !v.RebuildAnswers() {
		return
	}
	if spec.OnIncompatibleChange == v1.OnIncompatibleRebuild && r.Impossible == "" {
		v.acceptByRebuild(r)
		return
	}
	text := r.text()
	for i := range v.Findings {
		if v.Findings[i].Severity == Rejected {
			v.Findings[i].Remedy += " " + text
		}
	}
}

// acceptByRebuild turns the rejected findings into warnings answered by the rebuild.
func (v *Verdict) acceptByRebuild(r *Rebuild) {
	v.Rebuild = true
	v.Severity = Allowed
	for i := range v.Findings {
		f := &v.Findings[i]
		if f.Severity == Rejected {
			f.Severity = Warning
			f.Message = "The checkpoint refuses this without a rebuild: " + f.Message
			f.Remedy = "Accepted by spec.onIncompatibleChange: rebuild: before it runs on, the query rebuilds its state from the retained input; " + r.what() + ". To keep the old state instead, revert the change."
		}
		if f.Severity.rank() > v.Severity.rank() {
			v.Severity = f.Severity
		}
	}
}

// RebuildRequiredError is the start guard's answer to a change accepted by rebuilding
// (Verdict.Rebuild): the runtime rebuilds the state, then starts again.
type RebuildRequiredError struct {
	Verdict Verdict
}

func (e *RebuildRequiredError) Error() string {
	return fmt.Sprintf("the state must be rebuilt for this change first (spec.onIncompatibleChange: rebuild; %d findings)", len(e.Verdict.Warnings()))
}

func (r *Rebuild) text() string {
	if r.Impossible != "" {
		return "Rebuilding the state from the retained input is not possible: " + r.Impossible + "."
	}
	return "Or rebuild the state from the retained input (`lockstep checkpoint rebuild`, or spec.onIncompatibleChange: rebuild): " + r.what() + "."
}

// what says what the rebuild replays, at what cost, and what becomes of the output.
func (r *Rebuild) what() string {
	p := r.Replay
	var s string
	if p.Batches == 0 {
		s = "no batch has committed, so there is nothing to replay"
	} else {
		s = fmt.Sprintf("it replays batches 0–%d (%d records) through the new query", p.Batches-1, p.Records)
		if p.Took > 0 {
			s += fmt.Sprintf(", about %s at the rate they first ran", p.Took.Round(time.Second).String())
		}
	}
	s += fmt.Sprintf("; output already written stays; from batch %d on the output follows the new query", p.Batches)
	if r.Unchecked != "" {
		s += "; whether the sources still hold that input was not checked (" + r.Unchecked + "); a rebuild that meets lost input stops and leaves the checkpoint as it was"
	}
	return s
}

// ReadRebuild gathers Facts.Rebuild from c's logs (checkpoint.Checkpoint.Replayable): what a
// rebuild would replay, or why the logs no longer allow one. What the sources still retain
// is known only to the runtime that opens them (engine.Query.CheckRetained): a caller that
// asked them sets Impossible or Unchecked from the answer.
func ReadRebuild(ctx context.Context, c *checkpoint.Checkpoint) *Rebuild {
	r, err := c.Replayable(ctx)
	switch {
	case errors.Is(err, checkpoint.ErrNotReplayable) && sparkRecords(r.Head()):
		// The spark runtime replays the boundaries of Spark's own offsets log, which holds
		// batches its records may not (those of a Spark checkpoint Lockstep adopted start at
		// the adopted batch): its rebuild reads that log first and says which batches Spark
		// purged (spark.Query.PlanRebuild).
		return &Rebuild{Replay: r, Unchecked: fmt.Sprintf("Spark's offsets log, whose batches the spark runtime replays, was not read; Lockstep's records start at batch %d", firstRecorded(ctx, c))}
	case errors.Is(err, checkpoint.ErrNotReplayable):
		return &Rebuild{Replay: r, Impossible: err.Error()}
	case err != nil:
		return &Rebuild{Replay: r, Impossible: "the checkpoint's logs could not be read: " + err.Error()}
	}
	return &Rebuild{Replay: r}
}

// sparkRecords reports whether head is of the records the spark runtime keeps beside Spark's
// own files: its offsets entries name the runtime.
func sparkRecords(head checkpoint.Head) bool {
	return head.Planned != nil && head.Planned.Conf["runtime"] == string(v1.RuntimeSpark)
}

// firstRecorded is the first batch c's offsets log holds, -1 when it cannot be read.
func firstRecorded(ctx context.Context, c *checkpoint.Checkpoint) int64 {
	b, err := c.Batches(ctx)
	if err != nil || len(b) == 0 {
		return -1
	}
	return b[0].ID
}
