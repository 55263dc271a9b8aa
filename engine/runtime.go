package engine

import "context"

// Runtime is the contract both runtimes keep — the built-in engine (*Query) and the Spark
// runtime (engine/spark's *Query) — so that `lockstep run`, `lockstep engine` and the
// controller's pods treat a query alike whichever runs it:
//
//   - Ownership: Run claims the checkpoint for the query's namespace and name
//     (checkpoint.Owner.Matches, the one rule); another query's is ErrRefused.
//   - Judging: before it writes anything, Run asks its start guard (compat.Judge, the one
//     judge), and a rejected change is ErrRefused with the verdict.
//   - Progress: each committed batch is reported to its Observer, as Progress.
//   - Stop asks the query to stop at the next batch boundary and returns at once; Run then
//     returns with the batches it committed.
//   - Cancelling Run's ctx stops the query at once, even mid-batch (the next run replays that
//     batch): the built-in engine returns at once; the Spark runtime asks its JVM to stop and
//     kills it after its KillAfter deadline.
//
// Each runtime takes its environment (Getenv), logger and observer as its own options.
type Runtime interface {
	Run(ctx context.Context) (Summary, error)
	Stop()
}

var _ Runtime = (*Query)(nil)
