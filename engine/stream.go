package engine

import (
	"context"
	"fmt"
	"time"
)

// chunkWriter returns the sink as a ChunkWriter when the run can stream its batches: every
// source is a ChunkReader, the sink a ChunkWriter, and the steps keep no row (filters,
// selects, a watermark: no join, no state), so that a chunk transformed and written is done
// with. It returns nil otherwise, and the batch is read, transformed and written whole.
func (r *run) chunkWriter() ChunkWriter {
	w, ok := r.sink.(ChunkWriter)
	if !ok || !ownsRows(r.q.steps) {
		return nil
	}
	for _, s := range r.sources {
		if _, ok := s.src.(ChunkReader); !ok {
			return nil
		}
	}
	return w
}

// streamBatch runs the batch bp a chunk at a time: each source's chunks are transformed and
// handed to the sink's writer as they are read, so that the batch is never held whole and the
// sink writes while the sources read. It fills p's counts, and ph's phases: getBatch is the
// sink's Open, transform the steps' share, addBatch the whole read, transform and write (as
// Spark's addBatch runs the whole query).
func (r *run) streamBatch(ctx context.Context, bp *batchPlan, cw ChunkWriter, p *Progress, ph phases) error {
	clk := r.q.opts.clock
	sink := r.q.spec.Sink.Kind()
	var w BatchWriter
	err := ph.time("getBatch", func() (err error) {
		w, err = cw.Open(ctx, &Batch{QueryID: r.queryID, ID: bp.id, Time: bp.time, Columns: r.q.outCols})
		return err
	})
	if err != nil {
		return fmt.Errorf("batch %d: sink %s: %w", bp.id, sink, err)
	}
	sb := newStepBatch(bp, nil)
	var transform time.Duration
	err = ph.time("addBatch", func() error {
		for _, s := range r.sources {
			end, ok := bp.ends[s.name]
			if !ok {
				continue
			}
			var (
				n       int64
				stopped error // a step's or the sink's error, which stopped the read
			)
			emit := func(rows []Row) error {
				n += int64(len(rows))
				began := clk.Now()
				out, err := r.runSteps(sb, rows)
				transform += clk.Since(began)
				switch {
				case err != nil:
					stopped = err
				case len(out) > 0:
					p.NumOutputRows += int64(len(out))
					if err := w.Write(ctx, out); err != nil {
						stopped = fmt.Errorf("batch %d: sink %s: %w", bp.id, sink, err)
					}
				}
				return stopped
			}
			backlog := bp.backlogs[s.name]
			res, err := s.src.(ChunkReader).ReadChunks(ctx, ReadRequest{Batch: bp.id, Start: bp.starts[s.name], End: end, Time: bp.time, Backlog: backlog}, emit)
			switch {
			case stopped != nil:
				return stopped
			case err != nil:
				return fmt.Errorf("batch %d: source %s: %w", bp.id, s.name, err)
			}
			p.addSource(s.name, bp.starts[s.name], end, n, res, backlog)
		}
		if err := w.Commit(ctx); err != nil {
			return fmt.Errorf("batch %d: sink %s: %w", bp.id, sink, err)
		}
		return nil
	})
	ph.ms["transform"] = transform.Milliseconds()
	if err != nil {
		w.Abort(ctx)
		return err
	}
	r.reached(PhaseSinkCommitted, bp.id)
	return nil
}
