package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestAccStreamingQueryDataSource reads a query written by the resource, with the status the
// controller reported.
func TestAccStreamingQueryDataSource(t *testing.T) {
	c := newTestCluster(t, testenv.ControlPlane(t))
	c.fakeController(t, "orders", map[string]any{
		"phase": "Running", "queryId": "q-1", "latestCommittedBatch": int64(4),
		"sources": []any{map[string]any{"name": "orders", "offsets": `{"files":3}`, "lag": int64(2)}},
	})
	q := baseQuery()
	q.WaitFor = waitRunning
	const data = "data.lockstep_streaming_query.q"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{{
			Config: c.provider() + q.hcl() + `
data "lockstep_streaming_query" "q" {
  name       = lockstep_streaming_query.q.name
  depends_on = [lockstep_streaming_query.q]
}
`,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(data, tfjsonpath.New("namespace"), knownvalue.StringExact(c.namespace)),
				statecheck.ExpectKnownValue(data, tfjsonpath.New("phase"), knownvalue.StringExact("Running")),
				statecheck.ExpectKnownValue(data, tfjsonpath.New("query_id"), knownvalue.StringExact("q-1")),
				statecheck.ExpectKnownValue(data, tfjsonpath.New("latest_committed_batch"), knownvalue.Int64Exact(4)),
				statecheck.ExpectKnownValue(data, tfjsonpath.New("delivery_guarantee"), knownvalue.StringExact("exactly-once")),
				statecheck.ExpectKnownValue(data, tfjsonpath.New("sources").AtSliceIndex(0).AtMapKey("files").AtMapKey("path"),
					knownvalue.StringExact("s3://landing/orders/")),
				statecheck.ExpectKnownValue(data, tfjsonpath.New("status").AtMapKey("sources").AtSliceIndex(0).AtMapKey("lag"),
					knownvalue.Int64Exact(2)),
				statecheck.CompareValuePairs(data, tfjsonpath.New("uid"), address, tfjsonpath.New("uid"), compare.ValuesSame()),
			},
		}},
	})
}

// TestAccStreamingQueryDataSource_notFound names the missing query.
func TestAccStreamingQueryDataSource_notFound(t *testing.T) {
	c := newTestCluster(t, testenv.ControlPlane(t))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{{
			Config:      c.provider() + `data "lockstep_streaming_query" "q" { name = "nope" }`,
			ExpectError: regexp.MustCompile(`There\s+is\s+no\s+StreamingQuery\s+nope\s+in\s+namespace`),
		}},
	})
}

// TestAccCheckpointStoreDataSource reads a CheckpointStore and the location it gives a query.
func TestAccCheckpointStoreDataSource(t *testing.T) {
	c := newTestCluster(t, testenv.ControlPlane(t))
	store := c.namespace + "-store"
	c.createStore(t, store, map[string]any{
		"s3":                    map[string]any{"endpoint": "http://127.0.0.1:9000", "bucket": "checkpoints", "caBundle": []byte("PEM")},
		"credentialsSecretName": "lockstep-s3",
		"locationTemplate":      "teams/{{namespace}}/{{name}}",
		"allowedNamespaces":     []any{c.namespace},
	})
	const data = "data.lockstep_checkpoint_store.s"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{{
			Config: c.provider() + fmt.Sprintf(`
data "lockstep_checkpoint_store" "s" {
  name       = %q
  query_name = "orders"
}
`, store),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(data, tfjsonpath.New("s3").AtMapKey("bucket"), knownvalue.StringExact("checkpoints")),
				statecheck.ExpectKnownValue(data, tfjsonpath.New("s3").AtMapKey("ca_bundle"), knownvalue.StringExact("PEM")),
				statecheck.ExpectKnownValue(data, tfjsonpath.New("credentials_secret_name"), knownvalue.StringExact("lockstep-s3")),
				statecheck.ExpectKnownValue(data, tfjsonpath.New("allowed_namespaces"), knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact(c.namespace)})),
				statecheck.ExpectKnownValue(data, tfjsonpath.New("location"), knownvalue.StringExact("s3://checkpoints/teams/"+c.namespace+"/orders")),
				statecheck.ExpectKnownValue(data, tfjsonpath.New("ready"), knownvalue.Bool(false)),
			},
		}, {
			// What the CheckpointStore reconciler writes once it has reached the bucket.
			PreConfig: func() { c.setStoreReady(t, store) },
			Config: c.provider() + fmt.Sprintf(`
data "lockstep_checkpoint_store" "s" {
  name = %q
}
`, store),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(data, tfjsonpath.New("ready"), knownvalue.Bool(true)),
			},
		}},
	})
}

// setStoreReady writes the status condition Ready=True on a CheckpointStore, as its
// reconciler does when the bucket is reachable.
func (c *testCluster) setStoreReady(t testing.TB, name string) {
	t.Helper()
	ctx := context.Background()
	res := c.dyn.Resource(storesResource)
	u, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cond := map[string]any{"type": "Ready", "status": "True", "reason": "BucketReachable", "message": "test",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": u.GetGeneration()}
	if err := unstructured.SetNestedSlice(u.Object, []any{cond}, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if _, err := res.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update status of CheckpointStore %s: %v", name, err)
	}
}

// createStore creates a cluster-scoped CheckpointStore, deleted when the test ends.
func (c *testCluster) createStore(t testing.TB, name string, spec map[string]any) {
	t.Helper()
	if b, ok := spec["s3"].(map[string]any)["caBundle"].([]byte); ok {
		spec["s3"].(map[string]any)["caBundle"] = base64.StdEncoding.EncodeToString(b)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1.GroupVersion.String(), "kind": v1.KindCheckpointStore,
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
	res := c.dyn.Resource(storesResource)
	if _, err := res.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CheckpointStore %s: %v", name, err)
	}
	t.Cleanup(func() { _ = res.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// TestCheckpointStoreReadyFromReconciler reads lockstep_checkpoint_store.ready as the real
// CheckpointStore reconciler writes it, after probing the real bucket (issue 15 #7).
func TestCheckpointStoreReadyFromReconciler(t *testing.T) {
	c := newLockstepCluster(t, func(mgr ctrl.Manager) error { return controller.NewStoreReconciler(mgr).SetupWithManager(mgr) })
	res := c.dyn.Resource(storesResource)
	deadline := time.Now().Add(eventually)
	for {
		u, err := res.Get(context.Background(), c.store, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		if slices.ContainsFunc(conds, func(x any) bool {
			m, _ := x.(map[string]any)
			return m["type"] == "Ready" && m["status"] == "True"
		}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the CheckpointStore reconciler did not report %s Ready: conditions %v", c.store, conds)
		}
		time.Sleep(tick)
	}
	w := newWorkspace(t, c)
	w.write(fmt.Sprintf(`
data "lockstep_checkpoint_store" "s" {
  name = %q
}

output "ready" {
  value = data.lockstep_checkpoint_store.s.ready
}
`, c.store))
	w.apply()
	if got := strings.TrimSpace(w.tf.Must("output", "-json", "ready")); got != "true" {
		t.Errorf("lockstep_checkpoint_store.ready = %s, want true as the reconciler reported", got)
	}
}
