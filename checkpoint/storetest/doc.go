// Package storetest is the conformance suite of checkpoint.Store, in the
// manner of testing/fstest: every implementation runs it, so that the
// checkpoint layout can rely on one behaviour whatever the store.
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) checkpoint.Store { return newEmptyStore(t) })
//	}
//
// Run covers every operation: reads of missing objects, create-if-absent
// (including Racers goroutines racing for one key, RaceRounds times: exactly
// one wins), overwrites, a LargeSize object, listing order and prefixes,
// sizes, deletes, invalid keys, canceled contexts and atomic overwrites under
// concurrent reads.
//
// ConcurrentClaims races Racers claims of one checkpoint on a store: they must agree on
// its query id.
//
// BenchmarkBatchOverhead measures the checkpoint's cost per batch on a store:
// writing the offsets and commit entries and finding the newest batch, with
// p50 and p99 latencies, at several numbers of retained batches.
package storetest
