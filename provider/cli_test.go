package provider

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/lockstep-dev/lockstep/internal/testenv"
	"github.com/lockstep-dev/lockstep/provider/providertest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// registryAddress is the provider's address, as the examples' required_providers name it
// (source = "lockstep-dev/lockstep").
const registryAddress = "registry.terraform.io/lockstep-dev/lockstep"

// terraformCLI runs the Terraform CLI in a folder against the provider served by this test
// binary (reattached, so init downloads nothing), as a user would run it.
type terraformCLI struct {
	*providertest.CLI
	t testing.TB
}

// newTerraformCLI serves the provider for the test's duration and returns a CLI for dir. The
// provider answers to its own address and to hashicorp/lockstep (what Terraform assumes for
// examples without required_providers); a schema-only stand-in answers to
// hashicorp/kubernetes (see kubernetesStandIn).
func newTerraformCLI(t testing.TB, dir string) *terraformCLI {
	t.Helper()
	bin := testenv.Terraform(t)
	lockstep := providertest.Serve(t, registryAddress, providerserver.NewProtocol6(New("test")()))
	return &terraformCLI{t: t, CLI: providertest.NewCLI(t, bin, dir, map[string]any{
		registryAddress: lockstep,
		"registry.terraform.io/hashicorp/lockstep":   lockstep,
		"registry.terraform.io/hashicorp/kubernetes": providertest.Serve(t, "registry.terraform.io/hashicorp/kubernetes", providerserver.NewProtocol6(kubernetesStandIn{})),
	})}
}

// initMain returns a CLI for a new folder whose main.tf is config, initialized (terraform init).
func initMain(t testing.TB, config string) *terraformCLI {
	t.Helper()
	tf := newTerraformCLI(t, t.TempDir())
	tf.WriteMain(config)
	tf.Must("init", "-input=false")
	return tf
}

// diagnostic is one diagnostic of Terraform's machine-readable output (-json).
type diagnostic struct {
	Severity string `json:"severity"`
	Summary  string `json:"summary"`
	Detail   string `json:"detail"`
	Address  string `json:"address"`
	Range    *struct {
		Filename string `json:"filename"`
		Start    struct {
			Line int `json:"line"`
		} `json:"start"`
	} `json:"range"`
	Snippet *struct {
		Code string `json:"code"`
	} `json:"snippet"`
}

// plan runs terraform plan -json and returns its diagnostics, minus the CLI's own
// (the warning about running with reattached providers), and whether it failed.
func (c *terraformCLI) plan() ([]diagnostic, error) {
	c.t.Helper()
	out, err := c.Run("plan", "-json", "-input=false", "-lock=false")
	_, diags := readPlanJSON(out)
	return diags, err
}

// readPlanJSON reads the output of terraform plan -json: the planned change of each resource
// ("ADDRESS: ACTION (REASON)"), and the diagnostics minus the CLI's own warning about
// running with reattached providers.
func readPlanJSON(out string) (changes []string, diags []diagnostic) {
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Type       string      `json:"type"`
			Diagnostic *diagnostic `json:"diagnostic"`
			Change     *struct {
				Resource struct {
					Addr string `json:"addr"`
				} `json:"resource"`
				Action string `json:"action"`
				Reason string `json:"reason"`
			} `json:"change"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		switch {
		case line.Type == "planned_change" && line.Change != nil:
			c := fmt.Sprintf("%s: %s", line.Change.Resource.Addr, line.Change.Action)
			if line.Change.Reason != "" {
				c += " (" + line.Change.Reason + ")"
			}
			changes = append(changes, c)
		case line.Type == "diagnostic" && line.Diagnostic != nil:
			if line.Diagnostic.Address == "" && strings.Contains(line.Diagnostic.Summary, "Provider development overrides") {
				continue
			}
			diags = append(diags, *line.Diagnostic)
		}
	}
	return changes, diags
}

// render writes diagnostics as a user reads them: severity and summary, where, the detail.
func render(diags []diagnostic, replacer *strings.Replacer) string {
	var b strings.Builder
	for _, d := range diags {
		fmt.Fprintf(&b, "%s: %s\n", strings.ToUpper(d.Severity[:1])+d.Severity[1:], d.Summary)
		if d.Address != "" && d.Range != nil {
			code := ""
			if d.Snippet != nil {
				code, _, _ = strings.Cut(strings.TrimSpace(d.Snippet.Code), "\n")
			}
			fmt.Fprintf(&b, "  with %s, on %s line %d: %s\n", d.Address, d.Range.Filename, d.Range.Start.Line, code)
		}
		fmt.Fprintf(&b, "\n%s\n\n", d.Detail)
	}
	return replacer.Replace(b.String())
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; run go test ./provider -run %s -update", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from what the plan printed; if the new text is right, run go test ./provider -run '%s' -update\n--- got:\n%s", path, t.Name(), got)
	}
}

// TestPlanOutput runs terraform plan as a user would, against the real webhook and a
// checkpoint on S3, and keeps what it says in golden files: a refused change names the
// attribute, the rule, the change and both ways forward; a warned change says what it does;
// a new checkpoint location is planned as a fresh start.
func TestPlanOutput(t *testing.T) {
	c := newLockstepCluster(t)
	w := newWorkspace(t, c)
	q := c.query()
	w.applyRan(q)

	t.Run("refused", func(t *testing.T) {
		moved := q
		moved.Source = c.path("landing/orders-v2")
		w.write(moved.hcl())
		diags, err := w.tf.plan()
		if err == nil {
			t.Fatalf("plan of a refused change succeeded; diagnostics: %+v", diags)
		}
		golden(t, "plan-refused.golden", render(diags, w.names))
	})
	t.Run("warning", func(t *testing.T) {
		console := q
		console.Sink = ""
		w.write(console.hcl())
		diags, err := w.tf.plan()
		if err != nil {
			t.Fatalf("plan of an allowed change failed: %v; diagnostics: %+v", err, diags)
		}
		golden(t, "plan-warning.golden", render(diags, w.names))
	})
	t.Run("fresh start", func(t *testing.T) {
		fresh := q
		fresh.Source = c.path("landing/orders-v2")
		fresh.Location = c.location("orders-v2")
		w.write(fresh.hcl())
		diags, err := w.tf.plan()
		if err != nil {
			t.Fatalf("plan of a fresh start failed: %v; diagnostics: %+v", err, diags)
		}
		golden(t, "plan-fresh-start.golden", render(diags, w.names))
	})
	w.write(q.hcl())
	w.tf.Must("destroy", "-auto-approve", "-input=false", "-lock=false")
}
