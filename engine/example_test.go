package engine_test

import (
	"context"
	"fmt"
	"os"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/sink"
	"github.com/lockstep-dev/lockstep/engine/source"
)

// The program that runs queries fills a registry explicitly; a kind can be
// registered once.
func ExampleRegistry() {
	reg := engine.NewRegistry()
	fmt.Println(reg.RegisterSource(v1.SourceRate, source.RateSpec(), source.NewRate))
	fmt.Println(reg.RegisterSink(v1.SinkConsole, sink.ConsoleSpec(), sink.NewConsole))
	fmt.Println(reg.RegisterSink(v1.SinkConsole, sink.ConsoleSpec(), sink.NewConsole))
	fmt.Println(reg.SourceKinds(), reg.SinkKinds())
	// Output:
	// <nil>
	// <nil>
	// register sink kind "console": already registered
	// [rate] [console]
}

// Compile a query once, then run it: here one batch (trigger once) of a rate
// source, printed by the console sink.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "checkpoint")
	defer os.RemoveAll(dir)
	reg := engine.NewRegistry()
	_ = reg.RegisterSource(v1.SourceRate, source.RateSpec(), source.NewRate)
	_ = reg.RegisterSink(v1.SinkConsole, sink.ConsoleSpec(), sink.NewConsole)

	obj := querytest.Make("demo", "default").
		RateSource("ticks", 5).
		Select(querytest.As("value", "value"), querytest.As("label", "'tick-' + string(value)")).
		ConsoleSink().
		Once().
		Obj()
	q, err := engine.New(obj, reg,
		engine.WithCheckpoint(dir),
		engine.WithClock(clocktesting.NewFakeClock(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))),
		engine.WithStdout(os.Stdout))
	if err != nil {
		fmt.Println(err)
		return
	}
	sum, err := q.Run(context.Background())
	fmt.Println(sum.Reason, sum.Batches, err)
	fmt.Println(q.Guarantee().Level)
	// Output:
	// -------------------------------------------
	// Batch: 0
	// -------------------------------------------
	// +-----+------+
	// |value| label|
	// +-----+------+
	// |    0|tick-0|
	// +-----+------+
	//
	// trigger-done 1 <nil>
	// none
}
