package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

// batchPlan is one batch as the offsets log records it.
type batchPlan struct {
	id          int64
	time        time.Time
	watermarkMs int64
	// starts and ends hold each source's range (start, end]; a source
	// absent from ends takes no part in the batch.
	starts, ends map[string]Offset
	// lags and latest are what each source told of its newest data when the batch was
	// planned (unknown for a replayed batch).
	lags   map[string]*int64
	latest map[string]Offset
	// joins holds the snapshot each stream–static join joins against.
	joins  []checkpoint.JoinSnapshot
	replay bool
}

// plan asks every source for the end of the next batch and, when one has new
// data, writes offsets/N. It returns nil when no source has new data.
func (r *run) plan(ctx context.Context, limit bool) (*batchPlan, map[string]int64, error) {
	clk := r.q.opts.clock
	began := clk.Now()
	bp := &batchPlan{
		id:          r.next,
		time:        began.UTC().Truncate(time.Millisecond),
		watermarkMs: r.watermarkMs,
		starts:      maps.Clone(r.starts),
		ends:        make(map[string]Offset, len(r.sources)),
		lags:        make(map[string]*int64, len(r.sources)),
		latest:      make(map[string]Offset, len(r.sources)),
	}
	hasData := false
	for _, s := range r.sources {
		p, err := s.src.Plan(ctx, PlanRequest{Batch: bp.id, Start: r.starts[s.name], Time: bp.time, Limit: limit})
		if err != nil {
			return nil, nil, fmt.Errorf("plan batch %d: source %s: %w", bp.id, s.name, err)
		}
		if len(p.End) == 0 {
			return nil, nil, fmt.Errorf("plan batch %d: source %s returned no end offset", bp.id, s.name)
		}
		bp.ends[s.name] = p.End
		bp.lags[s.name] = p.Lag
		bp.latest[s.name] = p.Latest
		hasData = hasData || p.HasData
	}
	if !hasData && !r.noDataBatchDue() {
		return nil, nil, nil
	}
	joins, err := r.planJoins(ctx, bp.time)
	if err != nil {
		return nil, nil, fmt.Errorf("plan batch %d: %w", bp.id, err)
	}
	bp.joins = joins
	durations := map[string]int64{"latestOffset": clk.Since(began).Milliseconds()}
	walBegan := clk.Now()
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
	if err := r.ckpt.AddOffsets(ctx, o); err != nil {
		return nil, nil, r.fenced(err, bp.id, "offsets")
	}
	durations["walCommit"] = clk.Since(walBegan).Milliseconds()
	r.reached(PhaseOffsetsWritten, bp.id)
	if every := r.q.opts.purgeEvery; every > 0 && bp.id > 0 && bp.id%every == 0 {
		if _, err := r.ckpt.Purge(ctx, int(r.q.spec.Checkpoint.MinBatchesToRetain), r.purgers...); err != nil {
			// Retention is best effort: the next purge retries.
			r.q.opts.logger.Warn("Failed to purge old batches", "batch", bp.id, "error", err)
		}
	}
	return bp, durations, nil
}

// execute reads the batch's ranges, transforms the rows, writes them to the
// sink and records the commit. began is when the batch started (planning
// included), for the batch's duration.
func (r *run) execute(ctx context.Context, bp *batchPlan, began time.Time, durations map[string]int64) (Progress, error) {
	clk := r.q.opts.clock
	p := Progress{
		QueryID:     r.queryID,
		Batch:       bp.id,
		Replay:      bp.replay,
		Timestamp:   bp.time,
		WatermarkMs: bp.watermarkMs,
		DurationMs:  durations,
	}
	phase := clk.Now()
	var rows, right []Row
	joined := r.q.spec.JoinedSources()
	for _, s := range r.sources {
		end, ok := bp.ends[s.name]
		if !ok {
			continue
		}
		res, err := s.src.Read(ctx, ReadRequest{Batch: bp.id, Start: bp.starts[s.name], End: end, Time: bp.time})
		if err != nil {
			return Progress{}, fmt.Errorf("batch %d: source %s: %w", bp.id, s.name, err)
		}
		if joined[s.name] {
			right = append(right, res.Rows...) // the join's right side, not unioned
		} else {
			rows = append(rows, res.Rows...)
		}
		n := int64(len(res.Rows))
		p.NumInputRows += n
		p.NumMalformedRows += res.Malformed
		p.Sources = append(p.Sources, SourceProgress{
			Name: s.name, StartOffset: bp.starts[s.name], EndOffset: end,
			NumInputRows: n, NumMalformedRows: res.Malformed, LatestOffset: bp.latest[s.name], Lag: bp.lags[s.name],
			LagMs: maxLagMs(res.Partitions), Partitions: res.Partitions,
		})
	}
	durations["getBatch"] = clk.Since(phase).Milliseconds()

	if len(r.q.staticJoins()) > 0 {
		phase = clk.Now()
		joins, err := r.loadJoins(ctx, bp)
		if err != nil {
			return Progress{}, err
		}
		p.Joins = joins
		durations["joinSnapshot"] = clk.Since(phase).Milliseconds()
	}

	phase = clk.Now()
	rows, err := r.transform(bp, rows, right)
	if err != nil {
		return Progress{}, err
	}
	if err := r.commitState(ctx, bp, &p); err != nil {
		return Progress{}, err
	}
	p.NumOutputRows = int64(len(rows))
	durations["transform"] = clk.Since(phase).Milliseconds()

	phase = clk.Now()
	b := &Batch{QueryID: r.queryID, ID: bp.id, Time: bp.time, Columns: r.q.outCols, Rows: rows}
	if err := r.sink.Write(ctx, b); err != nil {
		return Progress{}, fmt.Errorf("batch %d: sink %s: %w", bp.id, r.q.spec.Sink.Kind(), err)
	}
	durations["addBatch"] = clk.Since(phase).Milliseconds()
	r.reached(PhaseSinkCommitted, bp.id)

	phase = clk.Now()
	cm := checkpoint.Commit{
		BatchID:              bp.id,
		NextBatchWatermarkMs: r.nextWatermark(bp),
		WatermarksMs:         r.joinWatermarks(),
		Progress: checkpoint.Progress{
			Timestamp:     clk.Now().UTC(),
			NumInputRows:  p.NumInputRows,
			NumOutputRows: p.NumOutputRows,
			DurationMs:    durations,
		},
	}
	for _, s := range p.Sources {
		cm.Progress.Sources = append(cm.Progress.Sources, checkpoint.SourceProgress{
			Source: s.Name, StartOffset: s.StartOffset, EndOffset: s.EndOffset,
			NumInputRows: s.NumInputRows, NumMalformedRows: s.NumMalformedRows, LatestOffset: s.LatestOffset, Lag: s.Lag, LagMs: s.LagMs,
		})
	}
	durations[checkpoint.DurationTotal] = clk.Since(began).Milliseconds()
	if err := r.ckpt.AddCommit(ctx, cm); err != nil {
		return Progress{}, r.fenced(err, bp.id, "commits")
	}
	// Known only once the commit is written: in the live progress, not in commits/N.
	durations["commitOffsets"] = clk.Since(phase).Milliseconds()
	r.reached(PhaseCommitted, bp.id)

	p.Duration = clk.Since(began)
	durations[checkpoint.DurationTotal] = p.Duration.Milliseconds()
	if s := p.Duration.Seconds(); s > 0 {
		p.ProcessedRowsPerSecond = float64(p.NumInputRows) / s
	}
	for name, end := range bp.ends {
		r.starts[name] = end
	}
	if seen := r.q.s3Stats.Snapshot(); seen.Retries != nil || seen.UncertainWrites != 0 {
		if d := seen.Sub(r.s3Seen); d.Retries != nil || d.UncertainWrites != 0 {
			p.S3 = &d
		}
		r.s3Seen = seen
	}
	r.next = bp.id + 1
	r.lastCommitted = bp.id
	r.watermarkMs = cm.NextBatchWatermarkMs
	return p, nil
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
