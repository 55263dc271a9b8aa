package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestRunSpark: `lockstep run --runtime spark` runs a query file written for the built-in
// engine on Spark with the same progress lines and exit codes; the checkpoint then refuses
// the built-in engine (exit 3) and `lockstep plan` names the runtime rule, and a second
// Spark run resumes after the committed batch.
func TestRunSpark(t *testing.T) {
	testenv.SparkRunner(t)
	f := newRunFixture(t, goodOrders)
	ckpt := filepath.Join(f.dir, "ckpt")
	spec := f.spec(t, "orders", "fail")
	_, stderr, code := runCommand(t, "run", "--runtime", "spark", "-f", spec, "--checkpoint", ckpt)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	for _, want := range []string{
		"lockstep: runtime spark: the Spark driver's log is " + filepath.Join(f.dir, "spark-orders.log"),
		"lockstep: query shop/orders, id ",
		"lockstep: new checkpoint; starting at batch 0",
		"lockstep: delivery guarantee: exactly-once",
		"batch 0: 3 rows in, 2 out, ",
		"lockstep: done: 1 batches, 3 rows in, 2 out, 0 malformed in ",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("output lacks %q:\n%s", want, stderr)
		}
	}

	_, stderr, code = runCommand(t, "run", "--runtime", "lockstep", "-f", spec, "--checkpoint", ckpt)
	if code != exitRefused || !strings.Contains(stderr, "written by the spark runtime") {
		t.Errorf("--runtime lockstep on a Spark checkpoint: exit %d, want %d:\n%s", code, exitRefused, stderr)
	}
	stdout, stderr, code := runCommand(t, "plan", "-f", spec, "--checkpoint", ckpt)
	if code != exitRefused || !strings.Contains(stdout, "✗ runtime spec.runtime") {
		t.Errorf("plan of the built-in engine on a Spark checkpoint: exit %d, want %d:\n%s%s", code, exitRefused, stdout, stderr)
	}

	if stdout, stderr, code := runCommand(t, "plan", "--runtime", "spark", "-f", spec, "--checkpoint", ckpt); code != exitOK {
		t.Errorf("plan --runtime spark of the same query: exit %d, want %d:\n%s%s", code, exitOK, stdout, stderr)
	}

	_, stderr, code = runCommand(t, "run", "--runtime", "spark", "-f", spec, "--checkpoint", ckpt)
	if code != exitOK || !strings.Contains(stderr, "lockstep: resuming from batch 1 (batches up to 0 are committed)") {
		t.Errorf("second run: exit %d:\n%s", code, stderr)
	}
	if _, stderr, code := runCommand(t, "run", "--runtime", "flink", "-f", spec); code != exitInvalid {
		t.Errorf("--runtime flink: exit %d, want %d:\n%s", code, exitInvalid, stderr)
	}
}
