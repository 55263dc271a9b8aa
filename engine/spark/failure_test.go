package spark_test

import (
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine/spark"
	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
)

// TestRunnerFailureSaysWhy: a Spark that cannot start (here a setting naming a class that is
// not there) fails the run with Spark's reason, not only the JVM's exit status: the runner
// reports what ended it, whatever it was.
func TestRunnerFailureSaysWhy(t *testing.T) {
	t.Parallel()
	runner := sparktest.Runner(t)
	dir := t.TempDir()
	writeCrashInput(t, filepath.Join(dir, "in"), 1)
	obj := qt.Make("unstartable", "spark").FilesSource("orders", filepath.Join(dir, "in"), v1.FormatJSON, diffColumns...).
		FilesSink(filepath.Join(dir, "out"), v1.FormatJSON).AvailableNow().Checkpoint(filepath.Join(dir, "ck")).
		Edit(func(s *v1.StreamingQuerySpec) {
			s.Runtime.Spark = &v1.SparkRuntime{Conf: map[string]string{"spark.serializer": "com.example.NoSuchSerializer"}}
		}).Obj()
	q, err := spark.New(obj, spark.Options{Runner: runner, LogPath: filepath.Join(dir, "spark.log")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = q.Run(t.Context())
	if err == nil {
		t.Fatal("a Spark that cannot start ran")
	}
	for _, want := range []string{"the Spark query failed: start Spark", "com.example.NoSuchSerializer", filepath.Join(dir, "spark.log")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the run's error %q does not say %q", err, want)
		}
	}
}
