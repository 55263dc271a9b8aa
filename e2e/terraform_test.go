//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/lockstep-dev/lockstep/internal/testenv"
	"github.com/lockstep-dev/lockstep/provider"
	"github.com/lockstep-dev/lockstep/provider/providertest"
)

// terraform runs the Terraform CLI of the tool cache in a folder of its own, against
// Lockstep's provider served by this test binary (reattached: init downloads nothing) and
// pointed at the node's API server, as a platform team would run it.
type terraform struct {
	t      *testing.T
	dir    string
	env    []string
	header string
}

// newTerraform serves the provider until the test ends and writes main.tf: the provider
// block for the node (queries in namespace ns), then resources.
func newTerraform(t *testing.T, kubeconfig, ns string) *terraform {
	t.Helper()
	const address = "registry.terraform.io/lockstep-dev/lockstep"
	info, err := json.Marshal(map[string]any{address: providertest.Serve(t, address, providerserver.NewProtocol6(provider.New("e2e")()))})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rc := filepath.Join(dir, "terraformrc")
	if err := os.WriteFile(rc, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tf := &terraform{t: t, dir: dir, env: append(os.Environ(),
		"TF_REATTACH_PROVIDERS="+string(info), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1",
		"TF_CLI_ARGS=-no-color", "CHECKPOINT_DISABLE=1", "TF_DATA_DIR="+filepath.Join(dir, ".terraform"))}
	tf.header = `terraform {
  required_providers {
    lockstep = { source = "lockstep-dev/lockstep" }
  }
}

provider "lockstep" {
  kubeconfig_path = "` + kubeconfig + `"
  namespace       = "` + ns + `"
}
`
	return tf
}

// write replaces main.tf's resources.
func (tf *terraform) write(resources string) {
	tf.t.Helper()
	if err := os.WriteFile(filepath.Join(tf.dir, "main.tf"), []byte(tf.header+resources), 0o644); err != nil {
		tf.t.Fatal(err)
	}
}

// run runs terraform with args and returns its output and error; it fails the test only when
// terraform cannot start.
func (tf *terraform) run(args ...string) (string, error) {
	tf.t.Helper()
	cmd := exec.Command(testenv.Terraform(tf.t), args...)
	cmd.Dir, cmd.Env = tf.dir, tf.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if exit := (*exec.ExitError)(nil); err != nil && !errors.As(err, &exit) {
		tf.t.Fatalf("terraform %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), err
}

// must runs terraform and fails the test when it fails.
func (tf *terraform) must(args ...string) string {
	tf.t.Helper()
	out, err := tf.run(args...)
	if err != nil {
		tf.t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}
