// Package stateful holds the stateful operators of a query — aggregate,
// aggregate by session ([Session]), dropDuplicates, the stream–stream join —
// and the event-time watermark, as plain code over rows
// (docs/state.md). It knows nothing of the engine's batch loop: the engine
// loads each operator's [state.Store] at the batch's version, calls Process
// with the batch's rows and watermark, and commits the store.
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
// # Output modes (Spark's rules)
//
// An aggregate on an event-time window or column with a watermark before it
// drops late rows (their window closed: window_end ≤ watermark, or event time
// ≤ watermark) and counts them, and evicts closed groups. In append mode it
// writes each group once, when the watermark closes it; in update mode it
// writes the groups each batch changed; in complete mode it writes every
// group every batch and keeps all state (nothing is late). dropDuplicates
// writes first occurrences; with the watermark column among its columns it
// drops late rows and evicts keys the watermark passed.
//
// # Session windows
//
// [Session] groups each key's rows into sessions [first row, newest row +
// gap) that merge when they overlap or touch, across batches; a session
// closes when the watermark reaches its end, before the batch's rows merge.
// Its state holds one row per key with the key's open sessions.
//
// # Stream–stream join
//
// [StreamJoin] buffers each side's rows in its own store (<name>.left,
// <name>.right), keyed by join key and event time, and drops late rows. A
// row is evicted once the watermark passes its time bound (no future row
// of the other side can match it); an outer side's rows that never matched
// are emitted then, once, with nulls for the other side (Spark's semantics;
// a full outer join both sides'). A left semi join emits a left row once, at
// its first match, and keeps no matched left row.
package stateful
