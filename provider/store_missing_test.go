package provider

import (
	"path/filepath"
	"testing"
)

// TestPlanStoreCreatedInSameApply plans a query whose CheckpointStore does not exist yet, as
// when the same apply creates it: the plan warns instead of failing, and the saved plan
// applies once the store exists (created here between plan and apply, where the apply of a
// platform module would create it before the query).
func TestPlanStoreCreatedInSameApply(t *testing.T) {
	c := newLockstepCluster(t)
	w := newWorkspace(t, c)
	q := c.query()
	q.Store = c.namespace + "-new"
	w.write(q.hcl())
	golden(t, "plan-store-missing.golden", w.mustPlan())

	saved := filepath.Join(t.TempDir(), "plan")
	w.tf.Must("plan", "-input=false", "-lock=false", "-out="+saved)
	c.createStore(t, q.Store, map[string]any{
		"s3":                    map[string]any{"endpoint": c.s3.URL, "bucket": c.s3.Bucket, "region": c.s3.Region},
		"credentialsSecretName": "s3-credentials",
		"allowedNamespaces":     []any{c.namespace},
		"locationTemplate":      "new/{{namespace}}/{{name}}",
	})
	w.tf.Must("apply", "-input=false", "-lock=false", saved)
	want := "s3://" + c.s3.Bucket + "/new/" + c.namespace + "/orders"
	if got := w.output(t, "checkpoint_location"); got != want {
		t.Errorf("checkpoint_location = %q, want the new store's %q", got, want)
	}
	if out := w.mustPlan(); out != "No changes.\n\n" {
		t.Errorf("plan after apply:\n%s", out)
	}
}
