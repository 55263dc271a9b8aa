package provider

import (
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

	t.Run("replace", func(t *testing.T) {
		golden(t, "plan-replace.golden", w.mustPlan("-replace="+address))
		before := c.uid(t, "orders")
		w.apply("-replace=" + address)
		if after := c.uid(t, "orders"); after == before {
			t.Errorf("the query kept its UID %s across -replace", before)
		}
	})
	t.Run("tainted", func(t *testing.T) {
		w.tf.must("taint", "-lock=false", address)
		golden(t, "plan-tainted.golden", w.mustPlan())
		w.apply()
		if out := w.mustPlan(); out != "No changes.\n\n" {
			t.Errorf("plan after replacing the tainted query:\n%s", out)
		}
	})
	w.tf.must("destroy", "-auto-approve", "-input=false", "-lock=false")
}

// uid returns the Kubernetes UID of a query of the test's namespace.
func (c *lockstepCluster) uid(t *testing.T, name string) string {
	t.Helper()
	u, err := c.get(t, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(u.GetUID())
}
