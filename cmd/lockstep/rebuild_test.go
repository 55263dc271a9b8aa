package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
)

// TestCheckpointRebuild is the third way forward through the CLI: the engine runs the
// windowed aggregation over three files; swapping its grouping keys is refused, and lockstep
// plan offers the rebuild with what it replays; lockstep checkpoint rebuild --dry-run says
// the same and changes nothing; the rebuild switches the checkpoint to generation 1; the new
// query then runs the next file and its output equals the new query's run from the start;
// describe shows the generation; a second rebuild of the same spec has nothing to do.
func TestCheckpointRebuild(t *testing.T) {
	ref, d, v1, v2 := rebuildRun(t)
	out, code, _ := runPlan(t, testPlanOptions(), "-f", v2, "--checkpoint", d.ck)
	if code != exitRefused || !strings.Contains(out, "Or rebuild the state from the retained input") || !strings.Contains(out, "replays batches 0–") {
		t.Fatalf("lockstep plan = exit %d, want 3 offering the rebuild:\n%s", code, out)
	}
	before := snapshot(t, d.ck)
	stdout, code, err := runCLI(t, "checkpoint", "rebuild", "-f", v2, "--dry-run")
	if code != exitOK || !strings.Contains(stdout, "key-order") || !strings.Contains(stdout, "Dry run: nothing changed.") {
		t.Fatalf("rebuild --dry-run = exit %d (%v):\n%s", code, err, stdout)
	}
	if after := snapshot(t, d.ck); len(after) != len(before) {
		t.Fatalf("the dry run changed the checkpoint: %d objects, then %d", len(before), len(after))
	}
	stdout, code, err = runCLI(t, "checkpoint", "rebuild", "-f", v2)
	if code != exitOK || !strings.Contains(stdout, "Rebuilt: generation 1 is current") {
		t.Fatalf("rebuild = exit %d (%v):\n%s", code, err, stdout)
	}
	if code, err := execute(t, "run", "-f", v1); code != exitRefused {
		t.Errorf("the old query after the rebuild = exit %d (%v), want 3: the checkpoint now holds the new query's state", code, err)
	}
	addFile(t, d.in, 3, statefulFiles[3])
	mustRun(t, "run", "-f", v2)
	// The files written after the rebuild equal the reference's last run's.
	if got, want := newest(t, d.out), newest(t, ref.out); got != want {
		t.Errorf("the new query's output after the rebuild:\n%s\nwant (the uninterrupted run's):\n%s", got, want)
	}
	stdout, _, _ = runCLI(t, "checkpoint", "describe", d.ck)
	if !strings.Contains(stdout, "Generation:") || !strings.Contains(stdout, "key-order") {
		t.Errorf("describe after the rebuild:\n%s", stdout)
	}
	if _, code, err := runCLI(t, "checkpoint", "rebuild", "-f", v2); code != exitRefused || !strings.Contains(err.Error(), "nothing to rebuild") {
		t.Errorf("a second rebuild = exit %d (%v), want 3: nothing to rebuild", code, err)
	}
}

// TestRunRebuildsOnIncompatibleChange: with spec.onIncompatibleChange: rebuild, lockstep plan
// accepts the swapped keys with a warning that says what the rebuild replays, and lockstep
// run rebuilds the state first, then runs on: its output equals the uninterrupted run's.
func TestRunRebuildsOnIncompatibleChange(t *testing.T) {
	ref, d, _, v2 := rebuildRun(t)
	allowRebuild(t, v2)
	out, code, err := runPlan(t, testPlanOptions(), "-f", v2, "--checkpoint", d.ck)
	if code != exitOK || !strings.Contains(out, "Accepted by spec.onIncompatibleChange: rebuild: before it runs on, the query rebuilds its state from the retained input; it replays batches 0–") {
		t.Fatalf("lockstep plan = exit %d (%v), want 0 accepting the change by a rebuild:\n%s", code, err, out)
	}
	addFile(t, d.in, 3, statefulFiles[3])
	var stderr strings.Builder
	cmd := newRootCommand()
	cmd.SetOut(&strings.Builder{})
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"run", "-f", v2})
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("lockstep run with onIncompatibleChange: rebuild: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "rebuild: batch 1/") {
		t.Errorf("lockstep run printed no rebuild progress:\n%s", stderr.String())
	}
	if got, want := newest(t, d.out), newest(t, ref.out); got != want {
		t.Errorf("the output after the rebuild:\n%s\nwant (the uninterrupted run's):\n%s", got, want)
	}
}

// TestRebuildNeedsTheInput: an input file a committed batch read is gone, so lockstep plan
// offers the two old ways only and says which file; with spec.onIncompatibleChange: rebuild
// the change is refused with that reason, and lockstep run changes nothing.
func TestRebuildNeedsTheInput(t *testing.T) {
	root := t.TempDir()
	setup, query := rebuildFixture(t, root)
	d := setup("lost", 3)
	mustRun(t, "run", "-f", query(d, "v1.yaml", false))
	if err := os.Remove(filepath.Join(d.in, "orders-1.json")); err != nil {
		t.Fatal(err)
	}
	v2 := query(d, "v2.yaml", true)
	gone := "Rebuilding the state from the retained input is not possible: source orders no longer holds what batches 0–3 read: the file " + d.in + "/orders-1.json that batch 1 read is gone."
	out, code, _ := runPlan(t, testPlanOptions(), "-f", v2, "--checkpoint", d.ck)
	if code != exitRefused || !strings.Contains(out, gone) || strings.Contains(out, "Or rebuild") {
		t.Fatalf("lockstep plan = exit %d, want 3 saying %q and offering no rebuild:\n%s", code, gone, out)
	}
	allowRebuild(t, v2)
	if out, code, _ := runPlan(t, testPlanOptions(), "-f", v2, "--checkpoint", d.ck); code != exitRefused || !strings.Contains(out, gone) {
		t.Errorf("lockstep plan with onIncompatibleChange: rebuild = exit %d, want 3 saying %q:\n%s", code, gone, out)
	}
	before := snapshot(t, d.ck)
	if code, err := execute(t, "run", "-f", v2); code != exitRefused || !strings.Contains(err.Error(), "orders-1.json that batch 1 read is gone") {
		t.Errorf("lockstep run = exit %d (%v), want 3 naming the lost file", code, err)
	}
	if after := snapshot(t, d.ck); len(after) != len(before) {
		t.Errorf("the refused run changed the checkpoint: %d objects, then %d", len(before), len(after))
	}
}

// rebuildFixture returns setup, which makes folders under root with the first n input
// files, and query, which writes statefulQuery on them (its keys swapped or not) to root/name.
func rebuildFixture(t *testing.T, root string) (func(string, int) queryDirs, func(queryDirs, string, bool) string) {
	files := statefulFiles
	type dirs = queryDirs
	// setup makes an input folder with the first n files, and returns the folders.
	setup := func(name string, n int) dirs {
		return newQueryDirs(t, filepath.Join(root, name), files[:n]...)
	}
	query := func(d dirs, name string, swapped bool) string {
		spec := strings.NewReplacer("%IN%", d.in, "%OUT%", d.out, "%CHECKPOINT%", d.ck).Replace(statefulQuery)
		if swapped {
			spec = strings.Replace(spec, "groupBy: [{column: country}, {window: {column: ts, duration: 5m}}]", "groupBy: [{window: {column: ts, duration: 5m}}, {column: country}]", 1)
		}
		return writeFile(t, filepath.Join(root, name), spec)
	}
	return setup, query
}

// rebuildRun runs the new query uninterrupted (ref), and the old one (v1) over the first
// three files in the folders d; it returns both folders and the specs of the old and the
// new query (v2, its grouping keys swapped) on d.
func rebuildRun(t *testing.T) (ref, d queryDirs, v1, v2 string) {
	t.Helper()
	setup, query := rebuildFixture(t, t.TempDir())
	ref = uninterrupted(t, setup, query)
	d = setup("rebuilt", 3)
	v1 = query(d, "v1.yaml", false)
	mustRun(t, "run", "-f", v1)
	return ref, d, v1, query(d, "v2.yaml", true)
}

// uninterrupted runs the new query from the start: over 3 files, then the 4th.
func uninterrupted(t *testing.T, setup func(string, int) queryDirs, query func(queryDirs, string, bool) string) queryDirs {
	t.Helper()
	ref := setup("ref", 3)
	mustRun(t, "run", "-f", query(ref, "ref.yaml", true))
	addFile(t, ref.in, 3, statefulFiles[3])
	mustRun(t, "run", "-f", query(ref, "ref.yaml", true))
	return ref
}

// allowRebuild adds spec.onIncompatibleChange: rebuild to the query at path.
func allowRebuild(t *testing.T, path string) {
	t.Helper()
	spec, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(spec), "  outputMode: append\n", "  outputMode: append\n  onIncompatibleChange: rebuild\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// queryDirs are the folders of a files → files query: its input, its output and its
// checkpoint.
type queryDirs struct{ in, out, ck string }

// newQueryDirs returns the folders in, out and checkpoint under root, the input folder made
// and holding files, one input file each (addFile).
func newQueryDirs(t *testing.T, root string, files ...string) queryDirs {
	t.Helper()
	d := queryDirs{filepath.Join(root, "in"), filepath.Join(root, "out"), filepath.Join(root, "checkpoint")}
	if err := os.MkdirAll(d.in, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, rows := range files {
		addFile(t, d.in, i, rows)
	}
	return d
}

func addFile(t *testing.T, dir string, i int, rows string) {
	t.Helper()
	name := filepath.Join(dir, fmt.Sprintf("orders-%d.json", i))
	if err := os.WriteFile(name, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC)
	if err := os.Chtimes(name, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func mustRun(t *testing.T, args ...string) {
	t.Helper()
	if code, err := execute(t, args...); code != exitOK {
		t.Fatalf("lockstep %v = exit %d: %v", args, code, err)
	}
}

// runCLI runs lockstep with args and returns its standard output, exit code and error.
func runCLI(t *testing.T, args ...string) (string, int, error) {
	t.Helper()
	return runCobra(newRootCommand(), args...)
}

// newest reads the files sink's data file of the newest batch in dir (part-<query id>-<batch>-<attempt>).
func newest(t *testing.T, dir string) string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dir, "part-*"))
	batch := regexp.MustCompile(`-(\d{20})-`)
	latest, latestBatch := "", ""
	for _, m := range matches {
		if b := batch.FindStringSubmatch(filepath.Base(m)); b != nil && b[1] > latestBatch {
			latest, latestBatch = m, b[1]
		}
	}
	if latest == "" {
		t.Fatalf("no data file in %s", dir)
	}
	t.Logf("%s: batch %s", dir, latestBatch)
	data, err := os.ReadFile(latest)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestCheckpointRebuildSpark is TestCheckpointRebuild's path on the spark runtime: lockstep plan
// offers the rebuild for a Spark query too, lockstep checkpoint rebuild replays it on Spark and
// switches to generation 1, and the new query then runs the next file on Spark. (That the
// output equals an uninterrupted run's is engine/spark's TestSparkRebuildOracle.)
func TestCheckpointRebuildSpark(t *testing.T) {
	sparktest.Runner(t)
	root := t.TempDir()
	setup, query := rebuildFixture(t, root)
	onSpark := func(path string) string {
		spec, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(spec), "  outputMode: append\n", "  outputMode: append\n  runtime: {spark: {}}\n", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	d := setup("rebuilt", 3)
	mustRun(t, "run", "-f", onSpark(query(d, "v1.yaml", false)))
	v2 := onSpark(query(d, "v2.yaml", true))
	out, code, _ := runPlan(t, testPlanOptions(), "-f", v2, "--checkpoint", d.ck)
	if code != exitRefused || !strings.Contains(out, "Or rebuild the state from the retained input") || !strings.Contains(out, "replays batches 0–") {
		t.Fatalf("lockstep plan = exit %d, want 3 offering the rebuild:\n%s", code, out)
	}
	stdout, code, err := runCLI(t, "checkpoint", "rebuild", "-f", v2)
	if code != exitOK || !strings.Contains(stdout, "Rebuilt: generation 1 is current") {
		t.Fatalf("rebuild = exit %d (%v):\n%s", code, err, stdout)
	}
	for _, dir := range []string{"generation-1/offsets", "generation-1/commits", "_lockstep/_generations", "_lockstep/generation-1/commits"} {
		if _, err := os.Stat(filepath.Join(d.ck, dir)); err != nil {
			t.Errorf("after the rebuild: %v", err)
		}
	}
	addFile(t, d.in, 3, statefulFiles[3])
	mustRun(t, "run", "-f", v2)
	// The 4th file's watermark closes fr's window of 00:20, written in the new query's column
	// order (the window first).
	want := `{"window_start":"2026-01-01T00:20:00.000000Z","window_end":"2026-01-01T00:25:00.000000Z","country":"fr","orders":1,"revenue":7.0}`
	if got := newest(t, d.out); strings.TrimSpace(got) != want {
		t.Errorf("the new query's output after the rebuild:\n%s\nwant:\n%s", got, want)
	}
	stdout, _, _ = runCLI(t, "checkpoint", "describe", d.ck)
	if !strings.Contains(stdout, "Generation:") || !strings.Contains(stdout, "key-order") {
		t.Errorf("describe after the rebuild:\n%s", stdout)
	}
}
