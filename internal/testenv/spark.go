package testenv

import (
	"testing"

	"github.com/lockstep-dev/lockstep/engine/spark"
)

// SparkRunner returns the Spark runner and java that `make tools` (hack/tools.sh spark) built
// into the tool cache, failing the test with that command when they are missing. Each query
// run on it starts one JVM (local[2], a 1 GiB heap by default): keep Spark cases few.
func SparkRunner(t testing.TB) spark.Runner {
	t.Helper()
	r, err := spark.FindRunner()
	if err != nil {
		t.Fatal(err)
	}
	return r
}
