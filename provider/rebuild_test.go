package provider

import (
	"strings"
	"testing"
)

// TestPlanRebuild: through the real Terraform CLI and the real webhook, a change only the
// state stands in the way of (more state partitions) is refused with the third way forward
// and its cost; with on_incompatible_change = "rebuild" the plan accepts it, warning on the
// changed attribute what the rebuild replays.
func TestPlanRebuild(t *testing.T) {
	c := newLockstepCluster(t)
	w := newWorkspace(t, c)
	q := c.query()
	q.Extra = "state_store = { partitions = 8 }"
	w.applyRan(q)

	changed := q
	changed.Extra = "state_store = { partitions = 16 }"
	w.write(changed.hcl())
	out, err := w.plan()
	if err == nil || !strings.Contains(out, "state-partitions") || !strings.Contains(out, "Or rebuild the state from the retained input") || !strings.Contains(out, "replays batches 0–0 (") {
		t.Fatalf("plan of other state partitions: %v, want a refusal offering the rebuild:\n%s", err, out)
	}
	changed.Extra += "\n  on_incompatible_change = \"rebuild\""
	w.write(changed.hcl())
	out = w.mustPlan()
	if !strings.Contains(out, "Accepted by on_incompatible_change: rebuild: before it runs on, the query rebuilds its state from the retained input; it replays batches 0–0 (") ||
		!strings.Contains(out, "Attribute: state_store.partitions") {
		t.Errorf("plan with on_incompatible_change = rebuild: want a warning on state_store saying what the rebuild replays:\n%s", out)
	}
}
