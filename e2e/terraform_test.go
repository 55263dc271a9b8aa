//go:build e2e

package e2e

import (
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
	*providertest.CLI
	t      *testing.T
	header string
}

// newTerraform serves the provider until the test ends and writes main.tf: the provider
// block for the node (queries in namespace ns), then resources.
func newTerraform(t *testing.T, kubeconfig, ns string) *terraform {
	t.Helper()
	const address = "registry.terraform.io/lockstep-dev/lockstep"
	server := providertest.Serve(t, address, providerserver.NewProtocol6(provider.New("e2e")()))
	tf := &terraform{t: t, CLI: providertest.NewCLI(t, testenv.Terraform(t), t.TempDir(), map[string]any{address: server})}
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
	tf.WriteMain(tf.header + resources)
}
