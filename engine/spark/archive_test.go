package spark_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lockstep-dev/lockstep/engine/spark"
	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
)

// TestClassArchiveMaps: testenv made the tools cache's class-data archive, the runner's
// command line names it, and the real java maps it on the runner's classpath — with
// -Xshare:on the JVM refuses to start on an archive it cannot use (another java, another
// classpath, a rebuilt jar), where the default would only warn and start slower.
func TestClassArchiveMaps(t *testing.T) {
	r := sparktest.Runner(t)
	if _, err := os.Stat(filepath.Join(r.Dir, spark.ClassArchive)); err != nil {
		t.Fatalf("no class-data archive beside the runner (the test log says why): %v", err)
	}
	args := r.Command("unused-plan.json", 256<<20, "-Xshare:on").Args
	main := slices.Index(args, "dev.lockstep.spark.Runner")
	if main < 0 {
		t.Fatalf("no main class in %q", args)
	}
	out, err := exec.Command(args[0], append(slices.Clone(args[1:main]), "-version")...).CombinedOutput()
	if err != nil {
		t.Fatalf("java with the runner's options and -Xshare:on: %v\n%s", err, out)
	}
}
