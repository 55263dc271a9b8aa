//go:build e2e

package e2e

import (
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lockstep-dev/lockstep/internal/testenv"
	"github.com/lockstep-dev/lockstep/provider/providertest"
)

// TestMain stops the node, the S3 server and the brokers after the last test, and undoes
// the node's changes to the host.
func TestMain(m *testing.M) {
	providertest.QuietSDKLogs() // the Terraform tests serve the provider in the test binary
	// The tests' own controller-runtime clients log nothing: without a logger, controller-runtime
	// prints a goroutine's stack ("log.SetLogger(...) was never called") into the suite's output.
	ctrllog.SetLogger(logr.Discard())
	testenv.Main(m)
}
