package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"k8s.io/utils/clock"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

// batchPlan is one batch as the offsets log records it.
type batchPlan struct {
	id          int64
	time        time.Time
	watermarkMs int64
	// lateWatermarkMs is the watermark the batch before ran with (offsets/N−1's,
	// 0 for batch 0): the stateful steps drop input rows at or behind it as
	// late, and evict state by watermarkMs (Spark's two watermarks).
	lateWatermarkMs int64
	// starts and ends hold each source's range (start, end]; a source
	// absent from ends takes no part in the batch.
	starts, ends map[string]Offset
	// backlogs is what each source held beyond its end when the batch was
	// planned; nil for a batch replayed by this process.
	backlogs map[string]*Backlog
	// joins holds the snapshot each stream–static join joins against.
	joins  []checkpoint.JoinSnapshot
	replay bool
}

// phases times a batch's phases into its durations, keyed as Spark's
// durationMs: latestOffset, walCommit, getBatch, joinSnapshot, transform,
// addBatch, commitOffsets, and checkpoint.DurationTotal for the whole batch.
type phases struct {
	clk clock.Clock
	ms  map[string]int64
}

func newPhases(clk clock.Clock) phases { return phases{clk: clk, ms: map[string]int64{}} }

// time runs f as the phase name.
func (p phases) time(name string, f func() error) error {
	began := p.clk.Now()
	err := f()
	p.ms[name] = p.clk.Since(began).Milliseconds()
	return err
}

// since records the phase name as having run from began until now.
func (p phases) since(name string, began time.Time) { p.ms[name] = p.clk.Since(began).Milliseconds() }

// plan asks every source for the end of the next batch and, when one has new
// data, writes offsets/N. It returns nil when no source has new data.
func (r *run) plan(ctx context.Context, limit bool) (*batchPlan, phases, error) {
	clk := r.q.opts.clock
	began := clk.Now()
	ph := newPhases(clk)
	bp := &batchPlan{
		id:              r.next,
		time:            began.UTC().Truncate(time.Millisecond),
		watermarkMs:     r.watermarkMs,
		lateWatermarkMs: r.ranWatermarkMs,
		starts:          maps.Clone(r.starts),
		ends:            make(map[string]Offset, len(r.sources)),
		backlogs:        make(map[string]*Backlog, len(r.sources)),
	}
	hasData := false
	for _, s := range r.sources {
		p, err := s.src.Plan(ctx, PlanRequest{Batch: bp.id, Start: r.starts[s.name], Time: bp.time, Limit: limit})
		if err != nil {
			return nil, ph, fmt.Errorf("plan batch %d: source %s: %w", bp.id, s.name, err)
		}
		if len(p.End) == 0 {
			return nil, ph, fmt.Errorf("plan batch %d: source %s returned no end offset", bp.id, s.name)
		}
		bp.ends[s.name] = p.End
		bp.backlogs[s.name] = &p.Backlog
		hasData = hasData || p.HasData
	}
	if !hasData && !r.noDataBatchDue() {
		return nil, ph, nil
	}
	joins, err := r.planJoins(ctx, bp.time)
	if err != nil {
		return nil, ph, fmt.Errorf("plan batch %d: %w", bp.id, err)
	}
	bp.joins = joins
	ph.since("latestOffset", began)
	o := checkpoint.Offsets{
		BatchID:          bp.id,
		BatchWatermarkMs: bp.watermarkMs,
		BatchTimestampMs: bp.time.UnixMilli(),
		Conf:             r.conf,
		Joins:            bp.joins,
	}
	for _, s := range r.sources {
		o.Sources = append(o.Sources, checkpoint.SourceOffset{Source: s.name, Offset: bp.ends[s.name]})
	}
	if err := ph.time("walCommit", func() error { return r.ckpt.AddOffsets(ctx, o) }); err != nil {
		return nil, ph, r.fenced(err, bp.id, "offsets")
	}
	r.reached(PhaseOffsetsWritten, bp.id)
	if every := r.q.opts.purgeEvery; every > 0 && bp.id > 0 && bp.id%every == 0 {
		if _, err := r.ckpt.Purge(ctx, int(r.q.spec.Checkpoint.MinBatchesToRetain), r.purgers...); err != nil {
			// Retention is best effort: the next purge retries.
			r.q.opts.logger.Warn("Failed to purge old batches", "batch", bp.id, "error", err)
		}
	}
	return bp, ph, nil
}

// execute reads the batch's ranges, transforms the rows, writes them to the
// sink and records the commit. began is when the batch started (planning
// included), for the batch's duration; ph holds its planning phases.
func (r *run) execute(ctx context.Context, bp *batchPlan, began time.Time, ph phases) (Progress, error) {
	p := Progress{
		QueryID:     r.queryID,
		Batch:       bp.id,
		Replay:      bp.replay,
		Timestamp:   bp.time,
		WatermarkMs: bp.watermarkMs,
		DurationMs:  ph.ms,
	}
	if w := r.chunkWriter(); w != nil {
		if err := r.streamBatch(ctx, bp, w, &p, ph); err != nil {
			return Progress{}, err
		}
		return r.commitBatch(ctx, bp, p, ph, began)
	}
	var rows []Row
	var right map[string][]Row
	err := ph.time("getBatch", func() (err error) {
		rows, right, err = r.readSources(ctx, bp, &p)
		return err
	})
	if err != nil {
		return Progress{}, err
	}

	if len(r.q.staticJoins()) > 0 {
		err := ph.time("joinSnapshot", func() (err error) {
			p.Joins, err = r.loadJoins(ctx, bp)
			return err
		})
		if err != nil {
			return Progress{}, err
		}
	}

	err = ph.time("transform", func() (err error) {
		if rows, err = r.runSteps(newStepBatch(bp, right), rows); err != nil {
			return err
		}
		return r.commitState(ctx, bp, &p)
	})
	if err != nil {
		return Progress{}, err
	}
	p.NumOutputRows = int64(len(rows))

	err = ph.time("addBatch", func() error {
		b := &Batch{QueryID: r.queryID, ID: bp.id, Time: bp.time, Columns: r.q.outCols, Rows: rows}
		if err := r.sink.Write(ctx, b); err != nil {
			return fmt.Errorf("batch %d: sink %s: %w", bp.id, r.q.spec.Sink.Kind(), err)
		}
		return nil
	})
	if err != nil {
		return Progress{}, err
	}
	r.reached(PhaseSinkCommitted, bp.id)
	return r.commitBatch(ctx, bp, p, ph, began)
}

// commitBatch records the commit of the batch bp, whose sink committed it, and makes it the
// run's past; it returns the batch's progress p completed.
func (r *run) commitBatch(ctx context.Context, bp *batchPlan, p Progress, ph phases, began time.Time) (Progress, error) {
	clk := r.q.opts.clock
	cm := r.commitOf(bp, &p, ph, began)
	if err := ph.time("commitOffsets", func() error { return r.ckpt.AddCommit(ctx, cm) }); err != nil {
		return Progress{}, r.fenced(err, bp.id, "commits")
	}
	r.reached(PhaseCommitted, bp.id)

	r.advance(bp, cm)

	p.Duration = clk.Since(began)
	ph.ms[checkpoint.DurationTotal] = p.Duration.Milliseconds()
	if s := p.Duration.Seconds(); s > 0 {
		p.ProcessedRowsPerSecond = float64(p.NumInputRows) / s
	}
	if seen := r.q.s3Stats.Snapshot(); seen.Retries != nil || seen.UncertainWrites != 0 {
		if d := seen.Sub(r.s3Seen); d.Retries != nil || d.UncertainWrites != 0 {
			p.S3 = &d
		}
		r.s3Seen = seen
	}
	return p, nil
}

// advance makes the batch bp, durable with its commit cm, the run's past: its state, its
// sources' end offsets and its watermark.
func (r *run) advance(bp *batchPlan, cm checkpoint.Commit) {
	r.adoptState()
	for name, end := range bp.ends {
		r.starts[name] = end
	}
	r.next = bp.id + 1
	r.lastCommitted = bp.id
	r.watermarkMs, r.ranWatermarkMs = cm.NextBatchWatermarkMs, bp.watermarkMs
}

// readSources reads the batch bp from every source into p's input counts and per-source progress:
// rows are the rows of the sources unioned, right the rows of each source that is a join's
// right side.
func (r *run) readSources(ctx context.Context, bp *batchPlan, p *Progress) (rows []Row, right map[string][]Row, err error) {
	right = map[string][]Row{}
	joined := r.q.spec.JoinedSources()
	for _, s := range r.sources {
		end, ok := bp.ends[s.name]
		if !ok {
			continue
		}
		backlog := bp.backlogs[s.name]
		res, err := s.src.Read(ctx, ReadRequest{Batch: bp.id, Start: bp.starts[s.name], End: end, Time: bp.time, Backlog: backlog})
		if err != nil {
			return nil, nil, fmt.Errorf("batch %d: source %s: %w", bp.id, s.name, err)
		}
		if joined[s.name] {
			right[s.name] = append(right[s.name], res.Rows...) // a join's right side, not unioned
		} else {
			rows = append(rows, res.Rows...)
		}
		p.addSource(s.name, bp.starts[s.name], end, int64(len(res.Rows)), res, backlog)
	}
	return rows, right, nil
}

// addSource counts in p the part of the batch the source called name read: n rows of
// (start, end], res its read's result, backlog what Plan found (nil for a replay).
func (p *Progress) addSource(name string, start, end Offset, n int64, res ReadResult, backlog *Backlog) {
	p.NumInputRows += n
	p.NumMalformedRows += res.Malformed
	p.Sources = append(p.Sources, newSourceProgress(name, start, end, n, res.Malformed, cmp.Or(res.Backlog, backlog)))
}

// commitOf is the commits/N entry of the batch bp, whose progress so far is p, timed by ph
// since began.
func (r *run) commitOf(bp *batchPlan, p *Progress, ph phases, began time.Time) checkpoint.Commit {
	clk := r.q.opts.clock
	cm := checkpoint.Commit{
		BatchID:              bp.id,
		NextBatchWatermarkMs: r.nextWatermark(bp),
		Progress: checkpoint.Progress{
			Timestamp:     clk.Now().UTC(),
			NumInputRows:  p.NumInputRows,
			NumOutputRows: p.NumOutputRows,
			// commits/N cannot hold the time it takes to write itself: its
			// total ends here, the live progress's after the write.
			DurationMs: maps.Clone(ph.ms),
		},
	}
	cm.Progress.DurationMs[checkpoint.DurationTotal] = clk.Since(began).Milliseconds()
	for _, j := range r.state.joins {
		if cm.WatermarksMs == nil {
			cm.WatermarksMs = map[string]int64{}
		}
		maps.Copy(cm.WatermarksMs, j.watermarks())
	}
	for _, s := range p.Sources {
		cm.Progress.Sources = append(cm.Progress.Sources, checkpoint.SourceProgress{
			Source: s.Name, StartOffset: s.StartOffset, EndOffset: s.EndOffset,
			NumInputRows: s.NumInputRows, NumMalformedRows: s.NumMalformedRows, LatestOffset: s.LatestOffset, Lag: s.Lag, LagMs: s.LagMs,
		})
	}
	return cm
}

// newSourceProgress is one source's part of a batch that read n rows of
// (start, end]; backlog is nil when unknown.
func newSourceProgress(name string, start, end Offset, n, malformed int64, backlog *Backlog) SourceProgress {
	p := SourceProgress{Name: name, StartOffset: start, EndOffset: end, NumInputRows: n, NumMalformedRows: malformed}
	if backlog != nil {
		p.LatestOffset, p.Lag, p.Partitions = backlog.Latest, backlog.Lag, backlog.Partitions
		p.LagMs = maxLagMs(backlog.Partitions)
	}
	return p
}

// maxLagMs is the largest known LagMs of the partitions, nil when none knows.
func maxLagMs(parts []PartitionLag) *int64 {
	var most *int64
	for _, p := range parts {
		if p.LagMs != nil && (most == nil || *p.LagMs > *most) {
			most = p.LagMs
		}
	}
	return most
}

// fenced turns a lost create-if-absent race on a log entry into
// ErrOwnedByAnotherWriter.
func (r *run) fenced(err error, batch int64, log string) error {
	if errors.Is(err, checkpoint.ErrFenced) {
		return fmt.Errorf("%w: another engine wrote %s/%d of %s first; run one engine per checkpoint: %w",
			ErrOwnedByAnotherWriter, log, batch, r.ckpt.Location(), err)
	}
	return fmt.Errorf("batch %d: write %s: %w", batch, log, err)
}

func (r *run) reached(p Phase, batch int64) {
	if h := r.q.opts.hook; h != nil {
		h(p, batch)
	}
}
