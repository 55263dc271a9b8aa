package stateful

import (
	"fmt"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// Watermark tracks event time on a timestamp column (a watermark step). It
// passes rows through unchanged. Observe is called with each row of a batch,
// late ones included (as Spark's EventTimeWatermarkExec); Next then gives
// the watermark of the next batch, and Forget starts the next batch.
type Watermark struct {
	col     int
	delayMs int64
	maxMs   int64
	seen    bool
}

// NewWatermark compiles a watermark on column, delay behind its newest
// time, over the columns in.
func NewWatermark(column string, delay time.Duration, in v1.Columns) (*Watermark, error) {
	col := columnIndex(in, column)
	if col < 0 {
		return nil, fmt.Errorf("watermark: no column %q", column)
	}
	return &Watermark{col: col, delayMs: delay.Milliseconds()}, nil
}

// Observe notes the event time of a row; a null one is ignored.
func (w *Watermark) Observe(r Row) {
	if ns, ok := nanos(r[w.col]); ok {
		ms := floorDiv(ns, 1e6)
		if !w.seen || ms > w.maxMs {
			w.maxMs, w.seen = ms, true
		}
	}
}

// Next returns the watermark for the batch after the observed rows:
// max(current, newest event time − delay), or current when no row had an
// event time. It changes nothing: the run calls Forget once the batch has
// committed.
func (w *Watermark) Next(current int64) int64 {
	if !w.seen {
		return current
	}
	return max(current, w.maxMs-w.delayMs)
}

// Forget drops the observed rows: the next batch starts afresh.
func (w *Watermark) Forget() { w.seen, w.maxMs = false, 0 }

func columnIndex(cols v1.Columns, name string) int {
	for i, c := range cols {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// floorDiv divides rounding towards negative infinity.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
