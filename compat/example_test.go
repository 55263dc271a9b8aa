package compat_test

import (
	"fmt"
	"os"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/compat"
)

// Check judges a changed spec against the shape its checkpoint recorded. Here the top
// amount per country becomes the lowest: the state holds running maximums, so the change
// is rejected, with the remedy.
func Example_check() {
	query := func(fn v1.AggregateFunction) *v1.StreamingQuerySpec {
		return qt.Make("top-orders", "shop").
			RateSource("orders", 10).
			Select(qt.As("country", "string(value % 3)"), qt.As("amount", "double(value)")).
			Aggregate("top", []v1.GroupKey{qt.Key("country")}, qt.Agg("amount", fn, "amount")).
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
	// Guarantee: at-least-once. A batch replayed after a failure may be produced to Kafka again, so consumers may see duplicates; set spec.sink.kafka.exactlyOnce: true to produce each batch in a transaction.
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
