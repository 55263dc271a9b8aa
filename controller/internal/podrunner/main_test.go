package podrunner

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestMain stops the shared control plane when the tests end; without it the
// kube-apiserver and etcd outlive the test binary.
func TestMain(m *testing.M) { testenv.Main(m) }
