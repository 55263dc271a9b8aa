package compat

import (
	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// GuaranteeOf returns the delivery guarantee of the query spec describes, and why (DESIGN
// §4). Exactly-once needs a replayable source and a sink that makes a replayed batch
// harmless: delta, files and postgres always, kafka with exactlyOnce; kafka without it and webhook are
// at-least-once; console is none. Every source kind (rate, files, kafka, delta) is
// replayable. The reason says what a reader must do where that matters.
//
// It holds for both runtimes, which is why it does not read spec.runtime: each sink commits
// the same way on Spark (the files sink's manifest is created by the same Go code, conditional
// on S3 on both; Delta's txn and the PostgreSQL transaction are keyed alike), and what Spark
// cannot commit so is refused by the spark runtime (a Kafka sink with exactlyOnce). A sink
// whose commit came to differ between the runtimes would be decided here per runtime.
func GuaranteeOf(spec *v1.StreamingQuerySpec) (v1.Guarantee, string) {
	var kinds []v1.SourceKind
	for i := range spec.Sources {
		kinds = append(kinds, spec.Sources[i].Kind())
	}
	return guarantee(kinds, sinkShape(&spec.Sink))
}

// Guarantee returns the delivery guarantee of the query whose shape s is, and why, as
// GuaranteeOf does for its spec.
func (s Shape) Guarantee() (v1.Guarantee, string) {
	kinds := make([]v1.SourceKind, 0, len(s.Sources))
	for _, src := range s.Sources {
		kinds = append(kinds, src.Kind)
	}
	return guarantee(kinds, s.Sink)
}

func guarantee(sources []v1.SourceKind, sink SinkShape) (v1.Guarantee, string) {
	for _, k := range sources {
		if !replayable(k) {
			return v1.GuaranteeAtLeastOnce, "A source that cannot be read again after a failure cannot be exactly-once."
		}
	}
	switch sink.Kind {
	case v1.SinkDelta:
		return v1.GuaranteeExactlyOnce, "The sources are replayable and the Delta sink commits each batch once, with txn(appId = query id, version = batch id), so a batch replayed after a failure is found and skipped."
	case v1.SinkFiles:
		return v1.GuaranteeExactlyOnce, "The sources are replayable and the files sink lists each batch's files in a manifest keyed by query id and batch id, so a batch replayed after a failure is found and skipped; readers must trust only the manifest."
	case v1.SinkKafka:
		if sink.ExactlyOnce {
			return v1.GuaranteeExactlyOnce, "The sources are replayable and the Kafka sink produces each batch in one transaction (transactional id lockstep-<query id>) with a marker keyed by the query id and batch id, so a replayed batch that was committed is not produced again; consumers must read with isolation.level=read_committed."
		}
		return v1.GuaranteeAtLeastOnce, "A batch replayed after a failure may be produced to Kafka again, so consumers may see duplicates (each record's lockstep-batch header, <query id>:<batch id>, tells them apart); set spec.sink.kafka.exactlyOnce: true to produce each batch in a transaction."
	case v1.SinkPostgres:
		return v1.GuaranteeExactlyOnce, "The sources are replayable and the PostgreSQL sink writes each batch's rows and its row in lockstep_batches(query_id, batch_id) in one transaction, so a batch replayed after a failure finds its row and writes nothing."
	case v1.SinkWebhook:
		return v1.GuaranteeAtLeastOnce, "A request retried after a timeout, or a batch replayed after a failure, may be posted again; every delivery of a chunk carries the same Idempotency-Key header, <query id>:<batch id>[:<chunk>], and the receiver must de-duplicate by it."
	case v1.SinkConsole:
		return v1.GuaranteeNone, "The console sink is not fault tolerant: it keeps nothing, and a batch replayed after a failure is printed again."
	}
	return v1.GuaranteeNone, "The spec has no valid sink."
}

// replayable reports whether a source of kind k can read a logged batch's range again.
func replayable(k v1.SourceKind) bool {
	switch k {
	case v1.SourceKafka, v1.SourceFiles, v1.SourceDelta, v1.SourceRate, v1.SourceNexmark:
		return true
	}
	return false
}

// Weaker reports whether guarantee g is weaker than than: exactly-once, then at-least-once,
// then none. It is the one ranking of guarantees; the provider's plan uses it too.
func Weaker(g, than v1.Guarantee) bool { return guaranteeRank(g) < guaranteeRank(than) }

func guaranteeRank(g v1.Guarantee) int {
	switch g {
	case v1.GuaranteeExactlyOnce:
		return 2
	case v1.GuaranteeAtLeastOnce:
		return 1
	}
	return 0
}
