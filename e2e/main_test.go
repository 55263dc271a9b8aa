//go:build e2e

package e2e

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/testenv"
	"github.com/lockstep-dev/lockstep/provider/providertest"
)

// TestMain stops the node, the S3 server and the brokers after the last test, and undoes
// the node's changes to the host.
func TestMain(m *testing.M) {
	providertest.QuietSDKLogs() // the Terraform tests serve the provider in the test binary
	testenv.Main(m)
}
