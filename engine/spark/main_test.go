package spark_test

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestMain stops the shared services (the Kafka broker) the tests started.
//
// The long Spark tests that set no environment variable (t.Setenv) call t.Parallel: after the
// others, they run two at a time (-parallel, GOMAXPROCS), a JVM each, so that this package,
// the suite's longest, does not end a run alone on one core.
func TestMain(m *testing.M) { testenv.Main(m) }
