package provider

import (
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// The smaller faults of issue 15 #13, each as the user saw it in Terraform's output.

// TestPlanControllerDown plans against an API server whose admission webhook does not answer
// (the controller is down): the error says so and what to check, not "Invalid Streaming Query: :".
func TestPlanControllerDown(t *testing.T) {
	wh := testenv.ControlPlaneWithWebhooks(t) // no controller serves its webhooks
	c := &lockstepCluster{testCluster: newTestCluster(t, wh.Config), s3: testenv.S3(t)}
	c.store = c.namespace
	w := newWorkspace(t, c)
	w.write(c.query().hcl())
	out, err := w.plan()
	if err == nil {
		t.Fatalf("plan succeeded with the webhook down:\n%s", out)
	}
	out = regexpScrub(out)
	golden(t, "plan-controller-down.golden", out)
}

// regexpScrub replaces the webhook's loopback address, which changes from run to run.
func regexpScrub(s string) string {
	return loopback.ReplaceAllString(s, "ADDRESS")
}

// TestPlanFreshRuleLead plans a new query that a rule judging the spec alone warns about (a
// dropDuplicates that no watermark evicts): the warning does not claim a comparison with an
// existing checkpoint, nor print "(absent) → (absent)".
func TestPlanFreshRuleLead(t *testing.T) {
	c := newLockstepCluster(t)
	w := newWorkspace(t, c)
	q := c.query()
	q.Transform = `[{ drop_duplicates = { columns = ["order_id"] } }]`
	w.write(q.hcl())
	golden(t, "plan-fresh-rule.golden", w.mustPlan())
}

// TestApplyDoesNotRepeatWarnings applies a change with a warning: terraform apply shows the
// plan's warning once, not again from the apply.
func TestApplyDoesNotRepeatWarnings(t *testing.T) {
	c := newLockstepCluster(t)
	w := newWorkspace(t, c)
	q := c.query()
	w.applyRan(q)
	console := q
	console.Sink = ""
	w.write(console.hcl())
	out := w.apply()
	if n := strings.Count(out, "Warning: The Delivery Guarantee Changes"); n != 1 {
		t.Errorf("apply shows the warning %d times, want once:\n%s", n, out)
	}
}

// TestPlanNestedValidatorPoints plans a sink with two kinds: the error points at the sink
// attribute (Terraform can point at no deeper path) and names the full path.
func TestPlanNestedValidatorPoints(t *testing.T) {
	c := newLockstepCluster(t)
	w := newWorkspace(t, c)
	q := c.query()
	q.Sink = ""
	q.Extra = "" // the sink line is the template's; add a second kind to it
	hcl := strings.Replace(q.hcl(), "sink    = { console = {} }", `sink    = { console = {}, files = { path = "s3://b/out/" } }`, 1)
	w.write(hcl)
	out, err := w.plan()
	if err == nil {
		t.Fatalf("plan of a sink with two kinds succeeded:\n%s", out)
	}
	golden(t, "plan-nested-validator.golden", out)
}

// TestDestroyTimeoutSaysWhy destroys a query whose finalizer nobody removes (no controller):
// the error says what it waited for, not "client rate limiter Wait returned an error".
func TestDestroyTimeoutSaysWhy(t *testing.T) {
	c := newTestCluster(t, testenv.ControlPlane(t))
	q := baseQuery()
	q.Extra = `  timeouts = { delete = "1s" }`
	tf := initMain(t, c.provider()+q.hcl())
	tf.Must("apply", "-auto-approve", "-input=false")
	c.edit(t, "orders", func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"test.lockstep.dev/hold"}) })
	t.Cleanup(func() { c.edit(t, "orders", func(u *unstructured.Unstructured) { u.SetFinalizers(nil) }) })
	out, err := tf.Run("destroy", "-auto-approve", "-input=false")
	if err == nil {
		t.Fatalf("destroy succeeded while a finalizer holds the query:\n%s", out)
	}
	flat := strings.Join(strings.Fields(out), " ")
	if strings.Contains(flat, "rate limiter") || !strings.Contains(flat, "finalizer waits for the controller") {
		t.Errorf("destroy error does not say what it waited for:\n%s", out)
	}
}

var loopback = regexp.MustCompile(`127\.0\.0\.1:\d+`)
