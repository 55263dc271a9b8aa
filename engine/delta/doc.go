// Package delta reads and writes Delta Lake tables (the open Delta
// transaction protocol, reader version 1 and writer version 2) in a
// checkpoint.Store: a local folder or an S3 prefix, with the same
// create-if-absent guarantee on both.
//
// A [Table] is the table at one location. [Table.Snapshot] replays its
// _delta_log: from the newest Delta checkpoint (named by _last_checkpoint)
// and the JSON commits after it, then, on later calls, only the commits that
// landed since. A [Snapshot] holds the protocol, the metadata (schema and
// partition columns), the active data files and the newest transaction
// version of each application.
//
// [Table.Write] is one transaction: it writes Parquet data files (one per
// partition, with numRecords/minValues/maxValues/nullCount stats), then
// creates the next commit file with create-if-absent. The commit carries
// txn(appId, version); Lockstep's sink passes the query id and the batch id,
// so a replayed batch finds its transaction in the table and writes nothing,
// while a fresh checkpoint (a new query id) is never mistaken for a replay.
// A writer that loses the commit race to a non-conflicting commit retries at
// the next version; [Complete] writes (remove every file, add the new ones)
// fail with [ErrConflict] when a concurrent commit changed the files. New
// columns are added to the schema; a changed type is a [*SchemaError]. Every
// tenth commit is followed by a Parquet checkpoint and _last_checkpoint, so
// looking up the newest transaction does not replay the whole log.
//
// [NewSink] and [NewSource] plug the table into the engine (register them
// with [SinkSpec] and [SourceSpec]): the sink writes one commit per batch
// with txn(query id, batch id); the source streams the files that commits
// add, with offsets (version, index). docs/delta.md describes both, the
// choices made where the protocol leaves room, and what is not supported.
package delta
