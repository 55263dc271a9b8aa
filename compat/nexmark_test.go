package compat_test

import (
	"testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/compat"
)

// TestNexmarkSource: a nexmark source is replayable like rate, a new seed or
// rate only shapes future events, and another table is another set of
// columns, which the schema rules judge.
func TestNexmarkSource(t *testing.T) {
	query := func(n v1.NexmarkSource) *v1.StreamingQuerySpec {
		return querytest.Make("q", "ns").NexmarkSource("events", n).FilesSink("/out", v1.FormatJSON).Spec()
	}
	old := query(v1.NexmarkSource{})
	if g, reason := compat.GuaranteeOf(old); g != v1.GuaranteeExactlyOnce {
		t.Errorf("GuaranteeOf(nexmark → files) = %s (%s), want exactly-once", g, reason)
	}
	shape, err := compat.ShapeOf(old)
	if err != nil {
		t.Fatal(err)
	}
	if v := compat.Check(shape, query(v1.NexmarkSource{Seed: 4, EventsPerSecond: 1_000_000, AsFastAsPossible: true})); v.Severity != compat.Allowed {
		t.Errorf("Check(new seed and rate) = %s %+v, want allowed", v.Severity, v.Findings)
	}
	// Stateless, the sink then receives other columns: a warning, as for a changed schema.
	v := compat.Check(shape, query(v1.NexmarkSource{Table: v1.NexmarkAuction}))
	if v.Severity != compat.Warning || len(v.Findings) == 0 {
		t.Errorf("Check(bid → auction) = %s %+v, want the changed columns reported with a warning", v.Severity, v.Findings)
	}
}
