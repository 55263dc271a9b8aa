package providertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// CLI runs the Terraform CLI in a folder against providers served by the test binary
// (Serve), reattached so that init downloads nothing, as a user would run it.
type CLI struct {
	// Dir is the folder terraform runs in, Env its environment; a test may add variables
	// (TF_VAR_…) to Env before it runs terraform.
	Dir string
	Env []string

	t   testing.TB
	bin string
}

// NewCLI returns a CLI that runs the terraform at bin in dir, reattached to providers (each
// address with its entry from Serve). The CLI's configuration file and data folder are in a
// folder of the test's own, so that dir holds only what the test writes there.
func NewCLI(t testing.TB, bin, dir string, providers map[string]any) *CLI {
	t.Helper()
	info, err := json.Marshal(providers)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	rc := filepath.Join(home, "terraformrc")
	if err := os.WriteFile(rc, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"TF_REATTACH_PROVIDERS="+string(info),
		"TF_CLI_CONFIG_FILE="+rc,
		"TF_IN_AUTOMATION=1",
		"TF_CLI_ARGS=-no-color",
		"CHECKPOINT_DISABLE=1",
		"TF_DATA_DIR="+filepath.Join(home, ".terraform"),
	)
	return &CLI{Dir: dir, Env: env, t: t, bin: bin}
}

// WriteMain replaces the folder's main.tf with config.
func (c *CLI) WriteMain(config string) {
	c.t.Helper()
	if err := os.WriteFile(filepath.Join(c.Dir, "main.tf"), []byte(config), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// Run runs terraform with args; it returns the output and the error, and fails the test only
// when terraform cannot start.
func (c *CLI) Run(args ...string) (string, error) {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Dir, cmd.Env = c.Dir, c.Env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		c.t.Fatalf("terraform %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), err
}

// Must runs terraform and fails the test when it fails.
func (c *CLI) Must(args ...string) string {
	c.t.Helper()
	out, err := c.Run(args...)
	if err != nil {
		c.t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}
