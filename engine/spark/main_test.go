package spark_test

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestMain stops the shared services (the Kafka broker) the tests started, and the oracle's
// JVM, the Spark application the differential corpora and the planner's oracle share.
//
// The long Spark tests that set no environment variable (t.Setenv) call t.Parallel: after the
// others, they run two at a time (-parallel, GOMAXPROCS), a JVM each or their plans side by
// side in the oracle's, so that this package, the suite's longest, does not end a run alone on
// one core.
func TestMain(m *testing.M) { testenv.Main(thenStopOracle{m}) }

// thenStopOracle runs the tests, then stops the oracle's JVM if one of them started it.
type thenStopOracle struct{ m *testing.M }

func (r thenStopOracle) Run() int {
	code := r.m.Run()
	stopOracle()
	return code
}
