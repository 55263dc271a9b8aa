package plan_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/plan"
)

func TestStepColumns(t *testing.T) {
	spec := qt.Orders().
		Filter("amount > 0").
		Select(qt.As("id", "order_id"), qt.As("country", "country.upperAscii()"), qt.As("total", "amount * double(qty)"), qt.As("big", "qty > 10"), qt.As("ts", "ts")).
		Watermark("ts", "10m").
		DropDuplicates("", "id").
		Aggregate("", []v1.GroupKey{qt.Key("country"), qt.Window("ts", "5m")},
			qt.Agg("n", v1.AggCount, ""), qt.Agg("revenue", v1.AggSum, "total"), qt.Agg("mean", v1.AggAvg, "total"),
			qt.Agg("first", v1.AggMin, "ts"), qt.Agg("ids", v1.AggCountDistinct, "id")).
		Spec()
	source := v1.Columns{
		qt.Col("order_id", v1.TypeString), qt.Col("country", v1.TypeString), qt.Col("amount", v1.TypeDouble),
		qt.Col("qty", v1.TypeLong), qt.Col("ts", v1.TypeTimestamp),
	}
	selected := v1.Columns{
		qt.Col("id", v1.TypeString), qt.Col("country", v1.TypeString), qt.Col("total", v1.TypeDouble),
		qt.Col("big", v1.TypeBoolean), qt.Col("ts", v1.TypeTimestamp),
	}
	aggregated := v1.Columns{
		qt.Col("country", v1.TypeString), qt.Col("window_start", v1.TypeTimestamp), qt.Col("window_end", v1.TypeTimestamp),
		qt.Col("n", v1.TypeLong), qt.Col("revenue", v1.TypeDouble), qt.Col("mean", v1.TypeDouble),
		qt.Col("first", v1.TypeTimestamp), qt.Col("ids", v1.TypeLong),
	}
	want := []v1.Columns{source, source, selected, selected, selected, aggregated}
	got, err := plan.Columns(spec)
	if err != nil {
		t.Fatalf("StepColumns() error = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("StepColumns() mismatch (-want +got):\n%s", diff)
	}
	out, err := plan.OutputColumns(spec)
	if err != nil || !cmp.Equal(out, aggregated) {
		t.Errorf("OutputColumns() = %v, %v; want %v", out, err, aggregated)
	}
}

func TestStepColumnsOfAnInvalidSpec(t *testing.T) {
	_, err := plan.OutputColumns(qt.Orders().Filter("nope").Spec())
	if err == nil {
		t.Fatal("OutputColumns() of a spec with an unknown column: want an error")
	}
	if _, err := plan.OutputColumns(qt.Orders().Watermark("ts", "1m").Spec()); err != nil {
		t.Errorf("OutputColumns() error = %v, want none", err)
	}
}
