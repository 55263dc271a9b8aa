package compat_test

import (
	"fmt"
	"os"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/compat"
)

// Check judges a changed spec against the shape its checkpoint recorded. Here the top
// amount becomes the lowest: the state holds a running maximum, so the change is rejected,
// with the remedy.
func Example_check() {
	query := func(fn v1.AggregateFunction) *v1.StreamingQuerySpec {
		return qt.Make("top-orders", "shop").
			RateSource("orders", 10).
			Select(qt.As("amount", "double(value)")).
			Aggregate("top", nil, qt.Agg("amount", fn, "amount")).
			KafkaSink("kafka:9092", "top-orders").
			OutputMode(v1.OutputUpdate).
			Spec()
	}
	recorded, err := compat.ShapeOf(query(v1.AggMax)) // what the engine stored in shape/<N>
	if err != nil {
		panic(err)
	}

	v := compat.Check(recorded, query(v1.AggMin))
	fmt.Println("verdict:", v.Severity)
	for _, f := range v.Findings {
		fmt.Printf("%s %s: %s → %s\n", f.Rule, f.Path, f.Old, f.New)
	}
	fmt.Println()
	v.WriteText(os.Stdout)
	// Output:
	// verdict: rejected
	// aggregate-function spec.transform[1].aggregate.aggregates[0].function: amount = max(amount double) → amount = min(amount double)
	//
	// ✗ aggregate-function spec.transform[1].aggregate.aggregates[0].function
	//     amount = max(amount double) → amount = min(amount double)
	//     Aggregate column amount of the aggregate step "top" changed from max to min; its state holds a partial max for every group, which min would silently continue as if it were its own (Spark lets this pass when the types match).
	//     Remedy: Revert spec.transform[1].aggregate.aggregates[0].function to max, or start fresh at a new spec.checkpoint.location: the query then reads orders from value 0 and rebuilds its state, and Kafka topic top-orders receives that data after the records it already holds.
	//
	// Verdict: rejected (1 rejected, 0 with a warning, 0 allowed)
	// Guarantee: at-least-once. A batch replayed after a failure may be produced to Kafka again, so consumers may see duplicates (each record's lockstep-batch header, <query id>:<batch id>, tells them apart); set spec.sink.kafka.exactlyOnce: true to produce each batch in a transaction.
}

// With no checkpoint yet, everything is allowed.
func Example_noCheckpoint() {
	spec := qt.Make("ticks", "default").RateSource("ticks", 1).ConsoleSink().Spec()
	v := compat.Check(compat.Shape{}, spec)
	v.WriteText(os.Stdout)
	// Output:
	// No checkpoint yet: everything is allowed, and every source starts at its starting position.
	//
	// Verdict: allowed (0 rejected, 0 with a warning, 0 allowed)
	// Guarantee: none. The console sink is not fault tolerant: it keeps nothing, and a batch replayed after a failure is printed again.
}

// With no checkpoint yet, Check still runs the rules that judge the new query alone. Here a
// dropDuplicates without a watermark would keep every order id forever: allowed, with a
// warning and the remedy, before the first run.
func Example_unboundedState() {
	spec := qt.Make("orders", "shop").
		FilesSource("orders", "/data/orders", v1.FormatJSON, qt.Col("order_id", v1.TypeString), qt.Col("ts", v1.TypeTimestamp)).
		DropDuplicates("dedup", "order_id").
		FilesSink("/data/unique-orders", v1.FormatJSON).
		Spec()
	v := compat.Check(compat.Shape{}, spec)
	v.WriteText(os.Stdout)
	// Output:
	// No checkpoint yet: everything is allowed, and every source starts at its starting position.
	//
	// ! unbounded-state spec.transform[0].dropDuplicates
	//     The dropDuplicates step "dedup" keeps every distinct (order_id string) it has seen, and its state (in memory and in the checkpoint) grows without bound as new keys arrive, because the query has no watermark to tell it when a key can no longer come again.
	//     Remedy: Add a watermark on an event-time column such as ts before the step and include that column in spec.transform[0].dropDuplicates.columns, so that keys older than the watermark are evicted (a repeat then counts as a duplicate only with the same event time, as a redelivered record has); do it before the first run, while there is no state to keep.
	//
	// Verdict: warning (0 rejected, 1 with a warning, 0 allowed)
	// Guarantee: exactly-once. The sources are replayable and the files sink lists each batch's files in a manifest keyed by query id and batch id, so a batch replayed after a failure is found and skipped; readers must trust only the manifest.
}
