//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestSparkRebuildOnIncompatibleChange is TestRebuildOnIncompatibleChange on the Spark runtime,
// through the real controller on the real node: a windowed count of JSON files on Spark (a
// driver pod and one executor) has its window lengthened. kubectl apply is refused naming
// window-size and offering the rebuild; with onIncompatibleChange: rebuild it is admitted, the
// driver rebuilds the state from the files the committed batches read (Rebuilding, then
// Rebuilt), and the query runs on with the same query id, closing windows of the new length.
func TestSparkRebuildOnIncompatibleChange(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	useSpark(t, tn.in)
	// Events 5 s apart from 10:00:00; each file holds the next four.
	put := func(file int) {
		var b bytes.Buffer
		for i := 4 * file; i < 4*file+4; i++ {
			fmt.Fprintf(&b, `{"id":"o%d","ts":"2026-01-05T10:%02d:%02dZ"}`+"\n", i, 5*i/60, 5*i%60)
		}
		tn.put(fmt.Sprintf("landing/ticks/%04d.json", file), b.Bytes())
	}
	manifest := func(window, policy string) string {
		return fmt.Sprintf(`apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: windows}
spec:
%s  sources:
  - name: ticks
    files: {path: %s, format: json, maxFilesPerTrigger: 1}
    schema: {columns: [{name: id, type: string}, {name: ts, type: timestamp}]}
  transform:
  - watermark: {column: ts, delay: 5s}
  - aggregate:
      groupBy: [{window: {column: ts, duration: %s}}]
      aggregates: [{name: ticks, function: count}]
  sink:
    files: {path: %s, format: json}
  outputMode: append
  trigger: {processingTime: 2s}
  checkpoint: {store: %s}
  resources: {requests: {cpu: 100m, memory: 1280Mi}, limits: {memory: 1280Mi}}
  engine: {progressTimeout: 15m}
%s`, sparkOnASmallNode(1), tn.location("landing/ticks"), window, tn.location("out/windows"), tn.store, policy)
	}
	put(0)
	put(1)
	tn.apply(manifest("10s", ""))
	id := tn.committedWithin(15*time.Minute, "windows", 1).Status.QueryID

	tn.refusedOfferingRebuild("a longer window", manifest("20s", ""), "window-size")
	generation := tn.query("windows").Generation + 1
	tn.apply(manifest("20s", "  onIncompatibleChange: rebuild\n"))
	tn.rebuilt(15*time.Minute, "kubectl", "windows", generation, 1)
	// Later events move the watermark past 10:00:40, which closes the 20 s window from 10:00:20:
	// its 4 events were read by batch 1, before the change, so the new query counts them only
	// if the rebuild put them in its state. (The window from 10:00:00 closed during the replay,
	// which writes nothing.)
	put(2)
	put(3)
	q := tn.committedWithin(15*time.Minute, "windows", 3)
	if q.Status.QueryID != id {
		t.Errorf("query id %s after the rebuild, want %s", q.Status.QueryID, id)
	}
	from := time.Date(2026, 1, 5, 10, 0, 20, 0, time.UTC)
	tn.eventuallyWithin(10*time.Minute, "the sink holds the 20 s window from 10:00:20 with its 4 events", func() error {
		cols, rows := tn.sinkRows("out/windows")
		names := cols.Names()
		start, end, count := slices.Index(names, "window_start"), slices.Index(names, "window_end"), slices.Index(names, "ticks")
		if start < 0 || end < 0 || count < 0 {
			return fmt.Errorf("the sink has no window or count columns: %v", cols)
		}
		for _, r := range rows {
			ts, ok1 := asTime(r[start])
			te, ok2 := asTime(r[end])
			if ok1 && ok2 && ts.Equal(from) && te.Sub(ts) == 20*time.Second {
				if fmt.Sprint(r[count]) != "4" {
					return fmt.Errorf("the window from 10:00:20 counts %v events, want 4: %v", r[count], r)
				}
				return nil
			}
		}
		return fmt.Errorf("no 20 s window from 10:00:20 among %d rows: %v", len(rows), rows)
	})
}
