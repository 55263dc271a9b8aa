package plan_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/plan"
)

var orderColumns = []v1.Column{
	{Name: "k", Type: v1.TypeString}, {Name: "qty", Type: v1.TypeLong}, {Name: "ts", Type: v1.TypeTimestamp},
}

// TestBuildFollowsTheEventTime checks the one place that follows the watermark's column
// through the steps: the engine's operators and the planner's shape read it from the plan.
// A window on it makes the window's end the event time after the aggregate.
func TestBuildFollowsTheEventTime(t *testing.T) {
	spec := qt.Make("q", "ns").FilesSource("orders", "/in", v1.FormatJSON, orderColumns...).
		Filter("qty > 0").
		Watermark("ts", "1m").
		Select(v1.Projection{Name: "event_time", Expr: " ts "}, v1.Projection{Name: "k", Expr: "k"}, v1.Projection{Name: "twice", Expr: "k + k"}).
		DropDuplicates("", "k", "event_time").
		Aggregate("", []v1.GroupKey{{Window: &v1.Window{Column: "event_time", Duration: "1m"}}}, v1.Aggregation{Name: "n", Function: v1.AggCount}).
		Filter("n > 1").
		FilesSink("/out", v1.FormatJSON).Spec()
	pl, errs := plan.Build(spec)
	if len(errs) > 0 {
		t.Fatalf("Build() = %v", errs)
	}
	var got []string
	for _, s := range pl.Steps {
		got = append(got, s.EventTime)
	}
	// After the window the event time is its end, at the window's last instant.
	if want := []string{"", "", "ts", "event_time", "event_time", "window_end"}; !slices.Equal(got, want) {
		t.Errorf("event time per step = %q, want %q", got, want)
	}
	if s := pl.Steps[5]; !s.WindowTime || pl.Steps[4].WindowTime {
		t.Errorf("WindowTime = %t after the window, %t before; want true, false", s.WindowTime, pl.Steps[4].WindowTime)
	}
	sel := pl.Steps[2].Select
	if sel[0].From != 2 || sel[1].From != 0 || sel[2].From != -1 || sel[2].Expr.Type != v1.TypeString {
		t.Errorf("select = %+v, want event_time from column 2, k from 0, twice computed (string)", sel)
	}
	if op := pl.Steps[3].Operator; op == nil || op.Name != "0" {
		t.Errorf("dropDuplicates operator = %+v, want name 0", op)
	}
	if op := pl.Steps[4].Operator; op == nil || op.Name != "1" || op.Ordinal != 1 {
		t.Errorf("aggregate operator = %+v, want name 1", op)
	}
	if names := pl.Output().Names(); !slices.Equal(names, []string{v1.ColumnWindowStart, v1.ColumnWindowEnd, "n"}) {
		t.Errorf("Output() = %v", names)
	}
	if d := pl.Steps[1].Durations; d.Delay != time.Minute {
		t.Errorf("the watermark's durations = %+v, want a delay of 1m", d)
	}
	if d := pl.Steps[4].Durations; d.Size != time.Minute || d.Slide != time.Minute {
		t.Errorf("the window's durations = %+v, want a tumbling 1m", d)
	}
	if spec.Trigger.ProcessingTime != "" || pl.Spec == spec {
		t.Error("Build() must default a copy, not the spec it was given")
	}
}

// TestBuildRefusesWhatValidationRefuses: an expression that does not type-check is the
// validation's error, with its field path.
func TestBuildRefusesWhatValidationRefuses(t *testing.T) {
	spec := qt.Make("q", "ns").FilesSource("orders", "/in", v1.FormatJSON, orderColumns...).
		Filter("qty + 'x'").FilesSink("/out", v1.FormatJSON).Spec()
	_, errs := plan.Build(spec)
	if len(errs) != 1 || errs[0].Field != "spec.transform[0].filter" || !strings.Contains(errs[0].Detail, "no matching overload") {
		t.Fatalf("Build() = %v, want one error at spec.transform[0].filter", errs)
	}
}

// TestBuildJoinOutput: a join step carries its right side's columns (a stream side's after its
// transform) and its output columns, each with the side and index it takes, so that a runtime
// reads them from the plan.
func TestBuildJoinOutput(t *testing.T) {
	side := qt.StreamSide("pays", "ts", "pts", "5s", "0s", "5s")
	side.Transform = []v1.SideStep{{Select: []v1.Projection{qt.As("pk", "pk"), qt.As("pts", "pts")}}}
	spec := qt.Make("q", "ns").FilesSource("orders", "/in", v1.FormatJSON, orderColumns...).
		FilesSource("pays", "/pays", v1.FormatJSON, qt.Col("pk", v1.TypeString), qt.Col("paid", v1.TypeDouble), qt.Col("pts", v1.TypeTimestamp)).
		Watermark("ts", "5s").
		Join(v1.Join{Keys: qt.Keys("k", "pk"), Stream: side, Select: []v1.JoinColumn{{Side: v1.SideLeft, Column: "qty"}, {Side: v1.SideRight, Column: "pts", Name: "paid_at"}}}).
		FilesSink("/out", v1.FormatJSON).Spec()
	pl, errs := plan.Build(spec)
	if len(errs) > 0 {
		t.Fatalf("Build() = %v", errs)
	}
	j := pl.Steps[1]
	if names := j.Right.Names(); !slices.Equal(names, []string{"pk", "pts"}) {
		t.Errorf("Right = %v, want the side's columns after its transform", names)
	}
	want := []plan.OutputColumn{
		{Column: v1.Column{Name: "qty", Type: v1.TypeLong}, Side: v1.SideLeft, Index: 1},
		{Column: v1.Column{Name: "paid_at", Type: v1.TypeTimestamp}, Side: v1.SideRight, Index: 1},
	}
	if !slices.Equal(j.JoinOutput, want) {
		t.Errorf("JoinOutput = %+v, want %+v", j.JoinOutput, want)
	}
}

// TestBuildParsesDurations: the plan carries every duration of the spec parsed, so that a
// runtime parses none: a sliding window's size and slide, a session's gap, a stream join's
// right-side watermark delay, a static join's refresh period and the trigger's interval.
func TestBuildParsesDurations(t *testing.T) {
	spec := qt.Make("q", "ns").FilesSource("orders", "/in", v1.FormatJSON, orderColumns...).
		Watermark("ts", "30s").
		Aggregate("", []v1.GroupKey{qt.Key("k"), {Window: &v1.Window{Column: "ts", Duration: "10s", Slide: "2s"}}}, qt.Agg("n", v1.AggCount, "")).
		FilesSink("/out", v1.FormatJSON).
		Edit(func(s *v1.StreamingQuerySpec) { s.Trigger = v1.Trigger{ProcessingTime: "90s"} }).Spec()
	pl, errs := plan.Build(spec)
	if len(errs) > 0 {
		t.Fatalf("Build() = %v", errs)
	}
	if got, want := pl.Steps[1].Durations, (plan.Durations{Size: 10 * time.Second, Slide: 2 * time.Second}); got != want {
		t.Errorf("window durations = %+v, want %+v", got, want)
	}
	if pl.Steps[0].Durations.Delay != 30*time.Second || pl.Interval != 90*time.Second {
		t.Errorf("watermark delay %v, trigger interval %v; want 30s, 1m30s", pl.Steps[0].Durations.Delay, pl.Interval)
	}
	sess := qt.Make("q", "ns").FilesSource("orders", "/in", v1.FormatJSON, orderColumns...).
		Watermark("ts", "0s").
		Aggregate("", []v1.GroupKey{qt.Key("k"), qt.Session("ts", "8s")}, qt.Agg("n", v1.AggCount, "")).
		OutputMode(v1.OutputAppend).FilesSink("/out", v1.FormatJSON).Spec()
	if pl, errs = plan.Build(sess); len(errs) > 0 {
		t.Fatalf("Build() = %v", errs)
	}
	if got := pl.Steps[1].Durations.Gap; got != 8*time.Second {
		t.Errorf("session gap = %v, want 8s", got)
	}
}
