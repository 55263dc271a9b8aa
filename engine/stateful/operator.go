package stateful

import (
	"encoding/binary"
	"encoding/json"
	"math"

	"github.com/lockstep-dev/lockstep/engine/state"
)

// Operator is a stateful step: an aggregate or a dropDuplicates.
type Operator interface {
	// Metadata describes the operator's state, for state.Open.
	Metadata() state.Metadata
	// Process runs one batch: it reads and changes st (loaded at the
	// batch's version; the caller commits it) and returns the rows the
	// step emits. The rows in may be reused by Process.
	Process(st *state.Store, rows []Row, b Batch) ([]Row, Metrics, error)
}

// Batch is what an operator knows of the batch it processes: two
// watermarks, as in Spark (SPARK-40925). An input row is late, and dropped,
// when it is at or behind the watermark of the batch before; state is evicted
// (closed groups written, in append mode) by the batch's own watermark. A row
// between the two still counts: it joins the state that the batch then
// evicts, as it would have in the batch before.
type Batch struct {
	// WatermarkMs is the event-time watermark the batch runs with, in
	// milliseconds since the epoch (its offsets entry's batchWatermarkMs): it
	// evicts state.
	WatermarkMs int64
	// LateWatermarkMs is the watermark the batch before ran with (Spark's
	// late-event watermark; 0 for the first batch): it judges input rows
	// late. It is never above WatermarkMs, since the watermark never moves
	// back.
	LateWatermarkMs int64
}

// watermarkNanos returns the watermark in nanoseconds, saturated.
func (b Batch) watermarkNanos() int64 { return msToNanos(b.WatermarkMs) }

// lateNanos returns the late-event watermark in nanoseconds, saturated.
func (b Batch) lateNanos() int64 { return msToNanos(b.LateWatermarkMs) }

// msToNanos converts milliseconds since the epoch to nanoseconds, saturated.
func msToNanos(ms int64) int64 {
	if ms > math.MaxInt64/1_000_000 {
		return math.MaxInt64
	}
	if ms < math.MinInt64/1_000_000 {
		return math.MinInt64
	}
	return ms * 1_000_000
}

// Metrics count what Process did, beyond what the store's Commit reports.
type Metrics struct {
	// DroppedByWatermark counts the input rows dropped as late.
	DroppedByWatermark int64
	// Emitted counts the rows returned.
	Emitted int64
}

// evictPrefix is the width of the eviction time at the start of the keys of
// an operator that evicts by the watermark: big-endian nanoseconds since the
// epoch, with the sign bit flipped so that bytes sort as times.
const evictPrefix = 8

func appendEvictTime(b []byte, ns int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(ns)^(1<<63))
}

func evictTime(key string) int64 {
	var u uint64
	for i := range evictPrefix {
		u = u<<8 | uint64(key[i])
	}
	return int64(u ^ (1 << 63))
}

// computes marshals a canonical description of what an operator computes.
func computes(v any) json.RawMessage {
	b, _ := json.Marshal(v) // plain structs of strings: cannot fail
	return b
}
