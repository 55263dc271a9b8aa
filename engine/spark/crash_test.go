package spark_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine/crashtest"
	"github.com/lockstep-dev/lockstep/engine/spark"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestSparkDriverKilled: exactly-once under SIGKILL of the Spark driver. `lockstep run
// --runtime spark` and the driver JVM it started are killed together (as a pod's death kills
// both) at a random instant after the first batch's progress line, then run again to the
// end: the output equals an uninterrupted run's on the built-in engine (which the
// differential tests hold equal to Spark's), with no row twice and every Delta version
// readable. Files → Delta (append) with checkpoint and table on a local folder; a window
// aggregation in update mode → Delta MERGE with checkpoint and table on versitygw.
func TestSparkDriverKilled(t *testing.T) {
	runner := testenv.SparkRunner(t)
	bin, err := crashtest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rng := crashtest.Rand(t, "killing within 3s of the first batch")
	base := func(name, in string) *qt.Query {
		return qt.Make("crash-"+name, "spark").FilesSource("orders", in, v1.FormatJSON, diffColumns...).
			EditSource("orders", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = ptr[int32](1) })
	}
	window := []v1.GroupKey{{Window: &v1.Window{Column: "ts", Duration: "10s"}}}
	for _, tc := range []struct {
		name  string
		s3    bool
		query func(in string) *qt.Query
	}{
		{"files-to-delta-local", false, func(in string) *qt.Query {
			return base("append", in).Filter("amount > 1.0").SelectColumns("id", "qty", "amount", "ts")
		}},
		{"update-merge-versitygw", true, func(in string) *qt.Query {
			return base("merge", in).Watermark("ts", "5s").
				Aggregate("", window, v1.Aggregation{Name: "n", Function: v1.AggCount}, v1.Aggregation{Name: "total", Function: v1.AggSum, Column: "amount"}).
				OutputMode(v1.OutputUpdate)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			in := filepath.Join(dir, "in")
			writeCrashInput(t, in, 4)
			root := dir
			var (
				env  []string
				opts []s3.Option
			)
			if tc.s3 {
				srv := testenv.S3(t)
				env, opts = srv.Env(), srv.Options()
				for _, kv := range env {
					k, v, _ := strings.Cut(kv, "=")
					t.Setenv(k, v)
				}
				root = "s3://" + srv.Bucket
			}
			out, ck := root+"/out", root+"/ck"
			file := filepath.Join(dir, "query.yaml")
			obj := tc.query(in).DeltaSink(out).AvailableNow().Checkpoint(ck).
				Edit(func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{} }).Obj()
			data, err := yaml.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, data, 0o644); err != nil {
				t.Fatal(err)
			}
			env = append(env, spark.EnvRunnerDir+"="+runner.Dir, "JAVA_HOME="+filepath.Dir(filepath.Dir(runner.Java)))
			run := func() *exec.Cmd {
				cmd := exec.Command(bin, "run", "-f", file)
				cmd.Dir, cmd.Env = dir, crashtest.Env(env...)
				return cmd
			}
			delay := time.Duration(rng.Int64N(int64(3 * time.Second)))
			r := crashtest.KillAfter(t, run(), "batch ", delay, sparkRunTimeout)
			switch {
			case r.Killed:
				t.Logf("killed %s after the first batch:\n%s", delay, r.Stderr)
			case r.Code == 0:
				t.Logf("the run ended before its kill, %s after the first batch", delay)
			default:
				t.Fatalf("the first run failed: exit %d\n%s", r.Code, r.Stderr)
			}
			if r := crashtest.RunFor(t, run(), sparkRunTimeout); r.Code != 0 {
				t.Fatalf("the run after the kill failed: exit %d\n%s", r.Code, r.Stderr)
			} else if !strings.Contains(r.Stderr, "resuming") {
				t.Errorf("the run after the kill did not resume:\n%s", r.Stderr)
			}

			ref := filepath.Join(dir, "ref")
			runBuiltin(t, ctx, tc.query(in).DeltaSink(ref).AvailableNow().Checkpoint(filepath.Join(dir, "ck-ref")).Obj())
			want, got := readOutput(t, ctx, ref, true), readOutput(t, ctx, out, true, opts...)
			if len(want) == 0 {
				t.Fatal("the uninterrupted run wrote no rows")
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("table after the kill differs from an uninterrupted run's (-uninterrupted +killed):\n%s", diff)
			}
		})
	}
}

// sparkRunTimeout bounds a run of `lockstep run --runtime spark`: the JVM alone takes
// half a minute to start on a busy 2-core machine.
const sparkRunTimeout = 8 * time.Minute

// writeCrashInput writes n files of five orders each, a file's event times ten seconds after
// the one before, oldest first by modification time.
func writeCrashInput(t *testing.T, dir string, n int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	mtime := time.Now().Add(-time.Hour)
	for f := range n {
		var b strings.Builder
		for i := range 5 {
			ts := start.Add(time.Duration(f*10+i*2) * time.Second)
			fmt.Fprintf(&b, `{"id":"o%d-%d","qty":%d,"amount":%d.5,"ts":%q}`+"\n", f, i, i+1, i, ts.Format(time.RFC3339))
		}
		p := filepath.Join(dir, fmt.Sprintf("part-%02d.json", f))
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		mt := mtime.Add(time.Duration(f) * time.Minute)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
}
