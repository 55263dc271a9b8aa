package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/checkpoint/sparkckpt"
	"github.com/lockstep-dev/lockstep/compat"
	"github.com/lockstep-dev/lockstep/plan"
)

// Output formats of lockstep plan.
const (
	planText = "text"
	planJSON = "json"
)

// planOptions are the flags of lockstep plan, and what the command validates against.
type planOptions struct {
	file, location, from, output string
	// runtime is --runtime: "" keeps the spec's.
	runtime string
	// openOpts open the checkpoint location.
	openOpts []checkpoint.OpenOption
	// getenv reads the environment: a postgres sink's connection string, whose server and
	// database are the sink's identity. nil is os.Getenv.
	getenv func(string) string
}

func newPlanCommand() *cobra.Command { return planCommand(newPlanCommandOptions()) }

// newPlanCommandOptions are the options of the command the binary runs: S3 locations opened
// read-only with the environment's settings.
func newPlanCommandOptions() planOptions {
	return planOptions{
		openOpts: []checkpoint.OpenOption{checkpoint.WithS3(s3.Opener(s3.ReadOnly()))},
	}
}

func planCommand(o planOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plan -f NEW.yaml (--checkpoint LOCATION | --from OLD.yaml) [-o text|json]",
		Short: "Judge a query change against what its checkpoint recorded",
		Long: `Judge a StreamingQuery against the shape its checkpoint recorded, before it is applied,
like a Terraform plan: each change that matters to the checkpoint is listed with its rule,
spec path, old and new values, the reason, and the remedy, followed by the verdict and the
delivery guarantee of the new query. The rules are in docs/compatibility.md.

--checkpoint reads the shape its committed batches ran under from a checkpoint location (a path, file:///path or
s3://bucket/prefix), read-only; a location without a checkpoint allows everything, with
warnings only about the new query itself (such as state that grows without bound).
A checkpoint that Apache Spark wrote (a Spark job Lockstep did not start) is judged against
the shape inferred from Spark's files, and the output lists what was inferred and what was
assumed; a StreamingQuery with the spark runtime may take such a checkpoint over, and its first
start gives this verdict before it writes anything (docs/spark.md, Adopting a Spark checkpoint).
--from judges against the shape OLD.yaml would have recorded; when the two manifests name
different checkpoint locations, the query starts afresh at the new one and is judged as a
fresh start, as the admission webhook judges it.

Marks: ✓ allowed, ! allowed with a warning, ✗ rejected.

Exit codes: 0 allowed or allowed with warnings, 3 rejected, 2 an invalid spec or
unreadable input (manifest, checkpoint or flags), 1 another failure.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "the new StreamingQuery manifest (YAML or JSON)")
	cmd.Flags().StringVar(&o.location, "checkpoint", "", "judge against the shape the committed batches in this checkpoint location ran under")
	cmd.Flags().StringVar(&o.from, "from", "", "judge against the shape of this StreamingQuery manifest")
	cmd.Flags().StringVarP(&o.output, "output", "o", planText, "output format: text or json")
	cmd.Flags().StringVar(&o.runtime, "runtime", "", "judge the new query as run on this runtime, as lockstep run --runtime would: lockstep or spark (default: the spec's)")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withExitCode(exitInvalid, err) })
	return cmd
}

func (o *planOptions) run(ctx context.Context, w io.Writer) error {
	switch {
	case o.output != planText && o.output != planJSON:
		return withExitCode(exitInvalid, fmt.Errorf("--output %q: want text or json", o.output))
	case o.file == "":
		return withExitCode(exitInvalid, errors.New("give the new query with -f NEW.yaml"))
	case (o.location == "") == (o.from == ""):
		return withExitCode(exitInvalid, errors.New("give exactly one of --checkpoint LOCATION and --from OLD.yaml"))
	}
	switch v1.RuntimeName(o.runtime) {
	case "", v1.RuntimeLockstep, v1.RuntimeSpark:
	default:
		return withExitCode(exitInvalid, fmt.Errorf("--runtime %q: want lockstep or spark", o.runtime))
	}
	q, err := readQueryFile(o.file)
	if err != nil {
		return withExitCode(exitInvalid, err)
	}
	overrideRuntime(&q.Spec, v1.RuntimeName(o.runtime))
	if errs := plan.Validate(q); len(errs) > 0 {
		return withExitCode(exitInvalid, fieldErrors(o.file, errs.ToAggregate().Errors()))
	}

	pg, note := postgresServer(&q.Spec.Sink, o.getenv)
	var (
		facts   compat.Facts
		against string
	)
	if o.from != "" {
		facts.Committed, against, err = o.shapeFrom(&q.Spec)
	} else {
		facts, against, err = o.factsInCheckpoint(ctx)
	}
	if err != nil {
		return err
	}

	j, err := compat.Judge(facts, &q.Spec, pg)
	if err != nil {
		return withExitCode(exitInvalid, err)
	}
	if r := facts.Rebuild; r != nil && r.Impossible == "" && (j.Rebuild || j.RebuildAnswers()) {
		// The third way is on the table: ask the sources whether they still hold its input.
		withRetention(r, o.checkSources(ctx, q))
		if j, err = compat.Judge(facts, &q.Spec, pg); err != nil {
			return withExitCode(exitInvalid, err)
		}
	}
	if o.output == planJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if facts.Spark != nil {
			err = enc.Encode(struct {
				compat.Verdict
				Inference *compat.Inference `json:"inference"`
			}{j.Verdict, j.Inference})
		} else {
			err = enc.Encode(j.Verdict)
		}
	} else {
		if note != "" {
			against += ".\nNote: " + note
		}
		if _, err = fmt.Fprintf(w, "Judging %s against %s.\n\n", o.file, against); err == nil {
			err = j.WriteText(w)
		}
		if err == nil {
			err = writeInference(w, j.Inference)
		}
	}
	if err != nil {
		return fmt.Errorf("write the plan: %w", err)
	}
	if j.Severity == compat.Rejected {
		return withExitCode(exitRefused, fmt.Errorf("the checkpoint refuses this change (%d rejected)", len(j.Rejected())))
	}
	return nil
}

// shapeFrom returns the shape of the --from manifest, which the new spec is judged against.
// When the new spec moves the checkpoint to another location, the query starts afresh there,
// as the admission webhook judges it: there is no shape to judge against (nil), and what is
// judged against says so.
func (o *planOptions) shapeFrom(spec *v1.StreamingQuerySpec) (*compat.Shape, string, error) {
	q, err := readQueryFile(o.from)
	if err != nil {
		return nil, "", withExitCode(exitInvalid, err)
	}
	if from, to := q.Spec.Checkpoint.Location, spec.Checkpoint.Location; compat.Moved(from, to) {
		return nil, fmt.Sprintf("no checkpoint, as a fresh start.\n\n! spec.checkpoint.location: %s", compat.MovedText(from, to)), nil
	}
	pg, _ := postgresServer(&q.Spec.Sink, o.getenv)
	sh, err := compat.ShapeOf(&q.Spec, pg)
	if err != nil {
		return nil, "", withExitCode(exitInvalid, fmt.Errorf("%s: %w", o.from, err))
	}
	return &sh, "the shape of " + o.from, nil
}

// factsInCheckpoint gathers, read-only, what the --checkpoint location records: the shape
// its committed batches ran under (none when there is no checkpoint there or it has
// committed no batch yet), or, for a checkpoint that Spark wrote, Spark's files, from which
// the judge infers the shape and says how.
func (o *planOptions) factsInCheckpoint(ctx context.Context) (compat.Facts, string, error) {
	loc, err := checkpoint.ParseLocation(o.location)
	if err == nil {
		loc, err = loc.Abs()
	}
	if err != nil {
		return compat.Facts{}, "", withExitCode(exitInvalid, err)
	}
	store, err := openCheckpointStore(ctx, loc.String(), o.openOpts...)
	if err != nil {
		return compat.Facts{}, "", withExitCode(exitInvalid, err)
	}
	if ok, err := sparkckpt.IsSparkCheckpoint(ctx, store); err != nil {
		return compat.Facts{}, "", withExitCode(exitInvalid, fmt.Errorf("read checkpoint %s: %w", o.location, err))
	} else if ok {
		return o.factsInSparkCheckpoint(ctx, store)
	}
	c, err := checkpoint.Load(ctx, store)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return compat.Facts{}, "checkpoint " + o.location + ": there is no checkpoint there yet", nil
	}
	if err != nil {
		return compat.Facts{}, "", withExitCode(exitInvalid, fmt.Errorf("read checkpoint %s: %w", o.location, err))
	}
	sh, from, err := compat.ReadShape(ctx, c)
	if errors.Is(err, checkpoint.ErrNoCommit) {
		return compat.Facts{}, "checkpoint " + o.location + ": it has committed no batch yet", nil
	}
	if errors.Is(err, checkpoint.ErrNotFound) {
		return compat.Facts{}, "", withExitCode(exitInvalid, fmt.Errorf(
			"checkpoint %s has committed batches but records no shape, so this change cannot be judged; judge it with --from OLD.yaml instead",
			o.location))
	}
	if err != nil {
		return compat.Facts{}, "", withExitCode(exitInvalid, fmt.Errorf("read the shape in checkpoint %s: %w", o.location, err))
	}
	return compat.Facts{Committed: &sh, Rebuild: compat.ReadRebuild(ctx, c)}, fmt.Sprintf("the shape recorded in checkpoint %s from batch %d (query id %s)", o.location, from, c.Metadata().ID), nil
}

// factsInSparkCheckpoint reads the Spark checkpoint in store. One that has planned no batch
// is judged as a fresh start.
func (o *planOptions) factsInSparkCheckpoint(ctx context.Context, store checkpoint.Store) (compat.Facts, string, error) {
	c, err := sparkckpt.Read(ctx, store)
	if err != nil {
		return compat.Facts{}, "", withExitCode(exitInvalid, fmt.Errorf("read Spark checkpoint %s: %w", o.location, err))
	}
	if c.Latest == nil {
		return compat.Facts{}, "Spark checkpoint " + o.location + ": it has planned no batch yet", nil
	}
	return compat.Facts{Spark: c}, fmt.Sprintf("the shape inferred from the Spark checkpoint %s at batch %d (query id %s)", o.location, c.Latest.BatchID, c.Metadata.ID), nil
}

// writeInference says what a verdict read from Spark's files and what it assumed; nothing
// for a verdict against Lockstep's own shape (inf nil).
func writeInference(w io.Writer, inf *compat.Inference) error {
	if inf == nil {
		return nil
	}
	var b strings.Builder
	b.WriteString("\nInferred from Spark's files:\n")
	for _, s := range inf.Inferred {
		b.WriteString("  - " + s + "\n")
	}
	b.WriteString("Not recorded by Spark, so assumed unchanged (not judged):\n")
	for _, s := range inf.Assumed {
		b.WriteString("  - " + s + "\n")
	}
	if inf.Positional {
		b.WriteString("The checkpoint names no sources (offsets v1): sources are matched by position, as Spark does.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fieldErrors lists a manifest's validation errors, one per line.
func fieldErrors(file string, errs []error) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: the query is invalid (%d problems):", file, len(errs))
	for _, e := range errs {
		sb.WriteString("\n  " + e.Error())
	}
	return errors.New(sb.String())
}
