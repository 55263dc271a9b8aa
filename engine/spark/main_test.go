package spark_test

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestMain stops the shared services (the Kafka broker) the tests started.
func TestMain(m *testing.M) { testenv.Main(m) }
