package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/checkpoint/sparkckpt"
	"github.com/lockstep-dev/lockstep/engine/state"
)

// Output formats of the checkpoint commands.
const (
	outputText = "text"
	outputJSON = "json"
)

func newCheckpointCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "Inspect a query's checkpoint, or rebuild its state for a changed query",
		Long: `Inspect a query's checkpoint: its identity, where it stands, and what a restart will do;
or rebuild its state for a changed query (rebuild).

LOCATION is a local path, file:///path or s3://bucket/prefix. S3 settings come from
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION and LOCKSTEP_S3_ENDPOINT. describe and
batches only read: they work with read-only credentials and never change the checkpoint.
The JSON output is documented in docs/checkpoint-format.md.`,
	}
	cmd.AddCommand(newCheckpointDescribeCommand(), newCheckpointBatchesCommand(), newCheckpointRebuildCommand())
	return cmd
}

func newCheckpointDescribeCommand() *cobra.Command {
	return newCheckpointReadCommand(&cobra.Command{
		Use:   "describe LOCATION",
		Short: "Show a checkpoint's query, batches, offsets, state and shape",
		Long: `Show the query id and owner, the format, the newest planned and committed batch and
whether a restart re-runs the planned batch, the offsets of every source, the state
operators with their versions, files and bytes, the shape in force and the retained batches.

Exit codes: 0 shown, 1 unreadable or damaged checkpoint, 2 malformed location or flag.`,
	}, describeCheckpoint, describeSparkCheckpoint)
}

func describeCheckpoint(ctx context.Context, w io.Writer, c *checkpoint.Checkpoint, output string) error {
	d, err := c.Describe(ctx)
	if err != nil {
		return err
	}
	// The state of the newest committed batch: its operators' keys and rows.
	version := int64(-1)
	if d.CommittedBatch != nil {
		version = *d.CommittedBatch + 1
	}
	ops, err := state.Describe(ctx, c.Store(), version)
	if err != nil {
		return err
	}
	if output == outputJSON {
		return writeJSON(w, struct {
			checkpoint.Description
			StateOperators []state.Summary `json:"stateOperators"`
		}{d, ops})
	}
	return writeDescription(w, d, ops)
}

func newCheckpointBatchesCommand() *cobra.Command {
	return newCheckpointReadCommand(&cobra.Command{
		Use:   "batches LOCATION",
		Short: "List the retained batches with their offsets and commit progress",
		Long: `List every batch still in the offsets or commit log, oldest first: its watermark and
timestamp, the offset of every source, and for committed batches the rows read and
written and the time taken.

Exit codes: 0 listed, 1 unreadable or damaged checkpoint, 2 malformed location or flag.`,
	}, listBatches, listSparkBatches)
}

func listBatches(ctx context.Context, w io.Writer, c *checkpoint.Checkpoint, output string) error {
	batches, err := c.Batches(ctx)
	if err != nil {
		return err
	}
	if output == outputJSON {
		return writeJSON(w, batchList{Location: c.Location(), QueryID: c.Metadata().ID, Batches: batches})
	}
	return writeBatches(w, batches)
}

// newCheckpointReadCommand completes cmd (its use and help) into a read-only checkpoint
// command on one LOCATION with an --output flag: it opens the checkpoint and hands it to
// lockstep, or its store to spark when it is a Spark checkpoint.
func newCheckpointReadCommand(cmd *cobra.Command,
	lockstep func(ctx context.Context, w io.Writer, c *checkpoint.Checkpoint, output string) error,
	spark func(ctx context.Context, w io.Writer, store checkpoint.Store, output string) error,
) *cobra.Command {
	var output string
	cmd.Args = cobra.ExactArgs(1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkOutput(output); err != nil {
			return err
		}
		c, store, err := inspect(cmd.Context(), args[0])
		switch {
		case err != nil:
			return err
		case c == nil:
			return spark(cmd.Context(), cmd.OutOrStdout(), store, output)
		}
		return lockstep(cmd.Context(), cmd.OutOrStdout(), c, output)
	}
	cmd.Flags().StringVarP(&output, "output", "o", outputText, "output format: text or json")
	return cmd
}

// batchList is the JSON output of `checkpoint batches`.
type batchList struct {
	Location string             `json:"location"`
	QueryID  string             `json:"queryId"`
	Batches  []checkpoint.Batch `json:"batches"`
}

func checkOutput(output string) error {
	if output != outputText && output != outputJSON {
		return withExitCode(exitInvalid, fmt.Errorf("--output %q: want text or json", output))
	}
	return nil
}

// loadCheckpoint opens the checkpoint at location read-only. A relative path
// is taken from the current folder.
func loadCheckpoint(ctx context.Context, location string) (*checkpoint.Checkpoint, error) {
	store, err := openReadOnly(ctx, location)
	if err != nil {
		return nil, err
	}
	return checkpoint.Load(ctx, store)
}

// inspect opens the checkpoint at location read-only for the checkpoint commands: Lockstep's
// (c), or one that Spark wrote (c nil, store its folder).
func inspect(ctx context.Context, location string) (c *checkpoint.Checkpoint, store checkpoint.Store, err error) {
	if store, err = openReadOnly(ctx, location); err != nil {
		return nil, nil, err
	}
	if spark, err := sparkckpt.IsSparkCheckpoint(ctx, store); err != nil || spark {
		return nil, store, err
	}
	c, err = checkpoint.Load(ctx, store)
	return c, store, err
}

// openReadOnly opens the store of the checkpoint at location read-only (see
// openCheckpointStore). A relative path is taken from the current folder.
func openReadOnly(ctx context.Context, location string) (checkpoint.Store, error) {
	loc, err := checkpoint.ParseLocation(location)
	if err == nil {
		loc, err = loc.Abs()
	}
	if err != nil {
		return nil, withExitCode(exitInvalid, err)
	}
	store, err := openCheckpointStore(ctx, loc.String(), checkpoint.WithS3(s3.Opener(s3.ReadOnly())))
	if errors.Is(err, checkpoint.ErrInvalidLocation) {
		return nil, withExitCode(exitInvalid, err)
	}
	if err != nil {
		return nil, err
	}
	return store, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeDescription(w io.Writer, d checkpoint.Description, ops []state.Summary) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s:\t%s\n", k, fmt.Sprintf(format, args...)) }
	row("Location", "%s", d.Location)
	row("Query ID", "%s", d.Metadata.ID)
	row("Owner", "%s", d.Metadata.Owner)
	row("Format", "v%d", d.Metadata.FormatVersion)
	row("Created", "%s", d.Metadata.CreatedAt.Format(time.RFC3339))
	if g := d.Generation; g != nil {
		row("Generation", "%d, rebuilt %s from generation %d's %d batches (%s)", g.Number, g.CreatedAt.Format(time.RFC3339), g.RebuiltFrom, g.Batches, g.Reason)
	}
	switch {
	case d.Planned == nil:
		row("Planned batch", "none")
	default:
		row("Planned batch", "%d (watermark %s, timestamp %s)", d.Planned.BatchID, millis(d.Planned.BatchWatermarkMs), millis(d.Planned.BatchTimestampMs))
	}
	if d.Committed == nil {
		row("Committed batch", "none")
	} else {
		p := d.Committed.Progress
		row("Committed batch", "%d (%d rows in, %d out, %s; next watermark %s)", d.Committed.BatchID,
			p.NumInputRows, p.NumOutputRows, duration(p.DurationMs[checkpoint.DurationTotal]), millis(d.Committed.NextBatchWatermarkMs))
	}
	if d.Committed != nil && len(d.Committed.WatermarksMs) > 0 {
		// A stream–stream join: each side's watermark; the query's is their minimum.
		sides := make([]string, 0, len(d.Committed.WatermarksMs))
		for side := range d.Committed.WatermarksMs {
			sides = append(sides, side)
		}
		sort.Strings(sides)
		for i, side := range sides {
			sides[i] = side + " " + millis(d.Committed.WatermarksMs[side])
		}
		row("Join watermarks", "%s", strings.Join(sides, ", "))
	}
	switch {
	case d.Planned == nil:
		row("On restart", "start at batch 0 (no batch planned yet)")
	case d.Replay:
		row("On restart", "re-run batch %d with its logged offsets, watermark and timestamp (planned, not committed)", d.NextBatch)
	default:
		row("On restart", "plan batch %d", d.NextBatch)
	}
	if d.OldestBatch == nil {
		row("Retained", "no batches")
	} else {
		row("Retained", "batches %d to %d (%d in the offsets log)", *d.OldestBatch, *d.PlannedBatch, d.RetainedBatches)
	}
	if d.Shape == nil {
		row("Shape", "none recorded")
	} else {
		row("Shape", "in force from batch %d (%s, %d bytes)", d.Shape.Batch, d.Shape.Key, d.Shape.Bytes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if d.Planned != nil {
		fmt.Fprintf(w, "\nOffsets of batch %d:\n", d.Planned.BatchID)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  SOURCE\tOFFSET")
		for _, s := range d.Planned.Sources {
			fmt.Fprintf(tw, "  %s\t%s\n", s.Source, s.Offset)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(d.Planned.Joins) > 0 {
			fmt.Fprintf(w, "\nStatic join snapshots of batch %d:\n", d.Planned.BatchID)
			tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  JOIN\tSNAPSHOT\tREAD AT")
			for _, j := range d.Planned.Joins {
				fmt.Fprintf(tw, "  %s\t%s\t%s\n", j.Join, describeSnapshot(j.Snapshot), millis(j.ReadAtMs))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		if len(d.Planned.Conf) > 0 {
			fmt.Fprintln(w, "\nPinned settings:")
			keys := make([]string, 0, len(d.Planned.Conf))
			for k := range d.Planned.Conf {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(w, "  %s = %s\n", k, d.Planned.Conf[k])
			}
		}
	}

	fmt.Fprintln(w, "\nState:")
	if len(d.State) == 0 {
		fmt.Fprintln(w, "  none")
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  OPERATOR\tKIND\tKEYS\tROWS\tPARTITIONS\tVERSIONS\tDELTAS\tSNAPSHOTS\tFILES\tBYTES")
	for _, op := range d.State {
		versions := "-"
		if op.MinVersion >= 0 {
			versions = fmt.Sprintf("%d..%d", op.MinVersion, op.MaxVersion)
		}
		kind, keys, rows := "-", "-", "-"
		for _, s := range ops {
			if s.Operator != op.Operator {
				continue
			}
			kind, rows = s.Kind, fmt.Sprint(s.Rows)
			if s.Rows < 0 {
				rows = "?"
			}
			var names []string
			for _, k := range s.KeySchema {
				names = append(names, k.Name)
			}
			if len(names) > 0 {
				keys = strings.Join(names, ",")
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t%d\t%d\n", op.Operator, kind, keys, rows, op.Partitions, versions, op.Deltas, op.Snapshots, op.Files, op.Bytes)
	}
	return tw.Flush()
}

func writeBatches(w io.Writer, batches []checkpoint.Batch) error {
	if len(batches) == 0 {
		_, err := fmt.Fprintln(w, "No batches.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BATCH\tCOMMITTED\tWATERMARK\tTIMESTAMP\tROWS IN\tROWS OUT\tDURATION\tOFFSETS")
	for _, b := range batches {
		watermark, timestamp, offsets := "-", "-", "(purged)"
		if b.Offsets != nil {
			watermark, timestamp = millis(b.Offsets.BatchWatermarkMs), millis(b.Offsets.BatchTimestampMs)
			parts := make([]string, len(b.Offsets.Sources))
			for i, s := range b.Offsets.Sources {
				parts[i] = s.Source + "=" + string(s.Offset)
			}
			offsets = strings.Join(parts, " ")
		}
		committed, in, out, took := "no", "-", "-", "-"
		if b.Commit != nil {
			p := b.Commit.Progress
			committed, in, out, took = "yes", fmt.Sprint(p.NumInputRows), fmt.Sprint(p.NumOutputRows), duration(p.DurationMs[checkpoint.DurationTotal])
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.ID, committed, watermark, timestamp, in, out, took, offsets)
	}
	return tw.Flush()
}

// millis shows milliseconds since the epoch as a UTC time; 0 is "0" (no
// watermark yet).
func millis(ms int64) string {
	if ms == 0 {
		return "0"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

func duration(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// describeSnapshot renders a static join's snapshot name: a Delta table's version, or a files
// listing's fingerprint and size; anything else as recorded.
func describeSnapshot(raw json.RawMessage) string {
	var s struct {
		Version     *int64            `json:"version"`
		Fingerprint string            `json:"fingerprint"`
		Files       []json.RawMessage `json:"files"`
	}
	if json.Unmarshal(raw, &s) == nil {
		switch {
		case s.Version != nil:
			return fmt.Sprintf("delta version %d", *s.Version)
		case s.Fingerprint != "":
			fp := s.Fingerprint
			if len(fp) > 19 {
				fp = fp[:19]
			}
			return fmt.Sprintf("files %s… (%d files)", fp, len(s.Files))
		}
	}
	return string(raw)
}
