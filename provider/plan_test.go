package provider

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// workspace is a Terraform working folder run with the real CLI against a cluster with the
// real webhook and controller: what a user types, and what the plan prints.
type workspace struct {
	t     testing.TB
	c     *lockstepCluster
	dir   string
	tf    *terraformCLI
	names *strings.Replacer
	// providerSettings are more attributes of the provider block, verbatim.
	providerSettings string
}

func newWorkspace(t testing.TB, c *lockstepCluster) *workspace {
	t.Helper()
	dir := t.TempDir()
	return &workspace{t: t, c: c, dir: dir, tf: newTerraformCLI(t, dir),
		names: strings.NewReplacer(c.s3.Bucket, "BUCKET", c.namespace, "NAMESPACE")}
}

// write makes main.tf the provider block and the given resources.
func (w *workspace) write(resources string) {
	w.t.Helper()
	main := fmt.Sprintf(`terraform {
  required_providers {
    lockstep = { source = "lockstep-dev/lockstep" }
  }
}

provider "lockstep" {
  kubeconfig_path = %q
%s}
%s`, w.c.kubeconfig, w.providerSettings, resources)
	w.tf.WriteMain(main)
}

// init runs terraform init once, before the first plan or apply.
func (w *workspace) init() {
	w.t.Helper()
	if _, err := os.Stat(filepath.Join(w.dir, ".terraform.lock.hcl")); err != nil {
		w.tf.Must("init", "-input=false")
	}
}

// apply runs terraform init (once) and apply with args, and fails the test when apply fails.
func (w *workspace) apply(args ...string) string {
	w.t.Helper()
	w.init()
	return w.tf.Must(append([]string{"apply", "-auto-approve", "-input=false", "-lock=false"}, args...)...)
}

// applyRan writes and applies q, then writes the checkpoint the query's engine would have
// left after batch 0 (lockstepCluster.writeCheckpoint): the query as it stands once it ran.
func (w *workspace) applyRan(q queryConfig) {
	w.t.Helper()
	w.write(q.hcl())
	w.apply()
	w.c.writeCheckpoint(w.t, q.Name)
}

// plan runs terraform plan -json with args and renders what it says as a user reads it: the
// planned change of each resource (with Terraform's reason), then the diagnostics.
func (w *workspace) plan(args ...string) (string, error) {
	w.t.Helper()
	w.init()
	out, err := w.tf.Run(append([]string{"plan", "-json", "-input=false", "-lock=false"}, args...)...)
	changes, diags := readPlanJSON(out)
	sort.Strings(changes)
	var b strings.Builder
	for _, c := range changes {
		fmt.Fprintf(&b, "Change: %s\n", c)
	}
	if len(changes) == 0 && err == nil {
		b.WriteString("No changes.\n")
	}
	b.WriteString("\n")
	b.WriteString(render(diags, w.names))
	return scrubIDs(b.String()), err
}

// uuidPattern matches query ids and Kubernetes UIDs, which change from run to run.
var uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

func scrubIDs(s string) string { return uuidPattern.ReplaceAllString(s, "UUID") }

// mustPlan plans and fails the test when the plan fails.
func (w *workspace) mustPlan(args ...string) string {
	w.t.Helper()
	out, err := w.plan(args...)
	if err != nil {
		w.t.Fatalf("plan %v failed: %v\n%s", args, err, out)
	}
	return out
}

// TestPlanWarningsOnePerRule plans a change with warnings of two rules (a source added, the
// sink's guarantee lowered): each has its own summary, so that Terraform's human output shows
// both instead of folding the second into "(and one more similar warning elsewhere)".
func TestPlanWarningsOnePerRule(t *testing.T) {
	c := newLockstepCluster(t)
	w := newWorkspace(t, c)
	q := c.query()
	w.applyRan(q)

	changed := q
	changed.Returns = c.path("landing/returns")
	changed.Sink = ""
	w.write(changed.hcl())
	golden(t, "plan-two-rules.golden", w.mustPlan())
	human, err := w.tf.Run("plan", "-input=false", "-lock=false")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, human)
	}
	if strings.Contains(human, "similar warning") {
		t.Errorf("terraform plan folded warnings:\n%s", human)
	}
	for _, summary := range []string{"Warning: A Source Is Added", "Warning: The Delivery Guarantee Changes"} {
		if !strings.Contains(human, summary) {
			t.Errorf("terraform plan does not show %q:\n%s", summary, human)
		}
	}
}

// planned runs terraform plan -out with args and returns attr of the query's planned new
// value, or "(known after apply)".
func (w *workspace) planned(attr string, args ...string) string {
	w.t.Helper()
	out := filepath.Join(w.t.TempDir(), "plan")
	w.tf.Must(append([]string{"plan", "-input=false", "-lock=false", "-out=" + out}, args...)...)
	var plan struct {
		ResourceChanges []struct {
			Address string `json:"address"`
			Change  struct {
				After        map[string]any `json:"after"`
				AfterUnknown map[string]any `json:"after_unknown"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal([]byte(w.tf.Must("show", "-json", out)), &plan); err != nil {
		w.t.Fatal(err)
	}
	for _, rc := range plan.ResourceChanges {
		if rc.Address != address {
			continue
		}
		if u, _ := rc.Change.AfterUnknown[attr].(bool); u {
			return "(known after apply)"
		}
		return fmt.Sprint(rc.Change.After[attr])
	}
	w.t.Fatalf("the plan has no change of %s", address)
	return ""
}

// TestPlanGuaranteeWeakens plans a sink that lowers the delivery guarantee on a query with
// no checkpoint yet, where no compat finding says it: the plan's own warning does, ranked by
// compat.Weaker, the one ranking the webhook's sink-guarantee rule uses too.
func TestPlanGuaranteeWeakens(t *testing.T) {
	c := newLockstepCluster(t)
	w := newWorkspace(t, c)
	q := c.query()
	w.write(q.hcl())
	w.apply()
	console := q
	console.Sink = ""
	w.write(console.hcl())
	golden(t, "plan-guarantee-weakens.golden", w.mustPlan())
}
