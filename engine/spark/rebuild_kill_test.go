package spark_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/checkpoint/storetest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/crashtest"
	"github.com/lockstep-dev/lockstep/engine/sink"
	"github.com/lockstep-dev/lockstep/engine/spark"
	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestSparkRebuildKills: sparkRebuildKills with the checkpoint and the output in a folder.
func TestSparkRebuildKills(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sparkRebuildKills(t, dir, dir, nil, func() checkpoint.Store {
		st, err := checkpoint.OpenDir(filepath.Join(dir, "ck"))
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

// TestSparkRebuildKillsS3: sparkRebuildKills with the checkpoint and the output on versitygw
// behind the S3 fault proxy, which fails 2% of the requests (503 SlowDown, 500, 503, a reset)
// of the runner's S3A and of Lockstep's own client alike; the test reads past the proxy.
func TestSparkRebuildKillsS3(t *testing.T) {
	t.Parallel()
	srv := testenv.S3(t)
	proxy := testenv.NewS3Proxy(t, srv, uint64(time.Now().UnixNano()))
	proxy.Random(0.02, testenv.SlowDown, testenv.InternalError, testenv.Unavailable, testenv.Reset)
	sparkRebuildKills(t, t.TempDir(), "s3://"+srv.Bucket+"/rebuild", proxy.Server().Env(), func() checkpoint.Store {
		st, err := s3.Open(context.Background(), srv.Bucket, "rebuild/ck", srv.Options()...)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}, srv.Options()...)
	proxy.Clear()
	if n := len(proxy.Faults()); n == 0 {
		t.Errorf("the S3 proxy injected no fault in %d requests", proxy.Requests())
	} else {
		t.Logf("the S3 proxy failed %d of %d requests: %v", n, proxy.Requests(), proxy.Counts())
	}
}

// rebuildKillFiles is how many input files the old query reads, one a batch (batches 0–6,
// which the rebuild replays); the new query then reads two more (batches 7–8).
const rebuildKillFiles = 7

// sparkRebuildKills: SIGKILL at every phase of a rebuild on Spark and at random instants.
// The old query, a count and sum per qty (update mode, into the files sink), runs batches 0–6
// on Spark with its checkpoint at root/ck; two files are added; then the new query, per
// amount, which the checkpoint refuses but spec.onIncompatibleChange: rebuild answers, is run
// by `lockstep run` killed (it and the runner's JVM, as a pod's death) at each phase of the
// rebuild's batches 0 and 3 — offsets/N of the new generation written; the runner answered
// batch N, Lockstep's record of it not written — then twice at a random instant within 3s
// of a rebuilt batch and once within 3s of batch 7 (after the switch, in batch 8 or as the
// run ends), each run retrying on the same checkpoint what the one before left; the last
// run finishes what is left of the rebuild, the switch and batches 7–8. After every kill the old
// generation (Spark's files and Lockstep's records) is byte-identical to before the rebuild
// (but for the seal the rebuild adds to its records before the switch) and, but after a
// random kill past the switch, still current. The output, which the new
// query writes after the switch only, equals what an uninterrupted run of the new query
// (on the built-in engine, which the differential tests hold equal to Spark) writes for
// batches 7–8: nothing lost or written twice. dir is a local folder for the input, the
// reference run and the Spark logs; env is the S3 settings of the runs, readOpts those of
// the test's reads of the output; store opens root/ck past any proxy.
func sparkRebuildKills(t *testing.T, dir, root string, env []string, store func() checkpoint.Store, readOpts ...s3.Option) {
	runner := sparktest.Runner(t)
	ctx := context.Background()
	bin, err := crashtest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rng := crashtest.Rand(t, "killing within 3s of a progress line")
	in := filepath.Join(dir, "in")
	base := time.Now().Add(-time.Hour)
	writeRebuildKillInput(t, in, base, 0, rebuildKillFiles)

	query := func(key, out string) *qt.Query {
		// Two state partitions, as in TestSparkDriverKilled.
		return qt.Make("rebuild-kill", "spark").StatePartitions(2).FilesSource("orders", in, v1.FormatJSON, diffColumns...).
			EditSource("orders", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = ptr[int32](1) }).
			Aggregate("", []v1.GroupKey{qt.Key(key)}, qt.Agg("n", v1.AggCount, ""), qt.Agg("total", v1.AggSum, "amount")).
			OutputMode(v1.OutputUpdate).FilesSink(out, v1.FormatJSON).AvailableNow()
	}
	onSpark := func(q *qt.Query) *v1.StreamingQuery {
		return q.Checkpoint(root + "/ck").Edit(func(s *v1.StreamingQuerySpec) {
			s.Runtime.Spark = &v1.SparkRuntime{Conf: map[string]string{"spark.sql.streaming.noDataMicroBatches.enabled": "false"}}
			s.OnIncompatibleChange = v1.OnIncompatibleRebuild
		}).Obj()
	}
	manifest := func(name string, obj *v1.StreamingQuery) string {
		data, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return file
	}
	// One output folder: a files sink that moves is a change of its own (files-sink-path).
	oldFile := manifest("old", onSpark(query("qty", root+"/out")))
	newFile := manifest("new", onSpark(query("amount", root+"/out")))
	// The runner's own kill points armed (Crash.java), as in TestSparkDriverKilled: a
	// rebuild's must still fire once, on the Go side.
	runEnv := append([]string{spark.EnvRunnerDir + "=" + runner.Dir, "JAVA_HOME=" + filepath.Dir(filepath.Dir(runner.Java)),
		armedHooks(),
		// TMPDIR: a killed run leaves its Spark folder (engine/spark's launch), and a run on S3
		// its driver's log, in the test's folder.
		"TMPDIR=" + dir}, env...)
	run := func(file string, extra ...string) *exec.Cmd {
		cmd := exec.Command(bin, "run", "-f", file)
		cmd.Dir, cmd.Env = dir, crashtest.Env(append(slices.Clone(runEnv), extra...)...)
		return cmd
	}
	// runOnce runs cmd again while a fault of the proxy failed a run (exit 1), at most 3 times.
	runOnce := func(what string, cmd func() *exec.Cmd) crashtest.Result {
		var r crashtest.Result
		for range 3 {
			if r = crashtest.RunFor(t, cmd(), sparkRunTimeout); r.Code != 1 || env == nil {
				break
			}
			t.Logf("%s failed (a fault of the proxy?), again:\n%s", what, tail(r.Stderr, 2000))
		}
		return r
	}
	if r := runOnce("the old query", func() *exec.Cmd { return run(oldFile) }); r.Code != 0 {
		t.Fatalf("the old query: exit %d\n%s", r.Code, r.Stderr)
	}

	writeRebuildKillInput(t, in, base, rebuildKillFiles, rebuildKillFiles+2)
	// The reference: the new query on the built-in engine over all the files, uninterrupted.
	refOut := filepath.Join(dir, "ref-out")
	runBuiltin(t, ctx, query("amount", refOut).Checkpoint(filepath.Join(dir, "ref-ck")).Obj())
	want := readFilesAfter(t, ctx, refOut, rebuildKillFiles-1)
	if len(want) == 0 {
		t.Fatal("the uninterrupted run wrote nothing for batches 7–8")
	}

	before := storetest.Objects(t, store(), oldGeneration)
	records := func() checkpoint.Store { return checkpoint.Sub(store(), spark.RecordsDir+"/") }
	// The seal the rebuild adds to the old generation's records before the switch: batch 7's
	// offsets entry, which fences off an engine still running there.
	seal := spark.RecordsDir + "/" + checkpoint.OffsetsKey(rebuildKillFiles)
	// checkOld checks the old generation after a kill: unchanged but for the seal when sealed
	// may be; current is the generation that may be current then.
	checkOld := func(what string, sealed bool, current ...int64) {
		t.Helper()
		after := storetest.Objects(t, store(), oldGeneration)
		_, sealedNow := after[seal]
		if sealedNow && sealed {
			if !strings.Contains(after[seal], checkpoint.ConfSealed) {
				t.Fatalf("%s: %s is not a seal: %s", what, seal, after[seal])
			}
			delete(after, seal)
		}
		if diff := cmp.Diff(before, after); diff != "" {
			t.Fatalf("%s: the rebuild changed the old generation (-before +after):\n%s", what, diff)
		}
		g, err := checkpoint.CurrentGeneration(ctx, records())
		if err != nil || !slices.Contains(current, g.Number) {
			t.Fatalf("%s: current generation = %+v, %v; want one of %v", what, g, err, current)
		}
		t.Logf("%s: the old generation is unchanged; generation %d is current (sealed: %t)", what, g.Number, sealedNow)
	}

	for _, at := range []string{"offsets:0", "commit:0", "offsets:3", "commit:3"} {
		r := runOnce("the run killed at "+at, func() *exec.Cmd { return run(newFile, engine.CrashAtEnv+"="+at) })
		if !r.Killed {
			t.Fatalf("the rebuild with %s=%s was not killed: exit %d\n%s", engine.CrashAtEnv, at, r.Code, r.Stderr)
		}
		checkOld("killed at "+at, false, 0)
	}
	// The kills were the Go side's: the runner's own kill point (Crash.java) says so in the
	// driver's log when it fires, and a rebuild's runner has none (the noop sink, no listener).
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		if data, _ := os.ReadFile(l); strings.Contains(string(data), "killing lockstep run and the runner") {
			t.Errorf("the runner's own kill point fired in a rebuild (%s):\n%s", l, tail(string(data), 2000))
		}
	}

	// Twice within 3s of a rebuilt batch, then within 3s of batch 7 — the new query's first
	// after the switch — so that a kill meets the files sink in batch 8 too.
	killed := 0
	for i, after := range []string{"rebuild: batch ", "rebuild: batch ", fmt.Sprintf("batch %d: ", rebuildKillFiles)} {
		delay := time.Duration(rng.Int64N(int64(3 * time.Second)))
		r := crashtest.KillAfter(t, run(newFile), after, delay, sparkRunTimeout)
		switch {
		case r.Killed:
			killed++
			checkOld(fmt.Sprintf("random kill %d", i), true, 0, 1)
			t.Logf("random run %d: killed %s after a line %q", i, delay, after)
		case r.Code == 0:
			t.Logf("random run %d: ended before its kill, %s after a line %q", i, delay, after)
		case r.Code == 1 && env != nil:
			t.Logf("random run %d failed (a fault of the proxy?):\n%s", i, tail(r.Stderr, 2000))
		default:
			t.Fatalf("random run %d: exit %d\n%s", i, r.Code, r.Stderr)
		}
	}
	if killed == 0 {
		t.Error("no run was killed at a random instant")
	}

	if r := runOnce("the last run", func() *exec.Cmd { return run(newFile) }); r.Code != 0 {
		t.Fatalf("the run after the kills: exit %d\n%s", r.Code, r.Stderr)
	}
	checkOld("after the last run", true, 1)
	if g, err := checkpoint.CurrentGeneration(ctx, records()); err != nil || g.Batches != rebuildKillFiles {
		t.Errorf("current generation after the rebuild = %+v, %v; want one of %d batches", g, err, rebuildKillFiles)
	}
	if p, err := checkpoint.ReadRebuildProgress(ctx, records(), checkpoint.Generation{Number: 1}); err != nil || p != nil {
		t.Errorf("rebuild progress after the switch = %+v, %v; want none", p, err)
	}
	got := readFilesAfter(t, ctx, root+"/out", rebuildKillFiles-1, readOpts...)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("output after the killed rebuilds differs from an uninterrupted run's batches 7–8 (-uninterrupted +killed):\n%s", diff)
	}
}

// writeRebuildKillInput writes files from to to-1 of sparkRebuildKills' input (writeOrderFiles):
// crashOrder's orders with the amounts 0.5–2.5 spread over the files, so that a count per
// amount gathers rows of every batch.
func writeRebuildKillInput(t *testing.T, dir string, base time.Time, from, to int) {
	t.Helper()
	writeOrderFiles(t, dir, base, from, to, func(f, i int) string {
		ts := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(f*10+i*2) * time.Second)
		return fmt.Sprintf(`{"id":"o%d-%d","qty":%d,"amount":%d.5,"ts":%q}`, f, i, i+1, (f+i)%3, ts.Format(time.RFC3339))
	})
}

// readFilesAfter reads the rows the batches after batch n wrote to the files sink's folder at
// dir, as readOutput formats them, sorted.
func readFilesAfter(t *testing.T, ctx context.Context, dir string, n int64, opts ...s3.Option) []string {
	t.Helper()
	folder, err := s3.OpenFolder(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := sink.ReadManifest(ctx, folder)
	if err != nil {
		t.Fatalf("read the manifest of %s: %v", dir, err)
	}
	ms = slices.DeleteFunc(ms, func(m sink.Manifest) bool { return m.BatchID <= n })
	cols, rows, err := sink.ManifestRows(ctx, folder, ms)
	if err != nil {
		t.Fatalf("read the batches after %d in %s: %v", n, dir, err)
	}
	return formatRows(cols, rows)
}
