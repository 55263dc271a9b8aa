//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// TestRebuildOnIncompatibleChange is the third way forward on the real node: a windowed
// count runs; a longer window is refused, and the refusal offers the rebuild with what it
// replays; with spec.onIncompatibleChange: rebuild the same change is admitted with a
// warning, the query reads Rebuilding (an Event says so), the engine rebuilds the state from
// the retained input and switches the checkpoint to it, and the query runs the new window on
// (Running, a Rebuilt Event, the same query id, a batch committed after the switch, and the
// sink's new windows 20 s long).
func TestRebuildOnIncompatibleChange(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	manifest := func(window, policy string) string {
		return fmt.Sprintf(`apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: windows}
spec:
  sources:
  - name: ticks
    rate: {rowsPerSecond: 20}
  transform:
  - watermark: {column: timestamp, delay: 2s}
  - aggregate:
      groupBy: [{window: {column: timestamp, duration: %s}}]
      aggregates: [{name: ticks, function: count}]
  sink:
    files: {path: %s, format: json}
  outputMode: append
  trigger: {processingTime: 1s}
  checkpoint: {store: %s}
%s`, window, tn.location("out/windows"), tn.store, policy)
	}
	tn.apply(manifest("10s", ""))
	id := tn.committed("windows", 4).Status.QueryID

	err := tn.tryApply(manifest("20s", ""))
	if err == nil || !strings.Contains(err.Error(), "window-size") || !strings.Contains(err.Error(), "Or rebuild the state from the retained input") {
		t.Fatalf("kubectl apply of a longer window: %v, want a refusal naming window-size that offers the rebuild", err)
	}
	tn.apply(manifest("20s", "  onIncompatibleChange: rebuild\n"))
	generation := tn.query("windows").Generation
	tn.eventuallyWithin(5*time.Minute, "the rebuilt query runs the new spec", func() error {
		q := tn.query("windows")
		if q.Status.ObservedGeneration < generation || q.Status.Phase != v1.PhaseRunning {
			return fmt.Errorf("generation %d observed, phase %s; conditions %s", q.Status.ObservedGeneration, q.Status.Phase, conditions(q))
		}
		if len(tn.queryEvents("windows", "Rebuilt")) == 0 {
			return fmt.Errorf("no Rebuilt Event yet; conditions %s", conditions(q))
		}
		return nil
	})
	if evs := tn.queryEvents("windows", v1.ReasonRebuilding); len(evs) == 0 {
		t.Errorf("no Rebuilding Event")
	}
	after := *tn.query("windows").Status.LatestCommittedBatch
	q := tn.committed("windows", after+3)
	if q.Status.QueryID != id {
		t.Errorf("query id %s after the rebuild, want %s", q.Status.QueryID, id)
	}
	// Windows the new engine closed are 20 s long.
	tn.eventually("the sink holds a 20 s window", func() error {
		cols, rows := tn.sinkRows("out/windows")
		start, end := -1, -1
		for i, c := range cols {
			switch c.Name {
			case "window_start":
				start = i
			case "window_end":
				end = i
			}
		}
		if start < 0 || end < 0 {
			return fmt.Errorf("the sink has no window columns: %v", cols)
		}
		for _, r := range rows {
			ts, ok1 := asTime(r[start])
			te, ok2 := asTime(r[end])
			if ok1 && ok2 && te.Sub(ts) == 20*time.Second {
				return nil
			}
		}
		return fmt.Errorf("no 20 s window among %d rows", len(rows))
	})
}

// asTime reads a timestamp the files sink wrote: a time, or its RFC 3339 text.
func asTime(v any) (time.Time, bool) {
	switch t := v.(type) {
	case time.Time:
		return t, true
	case string:
		p, err := time.Parse(time.RFC3339Nano, t)
		return p, err == nil
	}
	return time.Time{}, false
}
