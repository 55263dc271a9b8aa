package provider

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// fakeController plays the controller's part in status, which envtest cannot run (it has no
// kubelet for the engine pod): once the query exists, it reports status for its generation.
// It stops when the test ends.
func (c *testCluster) fakeController(t testing.TB, name string, status map[string]any) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		res := c.dyn.Resource(queriesResource).Namespace(c.namespace)
		ticker := time.NewTicker(tick)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			u, err := res.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			if g, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); g == u.GetGeneration() {
				continue
			}
			st := map[string]any{"observedGeneration": u.GetGeneration()}
			for k, v := range status {
				st[k] = v
			}
			u.Object["status"] = st
			_, _ = res.UpdateStatus(ctx, u, metav1.UpdateOptions{})
		}
	}()
}

// TestAccStreamingQuery_waitRunning waits for the controller to report Running and the first
// committed batch, and records what it reported.
func TestAccStreamingQuery_waitRunning(t *testing.T) {
	c := newTestCluster(t, testenv.ControlPlane(t))
	c.fakeController(t, "orders", map[string]any{
		"phase": "Running", "queryId": "3f1c2a9e-0000-4000-8000-000000000001",
		"checkpointLocation": "s3://checkpoints/orders", "latestCommittedBatch": int64(0), "guarantee": "exactly-once",
	})
	q := baseQuery()
	q.WaitFor = waitCommittedBatch
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{{
			Config: c.provider() + q.hcl(),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(address, tfjsonpath.New("phase"), knownvalue.StringExact("Running")),
				statecheck.ExpectKnownValue(address, tfjsonpath.New("query_id"), knownvalue.StringExact("3f1c2a9e-0000-4000-8000-000000000001")),
				statecheck.ExpectKnownValue(address, tfjsonpath.New("latest_committed_batch"), knownvalue.Int64Exact(0)),
			},
		}},
	})
}

// TestAccStreamingQuery_waitFailed ends the wait with the engine's error when the query fails.
func TestAccStreamingQuery_waitFailed(t *testing.T) {
	c := newTestCluster(t, testenv.ControlPlane(t))
	c.fakeController(t, "orders", map[string]any{
		"phase": "Failed", "lastFailure": map[string]any{"message": "read s3://landing/orders/: access denied"},
	})
	q := baseQuery()
	q.WaitFor = waitRunning
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{{
			Config:      c.provider() + q.hcl(),
			ExpectError: regexp.MustCompile(`Streaming\s+Query\s+Not\s+Ready[\s\S]*failed:\s+read\s+s3://landing/orders/:\s+access\s+denied`),
		}},
	})
}

// TestAccStreamingQuery_waitTimeout ends a wait that nothing answers at the timeout, saying
// what was awaited. A batch the status shows committed while the query is still Pending (the
// engine of this spec is not running yet; the old engine's last batch, finished during the
// roll) does not end wait_for = "committed_batch" either.
func TestAccStreamingQuery_waitTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  map[string]any // nil: no controller answers
		waitFor string
		want    string
	}{
		{"nothing answers", nil, waitRunning, `waited\s+2s\s+for\s+wait_for\s+=\s+"running";\s+the\s+phase\s+is\s+not\s+reported\s+yet`},
		{"a commit while Pending", map[string]any{"phase": "Pending", "latestCommittedBatch": int64(4)}, waitCommittedBatch,
			`waited\s+2s\s+for\s+wait_for\s+=\s+"committed_batch";\s+the\s+phase\s+is\s+Pending`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, testenv.ControlPlane(t))
			if tc.status != nil {
				c.fakeController(t, "orders", tc.status)
			}
			q := baseQuery()
			q.WaitFor = tc.waitFor
			q.Extra = `  timeouts = { create = "2s" }`
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: providers,
				Steps:                    []resource.TestStep{{Config: c.provider() + q.hcl(), ExpectError: regexp.MustCompile(tc.want)}},
			})
		})
	}
}

// TestAccStreamingQuery_waitCaughtUp waits for a committed batch with no lag left; while the
// sources lag, the wait ends at the timeout saying how far the query got.
func TestAccStreamingQuery_waitCaughtUp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lag     int64
		wantErr *regexp.Regexp
	}{
		{"caught up", 0, nil},
		{"lagging", 7, regexp.MustCompile(`waited\s+2s\s+for\s+wait_for\s+=\s+"caught_up";\s+the\s+phase\s+is\s+Running,\s+the\s+newest\s+committed\s+batch\s+0,\s+the\s+lag\s+7`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, testenv.ControlPlane(t))
			c.fakeController(t, "orders", map[string]any{"phase": "Running", "latestCommittedBatch": int64(0), "lag": tc.lag})
			q := baseQuery()
			q.WaitFor = waitCaughtUp
			q.Extra = `  timeouts = { create = "2s" }`
			step := resource.TestStep{Config: c.provider() + q.hcl(), ExpectError: tc.wantErr}
			if tc.wantErr == nil {
				step.ConfigStateChecks = []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("latest_committed_batch"), knownvalue.Int64Exact(0)),
				}
			}
			resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: providers, Steps: []resource.TestStep{step}})
		})
	}
}
