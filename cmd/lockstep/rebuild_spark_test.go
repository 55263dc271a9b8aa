package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
)

// TestRebuildNeedsTheInputSpark is TestRebuildNeedsTheInput on the spark runtime: an input
// file a batch Spark committed read is gone, so lockstep plan says which file and offers the
// two old ways only, lockstep checkpoint rebuild --dry-run refuses with that reason, and with
// spec.onIncompatibleChange: rebuild lockstep run's start guard refuses the change before
// anything is written.
func TestRebuildNeedsTheInputSpark(t *testing.T) {
	sparktest.Runner(t)
	root := t.TempDir()
	setup, query := rebuildFixture(t, root)
	edit := func(path, old, new string) string {
		spec, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(spec), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	onSpark := func(path string) string {
		return edit(path, "  outputMode: append\n", "  outputMode: append\n  runtime: {spark: {}}\n")
	}
	d := setup("lost", 3)
	mustRun(t, "run", "-f", onSpark(query(d, "v1.yaml", false)))
	v2 := onSpark(query(d, "v2.yaml", true))
	if out, code, _ := runPlan(t, testPlanOptions(), "-f", v2, "--checkpoint", d.ck); code != exitRefused || !strings.Contains(out, "Or rebuild the state from the retained input") {
		t.Fatalf("lockstep plan with every file there = exit %d, want 3 offering the rebuild:\n%s", code, out)
	}
	if err := os.Remove(filepath.Join(d.in, "orders-1.json")); err != nil {
		t.Fatal(err)
	}
	lost := "source orders no longer holds what batches 0–"
	file := "the file " + d.in + "/orders-1.json that batch 1 read is gone"
	out, code, _ := runPlan(t, testPlanOptions(), "-f", v2, "--checkpoint", d.ck)
	t.Logf("lockstep plan:\n%s", out)
	if code != exitRefused || !strings.Contains(out, "Rebuilding the state from the retained input is not possible: "+lost) ||
		!strings.Contains(out, file) || strings.Contains(out, "Or rebuild") || strings.Contains(out, "spark runtime does not ask") {
		t.Fatalf("lockstep plan = exit %d, want 3 saying %q, %q and offering no rebuild:\n%s", code, lost, file, out)
	}
	before := snapshot(t, d.ck)
	stdout, code, err := runCLI(t, "checkpoint", "rebuild", "--dry-run", "-f", v2)
	if code != exitRefused || err == nil || !strings.Contains(err.Error(), "rebuild not possible: "+lost) || !strings.Contains(err.Error(), file) {
		t.Errorf("lockstep checkpoint rebuild --dry-run = exit %d (%v), want 3 saying %q and %q:\n%s", code, err, lost, file, stdout)
	}
	edit(v2, "  outputMode: append\n", "  outputMode: append\n  onIncompatibleChange: rebuild\n")
	if code, err := execute(t, "run", "-f", v2); code != exitRefused || err == nil || !strings.Contains(err.Error(), "rebuild cannot answer it: "+lost) || !strings.Contains(err.Error(), file) {
		t.Errorf("lockstep run with onIncompatibleChange: rebuild = exit %d (%v), want 3 naming the lost file", code, err)
	}
	if after := snapshot(t, d.ck); len(after) != len(before) {
		t.Errorf("the refused commands changed the checkpoint: %d objects, then %d", len(before), len(after))
	}
}
