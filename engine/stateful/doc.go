// Package stateful holds the stateful operators of a query — aggregate,
// aggregate by session ([Session]), dropDuplicates, the stream–stream join —
// and the event-time watermark, as plain code over rows
// (docs/state.md). It knows nothing of the engine's batch loop: the engine
// loads each operator's [state.Store] at the batch's version, calls Process
// with the batch's rows and watermarks, and commits the store.
//
// # Rows
//
// A [Row] holds one value per column: string, int64, float64, bool,
// time.Time or nil (null), as the column's type says.
//
// # Watermark
//
// [Watermark] tracks the newest event time of the rows that pass it; the
// watermark of the next batch is max(current, newest − delay), so it only
// moves forward. A batch runs with the watermark its offsets entry logged.
//
// Operators use two watermarks, as Spark does since 3.4 (SPARK-40925): an
// input row is late when it is at or behind the watermark the batch before
// ran with ([Batch].LateWatermarkMs, Spark's eventTimeWatermarkForLateEvents),
// and state is evicted by the batch's own ([Batch].WatermarkMs, Spark's
// eventTimeWatermarkForEviction). A row between the two is kept: it joins
// state that the batch then evicts (and, in append mode, writes), as it would
// have if it had come a batch earlier.
//
// # Output modes (Spark's rules)
//
// An aggregate on an event-time window or column with a watermark before it
// drops late rows and counts them: a row goes into each of its windows whose
// window_end is after the late-event watermark, and is late when none is (by
// an event-time column: event time ≤ late-event watermark). It evicts the
// groups the batch's watermark closed. In append mode it writes each group
// once, when the watermark closes it; in update mode it writes the groups
// each batch changed; in complete mode it writes every group every batch and
// keeps all state (nothing is late). dropDuplicates
// writes first occurrences; with the watermark column among its columns it
// drops late rows (event time ≤ late-event watermark) and evicts keys the
// batch's watermark passed.
//
// # Session windows
//
// [Session] groups each key's rows into sessions [first row, newest row +
// gap) that merge when they overlap or touch, across batches; a row whose own
// session ended by the late-event watermark is late; a session closes when
// the watermark reaches its end, after the batch's rows merged into it. Its
// state holds one row per key with the key's open sessions.
//
// # Stream–stream join
//
// [StreamJoin] buffers each side's rows in its own store (<name>.left,
// <name>.right), keyed by join key and event time, and drops late rows (event
// time ≤ late-event watermark). A row is evicted once the watermark passes its
// time bound (no future row of the other side can match it); an outer side's
// rows that never matched are emitted then, once, with nulls for the other
// side (Spark's semantics; a full outer join both sides'). A left semi join
// emits a left row once, at its first match, and keeps no matched left row.
package stateful
