package provider

import "testing"

// TestPlanLocationRemoved removes an explicit checkpoint.location from the configuration.
// The API server then derives the store's location, so the query moves: the plan shows the
// move and judges it, alone (before, "No changes" while the object stayed on the old
// location) and with another change (before, a refusal at the store's location that the
// plan never explained).
func TestPlanLocationRemoved(t *testing.T) {
	c := newLockstepCluster(t)
	w := newWorkspace(t, c)
	q := c.query() // at the store's location
	w.applyRan(q)

	pinned := q
	pinned.Location = c.location("orders-pinned")
	w.write(pinned.hcl())
	w.apply()

	t.Run("refused at the store's location", func(t *testing.T) {
		// The store's location holds a checkpoint that read another folder.
		moved := q
		moved.Source = c.path("landing/orders-v2")
		w.write(moved.hcl())
		out, err := w.plan()
		if err == nil {
			t.Fatalf("plan succeeded:\n%s", out)
		}
		golden(t, "plan-location-removed-refused.golden", out)
	})
	t.Run("alone", func(t *testing.T) {
		w.write(q.hcl())
		golden(t, "plan-location-removed.golden", w.mustPlan())
		w.apply()
		if got := w.output(t, "checkpoint_location"); got != c.location("orders") {
			t.Errorf("checkpoint_location after apply = %s, want the store's %s", got, c.location("orders"))
		}
		if out := w.mustPlan(); out != "No changes.\n\n" {
			t.Errorf("plan after apply:\n%s", out)
		}
	})
}
