package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/compat"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/spark"
	"github.com/lockstep-dev/lockstep/plan"
)

func newCheckpointRebuildCommand() *cobra.Command {
	var file, location string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "rebuild -f NEW.yaml [--checkpoint LOCATION] [--dry-run]",
		Short: "Rebuild the state for a changed query from the retained input, then switch the checkpoint to it",
		Long: `Rebuild the state a refused stateful change needs, instead of reverting it or starting
fresh (docs/rebuild.md). The new query runs over every batch the checkpoint's offsets log
recorded, with the same boundaries and timestamps, writing no output, into a new generation
of the checkpoint beside the current one; then the checkpoint switches to it, and the next
lockstep run of NEW.yaml continues after the last committed batch. Output already written
stays as it was; from the next batch on it follows the new query. A spec with runtime.spark
rebuilds on Spark, in one runner JVM.

The checkpoint is read from --checkpoint, else the spec's checkpoint.location, else
./.lockstep/checkpoints/<namespace>/<name>, as lockstep run does. Stop the query first: the
old generation is sealed at its next batch, so a run still writing there stops at it.
A crash or ^C leaves the current generation whole; running the command again continues.

--dry-run judges the change and prints what a rebuild would replay, and changes nothing.

Exit codes: 0 rebuilt (or, with --dry-run, possible), 1 a failure, 2 an invalid spec or
flag, 3 the change needs no rebuild or a rebuild cannot answer it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return rebuildCheckpoint(cmd.Context(), file, location, dryRun, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the new StreamingQuery manifest (YAML or JSON)")
	cmd.Flags().StringVar(&location, "checkpoint", "", "the checkpoint location (default: the spec's, else ./.lockstep/checkpoints/<namespace>/<name>)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "judge the change and print what a rebuild would replay; change nothing")
	_ = cmd.MarkFlagRequired("file")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withExitCode(exitInvalid, err) })
	return cmd
}

func rebuildCheckpoint(ctx context.Context, file, location string, dryRun bool, stdout, stderr io.Writer) error {
	obj, err := readQueryFile(file)
	if err != nil {
		return withExitCode(exitInvalid, err)
	}
	if errs := plan.Validate(obj); len(errs) > 0 {
		return withExitCode(exitInvalid, fieldErrors(file, errs.ToAggregate().Errors()))
	}
	if location == "" {
		location = obj.Spec.Checkpoint.Location
	}
	if location == "" {
		location = filepath.Join(".lockstep", "checkpoints", obj.Namespace, obj.Name)
	}

	j, err := judgeRebuild(ctx, obj, file, location)
	if err != nil {
		return err
	}

	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	q, err := newRebuilder(obj, location, logger)
	if ise := (*engine.InvalidSpecError)(nil); errors.As(err, &ise) {
		return withExitCode(exitInvalid, invalidSpec(file, ise))
	}
	if err != nil {
		return err
	}
	p, err := q.PlanRebuild(ctx)
	var lost *engine.SourceLostError
	unchecked := ""
	switch {
	case errors.As(err, &lost):
		return withExitCode(exitRefused, fmt.Errorf("%w: %w", engine.ErrRebuildImpossible, err))
	case errors.Is(err, engine.ErrRebuildImpossible):
		return withExitCode(exitRefused, err)
	case errors.Is(err, engine.ErrRetentionUnknown):
		// A source that cannot say (Spark's Delta offsets): the rebuild replays without knowing.
		unchecked = err.Error()
	case err != nil:
		return err
	}
	fmt.Fprintf(stdout, "Rebuild of %s for %s, generation %d → %d:\n", p.Location, file, p.From, p.To)
	for _, f := range j.Rejected() {
		fmt.Fprintf(stdout, "  ✗ %s %s: %q → %q\n", f.Rule, f.Path, f.Old, f.New)
	}
	fmt.Fprintf(stdout, "  replays batches 0–%d (%d records) through the new query, writing no output", p.Batches-1, p.Records)
	if p.Took > 0 {
		fmt.Fprintf(stdout, "; they took %s when they first ran", p.Took.Round(time.Millisecond))
	}
	fmt.Fprintln(stdout)
	if p.Pending >= 0 {
		fmt.Fprintf(stdout, "  batch %d was planned and not committed: the new query runs it first\n", p.Pending)
	}
	fmt.Fprintf(stdout, "  output already written stays; from batch %d on it follows the new query\n", p.Batches)
	if unchecked != "" {
		fmt.Fprintf(stdout, "  whether the sources still hold that input is not known: %s\n", unchecked)
	}
	if dryRun {
		fmt.Fprintln(stdout, "Dry run: nothing changed.")
		return nil
	}
	sum, err := q.Rebuild(ctx, engine.RebuildOptions{
		Reason: rebuildReason(j.Verdict),
		Progress: func(done, total int64, pr engine.Progress) {
			fmt.Fprintf(stderr, "rebuild: batch %d/%d  %d rows\n", done, total, pr.NumInputRows)
		},
	})
	if errors.Is(err, engine.ErrRebuildImpossible) || errors.Is(err, engine.ErrRefused) {
		return withExitCode(exitRefused, err)
	}
	if err != nil {
		return fmt.Errorf("%w (the current generation is unchanged; run the command again to continue)", err)
	}
	fmt.Fprintf(stdout, "Rebuilt: generation %d is current (%d batches replayed now, %d rows, %s). Run the new query to continue at batch %d.\n",
		sum.Generation, sum.Replayed, sum.InputRows, sum.Duration.Round(time.Millisecond), p.Batches)
	return nil
}

// checkSources asks the sources of q whether they still hold what the checkpoint at
// o.location's committed batches read: the runtime's PlanRebuild, which opens them
// (engine.Query.CheckRetained; on Spark, spark.Query.CheckRetained with what Spark's files
// recorded).
func (o *planOptions) checkSources(ctx context.Context, q *v1.StreamingQuery) error {
	var r rebuilder
	if q.Spec.Runtime.Name() == v1.RuntimeSpark {
		sq, err := spark.New(q, spark.Options{Location: o.location, OpenOptions: o.openOpts})
		if err != nil {
			return err
		}
		r = sq
	} else {
		reg, err := newRegistry()
		if err != nil {
			return err
		}
		opts := []engine.Option{engine.WithCheckpoint(o.location)}
		if o.getenv != nil {
			opts = append(opts, engine.WithEnv(o.getenv))
		}
		eq, err := engine.New(q, reg, opts...)
		if err != nil {
			return err
		}
		r = eq
	}
	_, err := r.PlanRebuild(ctx)
	return err
}

// withRetention sets in r what the sources answered (err, from the runtime's CheckRetained or
// PlanRebuild): a source that lost input, or a runtime log that lacks a batch, makes the
// rebuild impossible; a source that could not be asked leaves it unchecked.
func withRetention(r *compat.Rebuild, err error) {
	var lost *engine.SourceLostError
	switch {
	case r == nil || r.Impossible != "" || err == nil:
	case errors.As(err, &lost):
		r.Impossible = lost.Error()
	case errors.Is(err, engine.ErrRebuildImpossible):
		// What the runtime's own logs lack (Spark's offsets log purged of batch 0).
		r.Impossible = strings.TrimPrefix(err.Error(), engine.ErrRebuildImpossible.Error()+": ")
	default:
		r.Unchecked = err.Error()
	}
}

// rebuilder is a runtime's query that rebuilds its checkpoint: *engine.Query, *spark.Query.
type rebuilder interface {
	PlanRebuild(ctx context.Context) (engine.RebuildPlan, error)
	Rebuild(ctx context.Context, opts engine.RebuildOptions) (engine.RebuildSummary, error)
}

// newRebuilder is obj's query on its runtime, on the checkpoint at location.
func newRebuilder(obj *v1.StreamingQuery, location string, logger *slog.Logger) (rebuilder, error) {
	if obj.Spec.Runtime.Name() == v1.RuntimeSpark {
		runner, err := spark.FindRunner()
		if err != nil {
			return nil, withExitCode(exitFailure, err)
		}
		return spark.New(obj, spark.Options{Location: location, Runner: runner, Logger: logger, Guard: compatGuard(logger)})
	}
	reg, err := newRegistry()
	if err != nil {
		return nil, err
	}
	return engine.New(obj, reg, engine.WithCheckpoint(location), engine.WithLogger(logger), engine.WithStartGuard(compatGuard(logger)))
}

// judgeRebuild judges obj against the checkpoint at location: a rebuild is for a refused
// change that only the state stands in the way of, and that the logs still allow.
func judgeRebuild(ctx context.Context, obj *v1.StreamingQuery, file, location string) (compat.Judgement, error) {
	o := newPlanCommandOptions()
	o.location = location
	facts, against, err := o.factsInCheckpoint(ctx)
	if err != nil {
		return compat.Judgement{}, err
	}
	if facts.Committed == nil {
		return compat.Judgement{}, withExitCode(exitRefused, fmt.Errorf("nothing to rebuild: %s", against))
	}
	pg, _ := postgresServer(&obj.Spec.Sink, nil)
	j, err := compat.Judge(facts, &obj.Spec, pg)
	if err != nil {
		return j, withExitCode(exitInvalid, err)
	}
	switch {
	case j.Severity != compat.Rejected:
		return j, withExitCode(exitRefused, fmt.Errorf("nothing to rebuild: checkpoint %s accepts this query as it is (lockstep plan says why); run it", location))
	case !j.RebuildAnswers():
		var rules []string
		for _, f := range j.Rejected() {
			if !compat.Rebuildable(f.Rule) {
				rules = append(rules, f.Rule+" at "+f.Path)
			}
		}
		return j, withExitCode(exitRefused, fmt.Errorf("a rebuild cannot answer this change: %v change what the recorded offsets or the written output mean; revert them, or start fresh at a new checkpoint location (lockstep plan -f %s --checkpoint %s lists the ways forward)", rules, file, location))
	case facts.Rebuild != nil && facts.Rebuild.Impossible != "":
		return j, withExitCode(exitRefused, fmt.Errorf("%w: %s", engine.ErrRebuildImpossible, facts.Rebuild.Impossible))
	}
	return j, nil
}

// rebuildReason says what changed, for the generation's record.
func rebuildReason(v compat.Verdict) string {
	s := ""
	for i, f := range v.Rejected() {
		if i > 0 {
			s += "; "
		}
		s += f.Rule + " at " + f.Path
	}
	return s
}
