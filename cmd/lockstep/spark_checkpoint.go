package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/sparkckpt"
	"github.com/lockstep-dev/lockstep/compat"
	"github.com/lockstep-dev/lockstep/engine/spark"
)

// sparkAdoptGuard is the spark runtime's judge of a checkpoint that a Spark job Lockstep did
// not start wrote (docs/spark.md, Adopting a Spark checkpoint): the verdict of `lockstep plan
// --checkpoint` on it. A rejected spec is refused with the whole verdict (each finding's rule,
// change and remedy) and what was inferred; warnings are logged. What it allows is recorded
// with the spec's shape, as compatGuard records it, so the next start finds it unchanged.
func sparkAdoptGuard(log *slog.Logger) spark.AdoptGuard {
	return func(_ context.Context, req spark.AdoptRequest) ([]byte, error) {
		j, err := judgeAtStart(log, compat.Facts{Spark: req.Checkpoint}, req.Spec, req.Getenv)
		if rejected := (*compat.RejectedError)(nil); errors.As(err, &rejected) {
			var b strings.Builder
			fmt.Fprintf(&b, "the Spark checkpoint %s (query id %s), written by a Spark job Lockstep did not start, refuses this query; nothing was written to it.\n\n",
				req.Checkpoint.Location, req.Checkpoint.Metadata.ID)
			_ = j.WriteText(&b)
			_ = writeInference(&b, j.Inference)
			return nil, errors.New(strings.TrimRight(b.String(), "\n"))
		}
		if err != nil {
			return nil, err
		}
		return json.Marshal(j.Shape)
	}
}

// describeSparkCheckpoint shows a checkpoint that Apache Spark wrote: the query id, where it
// stands, the settings it pins, its sources and its stateful operators with their state
// schemas.
func describeSparkCheckpoint(ctx context.Context, w io.Writer, store checkpoint.Store, output string) error {
	c, err := sparkckpt.Read(ctx, store)
	if err != nil {
		return err
	}
	if output == outputJSON {
		return writeJSON(w, struct {
			WrittenBy string `json:"writtenBy"`
			*sparkckpt.Checkpoint
		}{"spark", c})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s:\t%s\n", k, fmt.Sprintf(format, args...)) }
	row("Location", "%s", c.Location)
	row("Written by", "Apache Spark Structured Streaming")
	row("Query ID", "%s", c.Metadata.ID)
	if c.Latest == nil {
		row("Planned batch", "none")
	} else {
		row("Planned batch", "%d (offsets v%d, watermark %s, timestamp %s)", c.Latest.BatchID, c.Latest.Version, millis(c.Latest.WatermarkMs), millis(c.Latest.TimestampMs))
	}
	if c.LatestCommit == nil {
		row("Committed batch", "none")
	} else {
		row("Committed batch", "%d (commits v%d; next watermark %s)", c.LatestCommit.BatchID, c.LatestCommit.Version, millis(c.LatestCommit.NextBatchWatermarkMs))
	}
	switch {
	case c.Latest == nil:
		row("On restart", "start at batch 0 (no batch planned yet)")
	case c.LatestCommit == nil || c.LatestCommit.BatchID < c.Latest.BatchID:
		row("On restart", "re-run batch %d with its logged offsets (planned, not committed)", c.Latest.BatchID)
	default:
		row("On restart", "plan batch %d", c.Latest.BatchID+1)
	}
	if c.Latest != nil {
		for _, k := range slices.Sorted(maps.Keys(c.Latest.Conf)) {
			row("Pinned", "%s = %s", k, c.Latest.Conf[k])
		}
	}
	for _, s := range c.Sources {
		kind := s.Kind
		if s.Provider != "" {
			kind = s.Provider
		}
		if kind == "" {
			kind = "unknown kind"
		}
		off := string(s.Offset)
		if off == "" {
			off = "none yet"
		}
		extra := ""
		if s.Files > 0 {
			extra = fmt.Sprintf("; %d files taken", s.Files)
		}
		row("Source "+s.ID, "%s, offset %s%s", kind, off, extra)
	}
	for _, op := range c.Operators {
		parts := 0
		for _, st := range op.Stores {
			parts = max(parts, st.NumPartitions)
		}
		row(fmt.Sprintf("Operator %d", op.ID), "%s, %d state partitions", cmp.Or(op.Name, "unknown (no operator metadata)"), parts)
		for _, name := range slices.Sorted(maps.Keys(op.Schemas)) {
			for _, f := range op.Schemas[name].Families {
				row("  state "+name+"/"+f.Name, "key (%s), value (%s)", describeStruct(f.Key), describeStruct(f.Value))
			}
		}
		if len(op.Windows) > 0 {
			w := op.Windows[0]
			row("  windows", "%s long, e.g. [%s, %s) (%d read from its state rows)", w.End.Sub(w.Start), w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339), len(op.Windows))
		}
	}
	row("Retained", "%s planned, %s committed", batchRange(c.Planned), batchRange(c.Committed))
	return tw.Flush()
}

// listSparkBatches lists the retained batches of a Spark checkpoint.
func listSparkBatches(ctx context.Context, w io.Writer, store checkpoint.Store, output string) error {
	batches, err := sparkckpt.Batches(ctx, store)
	if err != nil {
		return err
	}
	if output == outputJSON {
		data, err := store.Get(ctx, "metadata")
		if err != nil {
			return err
		}
		m, err := sparkckpt.ParseMetadata(data)
		if err != nil {
			return err
		}
		return writeJSON(w, struct {
			Location  string            `json:"location"`
			QueryID   string            `json:"queryId"`
			WrittenBy string            `json:"writtenBy"`
			Batches   []sparkckpt.Batch `json:"batches"`
		}{store.Location(), m.ID, "spark", batches})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BATCH\tSTATE\tWATERMARK\tTIMESTAMP\tOFFSETS")
	for _, b := range batches {
		st, wm, ts, offs := "committed", "-", "-", "-"
		if b.Commit == nil {
			st = "planned"
		}
		if o := b.Offsets; o != nil {
			wm, ts = millis(o.WatermarkMs), millis(o.TimestampMs)
			var parts []string
			for _, s := range o.Sources {
				parts = append(parts, s.ID+"="+cmp.Or(string(s.Offset), "-"))
			}
			offs = strings.Join(parts, " ")
		} else {
			st = "committed (offsets purged)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", b.ID, st, wm, ts, offs)
	}
	return tw.Flush()
}

func describeStruct(s sparkckpt.StructType) string {
	parts := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		parts[i] = f.Name + " " + f.TypeName()
	}
	return strings.Join(parts, ", ")
}

func batchRange(ids []int64) string {
	if len(ids) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d–%d", ids[0], ids[len(ids)-1])
}
