package source_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/source"
)

func newRate(t *testing.T, rps int64) engine.Source {
	t.Helper()
	r, err := source.NewRate(context.Background(), &v1.Source{Name: "r", Rate: &v1.RateSource{RowsPerSecond: rps}}, engine.SourceEnv{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRate(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	r := newRate(t, 10)

	p0, err := r.Plan(ctx, engine.PlanRequest{Batch: 0, Time: t0})
	if err != nil || !p0.HasData {
		t.Fatalf("Plan at start = %+v, %v; want the row due now", p0, err)
	}
	idle, err := r.Plan(ctx, engine.PlanRequest{Batch: 1, Start: p0.End, Time: t0.Add(50 * time.Millisecond)})
	if err != nil || idle.HasData || string(idle.End) != string(p0.End) {
		t.Fatalf("Plan before the next row is due = %+v, %v; want no data at %s", idle, err, p0.End)
	}
	p1, err := r.Plan(ctx, engine.PlanRequest{Batch: 1, Start: p0.End, Time: t0.Add(time.Second)})
	if err != nil || !p1.HasData {
		t.Fatalf("Plan = %+v, %v", p1, err)
	}
	got, err := r.Read(ctx, engine.ReadRequest{Batch: 1, Start: p0.End, End: p1.End})
	if err != nil {
		t.Fatal(err)
	}
	var want []engine.Row
	for i := int64(1); i <= 10; i++ {
		want = append(want, engine.Row{t0.Add(time.Duration(i) * 100 * time.Millisecond), i})
	}
	if diff := cmp.Diff(want, got.Rows); diff != "" {
		t.Errorf("batch 1 (-want +got):\n%s", diff)
	}
	// A replay in another process reads the same rows from the offsets alone.
	again, err := newRate(t, 99).Read(ctx, engine.ReadRequest{Batch: 1, Start: p0.End, End: p1.End})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got.Rows, again.Rows); diff != "" {
		t.Errorf("replayed batch 1 (-first +replay):\n%s", diff)
	}
}

func TestRateResumesValuesNotTime(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	p0, _ := newRate(t, 10).Plan(ctx, engine.PlanRequest{Batch: 0, Time: t0.Add(900 * time.Millisecond)})
	// An hour later, a new run: values continue, but the hour is not made up.
	later := t0.Add(time.Hour)
	r := newRate(t, 10)
	p1, err := r.Plan(ctx, engine.PlanRequest{Batch: 1, Start: p0.End, Time: later})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Read(ctx, engine.ReadRequest{Batch: 1, Start: p0.End, End: p1.End})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]engine.Row{{later, int64(1)}}, got.Rows); diff != "" {
		t.Errorf("first batch of the new run (-want +got):\n%s", diff)
	}
}

func TestRateAvailableNow(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	r := newRate(t, 10)
	if err := r.(engine.AvailableNowSource).PrepareAvailableNow(ctx, t0); err != nil {
		t.Fatal(err)
	}
	p0, _ := r.Plan(ctx, engine.PlanRequest{Batch: 0, Time: t0})
	p1, _ := r.Plan(ctx, engine.PlanRequest{Batch: 1, Start: p0.End, Time: t0.Add(time.Minute)})
	if !p0.HasData || p1.HasData {
		t.Fatalf("availableNow plans = %+v, %+v; want data only at start", p0, p1)
	}
}

// TestRateAfterHoursAtAMillion: the rows due after a day at a million rows
// a second are counted without overflow.
func TestRateAfterHoursAtAMillion(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	r := newRate(t, 1_000_000)
	p0, err := r.Plan(ctx, engine.PlanRequest{Time: t0})
	if err != nil {
		t.Fatal(err)
	}
	p1, err := r.Plan(ctx, engine.PlanRequest{Batch: 1, Start: p0.End, Time: t0.Add(24 * time.Hour)})
	if err != nil || !p1.HasData {
		t.Fatalf("Plan after a day = %+v, %v", p1, err)
	}
	if want := fmt.Sprintf(`"value":%d,`, int64(24*3600)*1_000_000+1); !strings.Contains(string(p1.End), want) {
		t.Errorf("end offset after a day = %s, want %s", p1.End, want)
	}
}
