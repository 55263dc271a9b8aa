package provider

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestImportRestoresSettings imports a query whose configuration sets wait_for and timeouts,
// which the Kubernetes object does not hold: the provider recorded them in the query's
// AnnotationSettings when it applied it, so the first plan after terraform import is
// "No changes" (issue 15 #13). A query without the annotation (written by kubectl) is
// imported with the schema's defaults.
func TestImportRestoresSettings(t *testing.T) {
	// No webhook and no controller: fakeController reports Running, which wait_for = running
	// waits for (envtest has no kubelet to run an engine).
	c := &lockstepCluster{testCluster: newTestCluster(t, testenv.ControlPlane(t)), s3: testenv.S3(t)}
	c.fakeController(t, "orders", map[string]any{"phase": "Running", "checkpointLocation": "s3://checkpoints/orders"})
	w := newWorkspace(t, c)
	q := baseQuery()
	q.WaitFor = waitRunning
	q.Extra = `  timeouts = { create = "3m", delete = "2m" }`
	w.write(q.hcl())
	w.apply()
	u, err := c.get(t, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := u.GetAnnotations()[AnnotationSettings], `{"wait_for":"running","timeouts":{"create":"3m","delete":"2m"}}`; got != want {
		t.Errorf("annotation %s = %s, want %s", AnnotationSettings, got, want)
	}

	reimport := func() {
		t.Helper()
		w.tf.must("state", "rm", "-lock=false", address)
		w.tf.must("import", "-input=false", "-lock=false", address, c.namespace+"/orders")
	}
	t.Run("written by terraform", func(t *testing.T) {
		reimport()
		if out := w.mustPlan(); out != "No changes.\n\n" {
			t.Errorf("first plan after import, with wait_for and timeouts in the configuration:\n%s", out)
		}
	})
	t.Run("written by kubectl", func(t *testing.T) {
		c.edit(t, "orders", func(u *unstructured.Unstructured) {
			a := u.GetAnnotations()
			delete(a, AnnotationSettings)
			u.SetAnnotations(a)
		})
		reimport()
		if got := w.output(t, "wait_for"); got != waitNothing {
			t.Errorf("wait_for after importing a query without the annotation = %q, want the default %q", got, waitNothing)
		}
		// The configuration's settings are then a change of the resource only, not of the query.
		if out := w.mustPlan(); !strings.Contains(out, "Change: "+address+": update") {
			t.Errorf("plan after importing a query without the annotation, with wait_for = running:\n%s", out)
		}
		plain := baseQuery()
		w.write(plain.hcl())
		if out := w.mustPlan(); out != "No changes.\n\n" {
			t.Errorf("plan after importing a query without the annotation, with the defaults:\n%s", out)
		}
	})
}
