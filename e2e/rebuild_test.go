//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
)

// TestRebuildOnIncompatibleChange is the third way forward on the real node: a windowed
// count runs; a longer window is refused, and the refusal offers the rebuild with what it
// replays; with spec.onIncompatibleChange: rebuild the same change is admitted with a
// warning, the query reads Rebuilding (an Event says so), the engine rebuilds the state from
// the retained input and switches the checkpoint to it, and the query runs the new window on
// (Running, a Rebuilt Event, the same query id, a batch committed after the switch, and the
// sink's new windows 20 s long). Then the same through the real Terraform CLI, to 30 s windows.
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

	tn.refusedOfferingRebuild("a longer window", manifest("20s", ""), "window-size")
	tn.apply(manifest("20s", "  onIncompatibleChange: rebuild\n"))
	rebuilt := func(how string, rebuilds int, window time.Duration) {
		t.Helper()
		tn.rebuilt(5*time.Minute, how, "windows", tn.query("windows").Generation, rebuilds)
		q := tn.commitsMore("windows", 3)
		if q.Status.QueryID != id {
			t.Errorf("%s: query id %s after the rebuild, want %s", how, q.Status.QueryID, id)
		}
		// Windows the new engine closed have the new size.
		tn.eventually(fmt.Sprintf("%s: the sink holds a %s window", how, window), func() error {
			cols, rows := tn.sinkRows("out/windows")
			names := cols.Names()
			start, end := slices.Index(names, "window_start"), slices.Index(names, "window_end")
			if start < 0 || end < 0 {
				return fmt.Errorf("the sink has no window columns: %v", cols)
			}
			for _, r := range rows {
				ts, ok1 := asTime(r[start])
				te, ok2 := asTime(r[end])
				if ok1 && ok2 && te.Sub(ts) == window {
					return nil
				}
			}
			return fmt.Errorf("no %s window among %d rows", window, len(rows))
		})
	}
	rebuilt("kubectl", 1, 20*time.Second)

	// The same through the real Terraform CLI: the query imported, its window changed again
	// with on_incompatible_change = "rebuild": the plan warns on the changed attribute with
	// what the rebuild replays, apply admits it, and the query rebuilds again and runs on.
	tf := newTerraform(t, tn.in.node.Kubeconfig, tn.ns)
	tfQuery := func(window string) string {
		return fmt.Sprintf(`
resource "lockstep_streaming_query" "windows" {
  name    = "windows"
  sources = [{ name = "ticks", rate = { rows_per_second = 20 } }]
  transform = [
    { watermark = { column = "timestamp", delay = "2s" } },
    { aggregate = { group_by = [{ window = { column = "timestamp", duration = %q } }], aggregates = [{ name = "ticks", function = "count" }] } },
  ]
  sink                   = { files = { path = %q, format = "json" } }
  output_mode            = "append"
  trigger                = { processing_time = "1s" }
  checkpoint             = { store = %q }
  on_incompatible_change = "rebuild"
}
`, window, tn.location("out/windows"), tn.store)
	}
	tf.write(tfQuery("20s"))
	tf.Must("init", "-input=false")
	tf.Must("import", "-input=false", "-lock=false", "lockstep_streaming_query.windows", tn.ns+"/windows")
	tf.write(tfQuery("30s"))
	if out := tf.Must("plan", "-input=false", "-lock=false"); !strings.Contains(out, "window-size") || !strings.Contains(out, "Accepted by on_incompatible_change: rebuild") {
		t.Errorf("terraform plan of a 30 s window: want a warning naming window-size that the rebuild accepts:\n%s", out)
	}
	tf.Must("apply", "-input=false", "-lock=false", "-auto-approve")
	rebuilt("terraform", 2, 30*time.Second)
}

// refusedOfferingRebuild applies manifest, a change the checkpoint forbids (what), and checks
// that the API server refuses it, naming rule and offering the rebuild.
func (tn *tenant) refusedOfferingRebuild(what, manifest, rule string) {
	tn.t.Helper()
	err := tn.tryRefusedApply(manifest)
	if err == nil || !strings.Contains(err.Error(), rule) || !strings.Contains(err.Error(), "Or rebuild the state from the retained input") {
		tn.t.Fatalf("kubectl apply of %s: %v, want a refusal naming %s that offers the rebuild", what, err, rule)
	}
}

// rebuilt waits within timeout until the query has observed generation and runs, with at
// least rebuilds Rebuilt Events (how names the change in messages), and checks that as many
// Rebuilding Events announced them.
func (tn *tenant) rebuilt(timeout time.Duration, how, name string, generation int64, rebuilds int) {
	tn.t.Helper()
	tn.eventuallyWithin(timeout, how+": the rebuilt query runs the new spec", func() error {
		q := tn.query(name)
		if q.Status.ObservedGeneration < generation || q.Status.Phase != v1.PhaseRunning {
			return fmt.Errorf("generation %d observed, phase %s; conditions %s", q.Status.ObservedGeneration, q.Status.Phase, conditions(q))
		}
		if n := tn.eventCount(name, "Rebuilt"); n < rebuilds {
			return fmt.Errorf("%d Rebuilt Events, want %d; conditions %s", n, rebuilds, conditions(q))
		}
		return nil
	})
	if n := tn.eventCount(name, v1.ReasonRebuilding); n < rebuilds {
		tn.t.Errorf("%s: %d Rebuilding Events, want %d", how, n, rebuilds)
	}
}

// eventCount counts the query's Events of reason, each as often as it occurred (the API
// folds repeats of one message into one Event with a count or a series).
func (tn *tenant) eventCount(name, reason string) int {
	tn.t.Helper()
	var list corev1.EventList
	if err := tn.in.c.List(context.Background(), &list, client.InNamespace(tn.ns)); err != nil {
		tn.t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "StreamingQuery" && e.InvolvedObject.Name == name && e.Reason == reason {
			c := max(int(e.Count), 1)
			if e.Series != nil {
				c = max(c, int(e.Series.Count))
			}
			n += c
		}
	}
	return n
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
