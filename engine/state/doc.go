// Package state is the versioned state store of stateful operators
// (aggregate, dropDuplicates): the state/<op>/ part of a checkpoint
// (DESIGN.md §3; docs/state.md).
//
// # Model
//
// A [Store] holds one operator's state: byte-string keys and values, hashed
// into a fixed number of partitions ([PartitionOf]; spec.stateStore.partitions,
// pinned by the checkpoint). Version v is the state after batch v-1, so batch
// N runs on version N and commits version N+1 (Spark's convention, which
// checkpoint.PurgeState follows).
//
// # Files
//
//	state/<op>/_metadata                     JSON: kind, key and value schema, fingerprint
//	state/<op>/<part>/<v>.delta              the changes of version v to one partition
//	state/<op>/<part>/<v>.snapshot           one partition's whole state at version v
//
// [Store.Commit] writes one .delta per partition the batch changed, with
// create-if-absent, in parallel. A background goroutine writes a .snapshot of
// a partition once it has piled up deltas; snapshots are optional (a failed
// one is logged and retried later). [Store.Load] rebuilds version v from the
// newest snapshot at or before v plus the deltas after it, partitions in
// parallel, and deletes files newer than v: they belong to a batch that was
// never committed and is about to be run again. Files are a compact binary
// encoding with a CRC-32C trailer ([EncodeFile]).
//
// # Use
//
//	st, err := state.Open(ctx, ckptStore, "0", meta, state.Options{Partitions: 8})
//	defer st.Close()
//	err = st.Load(ctx, batch)            // the state the batch runs on
//	err = st.Update(func(p *state.Partition) error { … p.Get / p.Put / p.Delete … })
//	err = st.Commit(ctx)                 // writes version batch+1
//
// A Store is used by one goroutine at a time, except that Update runs its
// function on every partition in parallel. checkpoint.PurgeState deletes the
// files that retention no longer needs.
package state
