package source

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
)

var (
	_ engine.Source             = (*Rate)(nil)
	_ engine.AvailableNowSource = (*Rate)(nil)
)

// RateSpec describes the rate source for the registry and the docs.
func RateSpec() engine.ComponentSpec {
	return engine.ComponentSpec{
		Summary: "Generates rows (timestamp, value) at a fixed rate, for demos and benchmarks. " +
			"value counts from 0; a replayed batch yields the same rows. After a restart the values " +
			"continue where they stopped and generation resumes at the restart (the stopped time is not made up).",
		Fields: []engine.FieldSpec{
			{Name: "rowsPerSecond", Default: "1", Description: "rows generated per second"},
		},
	}
}

// Rate generates rows like Spark's rate source: value counts from 0, and
// timestamp is when the row was due. Row i of a batch is due at the batch's
// first due time plus i/rowsPerSecond seconds; both are in the end offset,
// so a replay yields the same rows.
//
// A Rate is used by one goroutine at a time.
type Rate struct {
	perSecond int64
	// base and count pace generation in this run: row k of the run is due
	// at base + k/perSecond. base is the time of the first plan.
	base  time.Time
	count int64
	// until, when set, bounds generation (availableNow).
	until time.Time
}

// rateOffset is the rate source's offset: rows [previous Value, Value)
// belong to the batch; the first of them was due at FirstMs, and the others
// follow every 1/RowsPerSecond seconds.
type rateOffset struct {
	Value         int64 `json:"value"`
	FirstMs       int64 `json:"firstMs,omitempty"`
	RowsPerSecond int64 `json:"rowsPerSecond,omitempty"`
}

// NewRate returns the rate source of spec.
func NewRate(_ context.Context, spec *v1.Source, _ engine.SourceEnv) (engine.Source, error) {
	if spec.Rate == nil {
		return nil, fmt.Errorf("not a rate source")
	}
	rps := spec.Rate.RowsPerSecond
	if rps <= 0 {
		rps = v1.DefaultRowsPerSecond
	}
	return &Rate{perSecond: rps}, nil
}

// PrepareAvailableNow bounds generation to the rows due at now.
func (r *Rate) PrepareAvailableNow(_ context.Context, now time.Time) error {
	r.until = now
	return nil
}

// Plan returns the rows due by req.Time (or by the availableNow bound). The
// rate is not a limit, so req.Limit changes nothing.
func (r *Rate) Plan(_ context.Context, req engine.PlanRequest) (engine.Planned, error) {
	start, err := parseOffset[rateOffset]("rate", req.Start)
	if err != nil {
		return engine.Planned{}, err
	}
	now := req.Time
	if !r.until.IsZero() && r.until.Before(now) {
		now = r.until
	}
	if r.base.IsZero() {
		r.base = now
	}
	due := r.due(r.count)
	if now.Before(due) {
		end, _ := json.Marshal(rateOffset{Value: start.Value, FirstMs: start.FirstMs, RowsPerSecond: start.RowsPerSecond})
		return engine.Planned{End: end}, nil
	}
	// Rows k with base + k/perSecond <= now, k >= count.
	upto := dueCount(now.Sub(r.base), r.perSecond)
	n := upto - r.count
	end, _ := json.Marshal(rateOffset{Value: start.Value + n, FirstMs: due.UnixMilli(), RowsPerSecond: r.perSecond})
	r.count = upto
	return engine.Planned{End: end, HasData: true}, nil
}

// dueCount is how many rows (or events) are due d after the first, at perSecond a second:
// those k with k/perSecond <= d. It counts in whole seconds and the rest, since elapsed
// nanoseconds times the rate would overflow within hours at a million a second.
func dueCount(d time.Duration, perSecond int64) int64 {
	return int64(d/time.Second)*perSecond + int64(d%time.Second)*perSecond/int64(time.Second) + 1
}

func (r *Rate) due(k int64) time.Time {
	return r.base.Add(time.Duration(k * int64(time.Second) / r.perSecond))
}

// Read returns the rows of (req.Start, req.End] from the offsets alone.
func (r *Rate) Read(_ context.Context, req engine.ReadRequest) (engine.ReadResult, error) {
	start, end, err := parseRange[rateOffset]("rate", req)
	if err != nil {
		return engine.ReadResult{}, err
	}
	n := end.Value - start.Value
	if n <= 0 {
		return engine.ReadResult{}, nil
	}
	if end.RowsPerSecond <= 0 {
		return engine.ReadResult{}, fmt.Errorf("rate offset %s: no rowsPerSecond", req.End)
	}
	first := time.UnixMilli(end.FirstMs).UTC()
	rows := make([]engine.Row, n)
	vals := make([]any, 2*n)
	for i := range n {
		row := engine.Row(vals[2*i : 2*i+2 : 2*i+2])
		row[0] = first.Add(time.Duration(i * int64(time.Second) / end.RowsPerSecond))
		row[1] = start.Value + i
		rows[i] = row
	}
	return engine.ReadResult{Rows: rows}, nil
}
