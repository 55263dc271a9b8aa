package provider

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkPlan measures terraform plan as a user runs it — the real CLI, the provider
// reattached, the real webhook reading checkpoints on S3 — for 1 and for 50 queries, with
// none or all of them changed, at the provider's default rate limit and at client-go's
// (QPS 5, burst 10). One op is one whole plan: the CLI's start, the refresh of every query,
// and the dry run of every changed one; a changed run also reports change-ms, what the changes
// cost over the no-change plan just before it. docs/benchmarks.md has the numbers.
func BenchmarkPlan(b *testing.B) {
	c := newLockstepCluster(b)
	for _, n := range []int{1, 50} {
		w := newWorkspace(b, c)
		w.write(benchQueries(c, n, false))
		w.apply()
		for i := range n {
			c.writeCheckpoint(b, fmt.Sprintf("orders-%d-%d", n, i))
		}
		for _, limits := range []struct{ name, settings string }{
			{"default", ""},
			{"client-go-default", "  client_qps   = 5\n  client_burst = 10\n"},
		} {
			w.providerSettings = limits.settings
			var unchanged float64 // ms per plan with no change, for the changed run's change-ms
			for _, changed := range []bool{false, true} {
				name := fmt.Sprintf("queries=%d/changed=%v/limit=%s", n, changed, limits.name)
				b.Run(name, func(b *testing.B) {
					w.write(benchQueries(c, n, changed))
					for b.Loop() {
						w.tf.Must("plan", "-input=false", "-lock=false")
					}
					perPlan := float64(b.Elapsed().Microseconds()) / 1000 / float64(b.N)
					if !changed {
						unchanged = perPlan
					} else if unchanged > 0 {
						b.ReportMetric(perPlan-unchanged, "change-ms")
					}
				})
			}
		}
		w.providerSettings = ""
		w.write(benchQueries(c, n, false))
		w.tf.Must("destroy", "-auto-approve", "-input=false", "-lock=false")
	}
}

// benchQueries is n queries orders-<n>-0… on the test's store; changed changes each one's filter,
// which the checkpoint allows.
func benchQueries(c *lockstepCluster, n int, changed bool) string {
	var b strings.Builder
	for i := range n {
		q := c.query()
		q.Name = fmt.Sprintf("orders-%d-%d", n, i)
		q.Sink = c.path(fmt.Sprintf("out/orders-%d-%d", n, i))
		if changed {
			q.Filter = "amount > 1.0"
		}
		b.WriteString(strings.Replace(q.hcl(), `"lockstep_streaming_query" "q"`, fmt.Sprintf(`"lockstep_streaming_query" "q%d"`, i), 1))
	}
	return b.String()
}

// TestProviderClientLimits plans with the rate limit set in the provider block, and refuses
// a limit below 1 at plan time.
func TestProviderClientLimits(t *testing.T) {
	c := newLockstepCluster(t)
	w := newWorkspace(t, c)
	w.providerSettings = "  client_qps   = 0.5\n  client_burst = 2\n"
	w.write(c.query().hcl())
	if out, err := w.plan(); err == nil || !strings.Contains(out, "client_qps") {
		t.Errorf("plan with client_qps = 0.5 did not fail on client_qps (%v):\n%s", err, out)
	}
	w.providerSettings = "  client_qps   = 20\n  client_burst = 40\n"
	w.write(c.query().hcl())
	if out := w.mustPlan(); !strings.Contains(out, "Change: lockstep_streaming_query.q: create") {
		t.Errorf("plan with client_qps = 20:\n%s", out)
	}
}
