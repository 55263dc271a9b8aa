package engine

import (
	"fmt"
	"testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/plan"
)

// BenchmarkTransform evaluates the compiled CEL of a filter and a select
// per row, the engine's hot path between reading and writing.
func BenchmarkTransform(b *testing.B) {
	spec := querytest.Make("bench", "default").
		FilesSource("orders", "/in", v1.FormatJSON,
			querytest.Col("id", v1.TypeString), querytest.Col("country", v1.TypeString),
			querytest.Col("amount", v1.TypeDouble), querytest.Col("qty", v1.TypeLong)).
		Filter("amount > 0.0").
		Select(querytest.As("id", "id"), querytest.As("country", "country.upperAscii()"), querytest.As("total", "amount * double(qty)")).
		ConsoleSink().Spec()
	steps := benchSteps(b, spec)
	const n = 10_000
	input := make([]Row, n)
	for i := range input {
		input[i] = Row{fmt.Sprint("o-", i), "de", float64(i%100 - 10), int64(i%7 + 1)}
	}
	rows := make([]Row, n)
	b.ReportAllocs()
	for b.Loop() {
		copy(rows, input)
		out := rows
		for _, st := range steps {
			out, _ = st.process(&stepBatch{}, out)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkFilter evaluates the kafka→kafka benchmark's filter alone
// (engine/kafka/bench_test.go): one comparison of a double column per row.
func BenchmarkFilter(b *testing.B) {
	spec := querytest.Make("bench", "default").
		FilesSource("orders", "/in", v1.FormatJSON,
			querytest.Col("id", v1.TypeString), querytest.Col("amount", v1.TypeDouble), querytest.Col("sent", v1.TypeLong)).
		Filter("amount >= 0.0").
		ConsoleSink().Spec()
	steps := benchSteps(b, spec)
	const n = 10_000
	input := make([]Row, n)
	for i := range input {
		input[i] = Row{fmt.Sprint("o-", i), float64(i%1000) / 4, int64(1767607200123456789 + i)}
	}
	rows := make([]Row, n)
	b.ReportAllocs()
	for b.Loop() {
		copy(rows, input)
		if out, _ := steps[0].process(&stepBatch{}, rows); len(out) != n {
			b.Fatalf("%d rows kept, want %d", len(out), n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
}

// benchSteps compiles the transform of spec.
func benchSteps(b testing.TB, spec *v1.StreamingQuerySpec) []step {
	b.Helper()
	pl, errs := plan.Build(spec)
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	steps, errs := compileSteps(pl)
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	return steps
}
