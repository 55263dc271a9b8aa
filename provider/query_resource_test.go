package provider

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"testing"
	"text/template"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// queryConfig is a lockstep_streaming_query "q" reading JSON files and writing Parquet: the
// parts the tests change are fields.
type queryConfig struct {
	Name           string
	Source         string // files source folder
	Returns        string // a second files source, "returns", with the same columns; "" leaves it out
	Filter         string
	Transform      string // the transform attribute, verbatim; "" is the filter and select below
	ProcessingTime string
	Sink           string // files sink folder; "" is a console sink
	Location       string // checkpoint.location; "" leaves it out
	Store          string // checkpoint.store; "" leaves it out
	Retention      string // checkpoint.retention; "" leaves it out
	Suspend        bool
	WaitFor        string
	Extra          string // more attributes, verbatim
}

var queryTemplate = template.Must(template.New("q").Parse(`
resource "lockstep_streaming_query" "q" {
  name = {{printf "%q" .Name}}
  sources = [{
    name  = "orders"
    files = { path = {{printf "%q" .Source}}, format = "json", max_files_per_trigger = 10 }
    schema = {
      columns = [
        { name = "order_id", type = "string" },
        { name = "amount", type = "double" },
      ]
    }
  }
{{- if .Returns}}, {
    name  = "returns"
    files = { path = {{printf "%q" .Returns}}, format = "json" }
    schema = {
      columns = [
        { name = "order_id", type = "string" },
        { name = "amount", type = "double" },
      ]
    }
  }
{{- end}}]
{{- if .Transform}}
  transform = {{.Transform}}
{{- else}}
  transform = [
    { filter = {{printf "%q" .Filter}} },
    { select = [{ name = "order_id", expr = "order_id" }, { name = "cents", expr = "int(amount * 100.0)" }] },
  ]
{{- end}}
{{- if .Sink}}
  sink    = { files = { path = {{printf "%q" .Sink}} } }
{{- else}}
  sink    = { console = {} }
{{- end}}
  trigger = { processing_time = {{printf "%q" .ProcessingTime}} }
  checkpoint = {
{{- if .Location}}
    location = {{printf "%q" .Location}}
{{- end}}
{{- if .Store}}
    store = {{printf "%q" .Store}}
{{- end}}
{{- if .Retention}}
    retention = {{printf "%q" .Retention}}
{{- end}}
  }
{{- if .Suspend}}
  suspend = true
{{- end}}
{{- if .WaitFor}}
  wait_for = {{printf "%q" .WaitFor}}
{{- end}}
{{.Extra}}
}
`))

func (q queryConfig) hcl() string {
	var b bytes.Buffer
	if err := queryTemplate.Execute(&b, q); err != nil {
		panic(err)
	}
	return b.String()
}

// baseQuery is the query most tests start from.
func baseQuery() queryConfig {
	return queryConfig{
		Name:           "orders",
		Source:         "s3://landing/orders/",
		Filter:         "amount > 0.0",
		ProcessingTime: "30s",
		Sink:           "s3://lake/orders-clean/",
		Location:       "s3://checkpoints/orders",
	}
}

const address = "lockstep_streaming_query.q"

// TestAccStreamingQuery_basic creates a query, reads it back, imports it, and changes it in
// place, on a control plane without the admission webhook.
func TestAccStreamingQuery_basic(t *testing.T) {
	c := newTestCluster(t, testenv.ControlPlane(t))
	q := baseQuery()
	changed := q
	changed.Filter = "amount > 1.0"
	changed.ProcessingTime = "1m"

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		CheckDestroy:             c.checkGone("orders"),
		Steps: []resource.TestStep{
			{
				Config: c.provider() + q.hcl(),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(address, plancheck.ResourceActionCreate),
					// Known at plan time, from the spec alone.
					plancheck.ExpectKnownValue(address, tfjsonpath.New("delivery_guarantee"), knownvalue.StringExact("exactly-once")),
					plancheck.ExpectKnownValue(address, tfjsonpath.New("namespace"), knownvalue.StringExact(c.namespace)),
					plancheck.ExpectKnownValue(address, tfjsonpath.New("checkpoint_location"), knownvalue.StringExact("s3://checkpoints/orders")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("id"), knownvalue.StringExact(c.namespace+"/orders")),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("uid"), knownvalue.NotNull()),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("output_mode"), knownvalue.StringExact("append")),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("checkpoint").AtMapKey("min_batches_to_retain"), knownvalue.Int64Exact(100)),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("sources").AtSliceIndex(0).AtMapKey("on_malformed"), knownvalue.StringExact("fail")),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("delivery_guarantee_reason"), knownvalue.NotNull()),
				},
				Check: c.checkSpec("orders", func(spec map[string]any) error {
					return expectNested(spec, "amount > 0.0", "transform", 0, "filter")
				}),
			},
			{
				ResourceName:      address,
				ImportState:       true,
				ImportStateVerify: true,
				ImportStateIdFunc: func(*terraform.State) (string, error) { return c.namespace + "/orders", nil },
			},
			{
				Config: c.provider() + changed.hcl(),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(address, tfjsonpath.New("uid"), knownvalue.NotNull()),
				}},
				Check: c.checkSpec("orders", func(spec map[string]any) error {
					if err := expectNested(spec, "amount > 1.0", "transform", 0, "filter"); err != nil {
						return err
					}
					return expectNested(spec, "1m", "trigger", "processingTime")
				}),
			},
			{
				Config: c.provider() + changed.hcl(),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
			},
		},
	})
}

// TestAccStreamingQuery_disappears deletes the query behind Terraform's back: the next plan
// creates it again, and destroying a query that is gone succeeds.
func TestAccStreamingQuery_disappears(t *testing.T) {
	c := newTestCluster(t, testenv.ControlPlane(t))
	q := baseQuery()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{
				Config:             c.provider() + q.hcl(),
				Check:              c.deleteQuery("orders"),
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(address, plancheck.ResourceActionCreate),
				}},
			},
		},
	})
}

// TestAccStreamingQuery_drift changes the query outside Terraform (kubectl edit): the next
// plan shows the change as an update back to the configuration, and apply restores it.
func TestAccStreamingQuery_drift(t *testing.T) {
	c := newTestCluster(t, testenv.ControlPlane(t))
	q := baseQuery()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{Config: c.provider() + q.hcl()},
			{
				PreConfig: func() {
					c.edit(t, "orders", func(u *unstructured.Unstructured) {
						_ = unstructured.SetNestedField(u.Object, "5m", "spec", "trigger", "processingTime")
						_ = unstructured.SetNestedField(u.Object, true, "spec", "suspend")
						sources, _, _ := unstructured.NestedSlice(u.Object, "spec", "sources")
						sources = append(sources, map[string]any{"name": "extra", "rate": map[string]any{"rowsPerSecond": int64(5)}})
						_ = unstructured.SetNestedSlice(u.Object, sources, "spec", "sources")
					})
				},
				Config: c.provider() + q.hcl(),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
				}},
				Check: c.checkSpec("orders", func(spec map[string]any) error {
					if err := expectNested(spec, "30s", "trigger", "processingTime"); err != nil {
						return err
					}
					if s, ok := spec["suspend"]; ok && s != false {
						return fmt.Errorf("spec.suspend = %v after apply, want it gone", s)
					}
					if sources, _ := spec["sources"].([]any); len(sources) != 1 {
						return fmt.Errorf("spec.sources has %d sources after apply, want the 1 configured", len(sources))
					}
					return nil
				}),
			},
		},
	})
}

// checkGone is a CheckDestroy: the query is gone from the cluster.
func (c *testCluster) checkGone(name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		_, err := c.dyn.Resource(queriesResource).Namespace(c.namespace).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("StreamingQuery %s/%s still exists after destroy", c.namespace, name)
		}
		return nil
	}
}

// checkSpec reads the query from the API server and checks its spec.
func (c *testCluster) checkSpec(name string, check func(spec map[string]any) error) resource.TestCheckFunc {
	return func(*terraform.State) error {
		u, err := c.dyn.Resource(queriesResource).Namespace(c.namespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return check(objectSpec(u))
	}
}

// checkQueryIDEventually waits for the controller to report the query id it read from the
// checkpoint.
func (c *testCluster) checkQueryIDEventually(name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		deadline := time.Now().Add(eventually)
		for {
			u, err := c.dyn.Resource(queriesResource).Namespace(c.namespace).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if id, _, _ := unstructured.NestedString(u.Object, "status", "queryId"); id != "" {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the controller reported no query id for %s/%s within %s", c.namespace, name, eventually)
			}
			time.Sleep(tick)
		}
	}
}

// deleteQuery deletes the query outside Terraform.
func (c *testCluster) deleteQuery(name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		return c.dyn.Resource(queriesResource).Namespace(c.namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	}
}

// edit changes the query outside Terraform, as kubectl edit would (a plain update, under
// another field manager).
func (c *testCluster) edit(t testing.TB, name string, change func(*unstructured.Unstructured)) {
	t.Helper()
	ctx := context.Background()
	res := c.dyn.Resource(queriesResource).Namespace(c.namespace)
	u, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change(u)
	if _, err := res.Update(ctx, u, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatalf("edit StreamingQuery %s: %v", name, err)
	}
}

// expectNested checks the value at a path of map keys and list indexes.
func expectNested(obj map[string]any, want any, at ...any) error {
	var cur any = obj
	for _, step := range at {
		switch s := step.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return fmt.Errorf("%v: not an object at %q", at, s)
			}
			cur = m[s]
		case int:
			l, ok := cur.([]any)
			if !ok || s >= len(l) {
				return fmt.Errorf("%v: no element %d", at, s)
			}
			cur = l[s]
		}
	}
	if fmt.Sprint(cur) != fmt.Sprint(want) {
		return fmt.Errorf("spec%v = %v, want %v", at, cur, want)
	}
	return nil
}

// TestAccStreamingQuery_alreadyExists refuses, at plan time, to create a query that exists
// outside Terraform, and says how to import it.
func TestAccStreamingQuery_alreadyExists(t *testing.T) {
	c := newTestCluster(t, testenv.ControlPlane(t))
	spec := map[string]any{
		"sources": []any{map[string]any{"name": "ticks", "rate": map[string]any{}}},
		"sink":    map[string]any{"console": map[string]any{}},
	}
	if _, err := c.dyn.Resource(queriesResource).Namespace(c.namespace).Create(context.Background(),
		queryObject(c.namespace, "orders", spec), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{{
			Config:      c.provider() + baseQuery().hcl(),
			ExpectError: regexp.MustCompile(`Streaming\s+Query\s+Already\s+Exists[\s\S]*terraform\s+import`),
		}},
	})
}

// TestDestroyToleratesGone destroys, without refreshing first, a query that was deleted
// outside Terraform: delete finds nothing and succeeds.
func TestDestroyToleratesGone(t *testing.T) {
	c := newTestCluster(t, testenv.ControlPlane(t))
	tf := initMain(t, c.provider()+baseQuery().hcl())
	tf.Must("apply", "-auto-approve", "-input=false")
	if err := c.deleteQuery("orders")(nil); err != nil {
		t.Fatal(err)
	}
	tf.Must("destroy", "-auto-approve", "-input=false", "-refresh=false")
}

// TestApplyRevertsDriftInOneWrite changes the query outside Terraform, as kubectl edit does
// (a change, an added field, an added source, under another field manager), and applies the
// configuration again: apply writes the query once — one new resourceVersion, one new
// generation, so the engine restarts once — and the spec is the configuration's again
// (issue 23 #4). The same holds when the configuration changes too, and when it drops an
// attribute that only Terraform set.
func TestApplyRevertsDriftInOneWrite(t *testing.T) {
	c := newTestCluster(t, testenv.ControlPlane(t))
	q := baseQuery()
	more := q
	more.Returns = "s3://landing/returns/"
	more.Suspend = true
	tf := initMain(t, c.provider()+more.hcl())
	write := func(q queryConfig) { t.Helper(); tf.WriteMain(c.provider() + q.hcl()) }
	apply := func() { t.Helper(); tf.Must("apply", "-auto-approve", "-input=false", "-lock=false") }
	apply()

	drift := func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "5m", "spec", "trigger", "processingTime")
		_ = unstructured.SetNestedField(u.Object, true, "spec", "suspend")
		sources, _, _ := unstructured.NestedSlice(u.Object, "spec", "sources")
		_ = unstructured.SetNestedField(sources[0].(map[string]any), int64(3), "files", "maxFilesPerTrigger")
		_ = unstructured.SetNestedField(sources[0].(map[string]any), "skip", "onMalformed")
		sources = append(sources, map[string]any{"name": "extra", "rate": map[string]any{"rowsPerSecond": int64(5)}})
		_ = unstructured.SetNestedSlice(u.Object, sources, "spec", "sources")
	}
	changed := q
	changed.Filter = "amount > 1.0"

	for _, tc := range []struct {
		name  string
		edit  func(*unstructured.Unstructured) // made outside Terraform; nil for none
		query queryConfig
	}{
		// Server-side apply alone removes what only Terraform set.
		{"attributes only Terraform set dropped", nil, q},
		{"drift reverted", drift, q},
		{"drift reverted and the configuration changed", drift, changed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.edit != nil {
				c.edit(t, "orders", tc.edit)
			}
			write(tc.query)
			// What the configuration makes on a query of its own, without drift.
			fresh := newTestCluster(t, c.cfg)
			want := planSpec(t, fresh, tc.query)

			writes := c.watchWrites(t, "orders", apply)
			if len(writes) != 1 {
				t.Errorf("apply wrote the query %d times, want once: %v", len(writes), writes)
			}
			u, err := c.get(t, "orders")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, objectSpec(u)); diff != "" {
				t.Errorf("spec after apply differs from the configuration's (-want +got):\n%s", diff)
			}
			if out, err := tf.Run("plan", "-detailed-exitcode", "-input=false", "-lock=false"); err != nil {
				t.Errorf("plan after apply is not empty (%v):\n%s", err, out)
			}
		})
	}
}

// planSpec applies q in a namespace of its own and returns the spec it makes there: what the
// configuration alone makes, defaults included.
func planSpec(t *testing.T, c *testCluster, q queryConfig) map[string]any {
	t.Helper()
	tf := initMain(t, c.provider()+q.hcl())
	tf.Must("apply", "-auto-approve", "-input=false", "-lock=false")
	u, err := c.get(t, q.Name)
	if err != nil {
		t.Fatal(err)
	}
	return objectSpec(u)
}

// watchWrites runs do and returns the writes of the query name that the API server made
// meanwhile, as "resourceVersion/generation", from a watch that starts at the version read
// before do.
func (c *testCluster) watchWrites(t testing.TB, name string, do func()) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := c.dyn.Resource(queriesResource).Namespace(c.namespace)
	before, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := res.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: before.GetResourceVersion()})
	if err != nil {
		t.Fatalf("watch StreamingQuery %s: %v", name, err)
	}
	defer w.Stop()
	do()
	after, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var writes []string
	if after.GetResourceVersion() == before.GetResourceVersion() {
		return writes
	}
	timeout := time.After(eventually)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch of StreamingQuery %s ended early; writes so far: %v", name, writes)
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				t.Fatalf("watch event %s: %T", ev.Type, ev.Object)
			}
			writes = append(writes, fmt.Sprintf("%s/%d", u.GetResourceVersion(), u.GetGeneration()))
			if u.GetResourceVersion() == after.GetResourceVersion() {
				return writes
			}
		case <-timeout:
			t.Fatalf("the watch of StreamingQuery %s did not see version %s within %s; writes: %v", name, after.GetResourceVersion(), eventually, writes)
		}
	}
}
