package provider

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestPlanReplace plans and applies the replacement of a query that Terraform manages:
// terraform plan -replace, and a tainted resource. The create half of a replacement takes
// over the query its delete removes first, so it plans; a query that Terraform does not
// manage is still refused (TestAccStreamingQuery_alreadyExists).
func TestPlanReplace(t *testing.T) {
	c := newLockstepCluster(t)
	w := newWorkspace(t, c)
	w.write(c.query().hcl())
	w.apply()
	c.writeCheckpoint(t, "orders")
	if err := c.checkQueryIDEventually("orders")(nil); err != nil {
		t.Fatal(err)
	}

	w.tf.Must("apply", "-refresh-only", "-auto-approve", "-input=false", "-lock=false")
	id := w.output(t, "query_id")
	t.Run("replace", func(t *testing.T) {
		// Terraform shows no warning of the create half of -replace; the planned query id,
		// read from the checkpoint that the replacement keeps, says that the query resumes.
		golden(t, "plan-replace.golden", w.mustPlan("-replace="+address))
		if got := w.planned("query_id", "-replace="+address); got != id {
			t.Errorf("planned query_id = %s, want the checkpoint's %s", got, id)
		}
		before := c.uid(t, "orders")
		w.apply("-replace=" + address)
		if after := c.uid(t, "orders"); after == before {
			t.Errorf("the query kept its UID %s across -replace", before)
		}
	})
	t.Run("tainted", func(t *testing.T) {
		w.tf.Must("taint", "-lock=false", address)
		golden(t, "plan-tainted.golden", w.mustPlan())
		w.apply()
		if out := w.mustPlan(); out != "No changes.\n\n" {
			t.Errorf("plan after replacing the tainted query:\n%s", out)
		}
	})
	t.Run("renamed", func(t *testing.T) {
		renamed := c.query()
		renamed.Name = "orders-renamed"
		w.write(renamed.hcl())
		golden(t, "plan-renamed.golden", w.mustPlan())
		w.apply()
	})
	w.tf.Must("destroy", "-auto-approve", "-input=false", "-lock=false")
}

// uid returns the Kubernetes UID of a query of the test's namespace.
func (c *lockstepCluster) uid(t testing.TB, name string) string {
	t.Helper()
	u, err := c.get(t, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(u.GetUID())
}

// TestPlanReplaceDeletesCheckpoint replaces a tainted query whose checkpoint.retention is Delete: the
// plan says that the delete removes its checkpoint and that the new query starts afresh
// (the webhook's findings against the doomed checkpoint do not apply), and after apply the
// checkpoint is gone.
func TestPlanReplaceDeletesCheckpoint(t *testing.T) {
	c := newLockstepCluster(t)
	w := newWorkspace(t, c)
	q := c.query()
	q.Retention = "Delete"
	w.applyRan(q)

	// Terraform drops the warnings of the create half of -replace (docs/terraform/guides/
	// how-it-works.md); the planned query_id, unknown, is what says that it starts afresh.
	if got := w.planned("query_id", "-replace="+address); got != "(known after apply)" {
		t.Errorf("planned query_id of -replace over a checkpoint that the delete removes = %s, want (known after apply)", got)
	}
	if out := w.mustPlan("-replace=" + address); strings.Contains(out, "Warning") {
		t.Errorf("Terraform now shows the warnings of -replace's create half; say so in how-it-works.md and golden them:\n%s", out)
	}

	// A change the old checkpoint refuses is no refusal when that checkpoint goes first.
	moved := q
	moved.Source = c.path("landing/orders-v2")
	w.write(moved.hcl())
	// With -replace, Terraform first plans it as an update, which does not say that a
	// replacement follows: the checkpoint refuses it there. Tainting is the way (documented).
	if out, err := w.plan("-replace=" + address); err == nil || !strings.Contains(out, "Checkpoint Refuses The Change") {
		t.Errorf("-replace with a change the old checkpoint refuses: %v\n%s\nwant the refusal of the update half, as documented", err, out)
	}
	w.tf.Must("taint", "-lock=false", address)
	golden(t, "plan-replace-delete.golden", w.mustPlan())
	w.apply()
	f, err := c.readCheckpoint(t, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if f.Exists {
		t.Errorf("the checkpoint at %s survived the replacement with retention Delete: %+v", f.Location, f)
	}
}

// TestPlanResumes plans the two changes that resume from a checkpoint instead of starting
// afresh: moving back to a location that holds this query's checkpoint, and creating again a
// query whose predecessor of the same name left its checkpoint (retention Retain). The plan
// says so and plans the query id read from the checkpoint.
func TestPlanResumes(t *testing.T) {
	c := newLockstepCluster(t)
	w := newWorkspace(t, c)
	q := c.query()
	q.Location = c.location("orders")
	w.applyRan(q)
	f, err := c.readCheckpoint(t, "orders")
	if err != nil || !f.Exists {
		t.Fatalf("read the checkpoint written: %+v, %v", f, err)
	}

	away := q
	away.Location = c.location("orders-b")
	w.write(away.hcl())
	golden(t, "plan-move-fresh.golden", w.mustPlan())
	w.apply()

	t.Run("move back", func(t *testing.T) {
		w.write(q.hcl())
		golden(t, "plan-move-back.golden", w.mustPlan())
		w.apply()
		if got := w.output(t, "query_id"); got != f.QueryID {
			t.Errorf("query_id after moving back = %q, want the checkpoint's %q", got, f.QueryID)
		}
	})
	t.Run("recreate over a retained checkpoint", func(t *testing.T) {
		w.tf.Must("destroy", "-auto-approve", "-input=false", "-lock=false")
		golden(t, "plan-recreate-retained.golden", w.mustPlan())
		w.apply()
		if got := w.output(t, "query_id"); got != f.QueryID {
			t.Errorf("query_id after creating the query again = %q, want the checkpoint's %q", got, f.QueryID)
		}
	})
}

// output reads an attribute of the query from Terraform's state.
func (w *workspace) output(t testing.TB, attr string) string {
	t.Helper()
	out := w.tf.Must("show", "-json")
	var state struct {
		Values struct {
			RootModule struct {
				Resources []struct {
					Address string         `json:"address"`
					Values  map[string]any `json:"values"`
				} `json:"resources"`
			} `json:"root_module"`
		} `json:"values"`
	}
	if err := json.Unmarshal([]byte(out), &state); err != nil {
		t.Fatal(err)
	}
	for _, r := range state.Values.RootModule.Resources {
		if r.Address == address {
			s, _ := r.Values[attr].(string)
			return s
		}
	}
	t.Fatalf("no %s in state", address)
	return ""
}

// readCheckpoint reads the checkpoint of a query of the test's namespace at the store's
// location for its name, as the provider's plan reads it.
func (c *lockstepCluster) readCheckpoint(t testing.TB, name string) (checkpointFacts, error) {
	t.Helper()
	cl, err := newCluster(c.cfg, c.namespace, clientLimits{QPS: defaultClientQPS, Burst: defaultClientBurst})
	if err != nil {
		t.Fatal(err)
	}
	return cl.readCheckpoint(context.Background(), c.namespace, c.store, c.location(name))
}

// TestPlanRefusesAnotherConfigurationsQuery plans, in a second configuration, a query that a
// first one wrote: it is not a replacement of this state's query, so the plan refuses it and
// says how to import it.
func TestPlanRefusesAnotherConfigurationsQuery(t *testing.T) {
	c := newLockstepCluster(t)
	first := newWorkspace(t, c)
	first.write(c.query().hcl())
	first.apply()
	second := newWorkspace(t, c)
	second.write(c.query().hcl())
	out, err := second.plan()
	if err == nil {
		t.Fatalf("the second configuration's plan succeeded:\n%s", out)
	}
	golden(t, "plan-other-configuration.golden", out)
}
