package spark_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kgo"
	"sigs.k8s.io/yaml"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/crashtest"
	"github.com/lockstep-dev/lockstep/engine/spark"
	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// killRandom, as a kill of sparkCrash.kills, SIGKILLs `lockstep run` and its driver JVM
// together at a random instant within 3s of the first batch's progress line.
const killRandom = "random"

// sparkCrash is one scenario of TestSparkDriverKilled.
type sparkCrash struct {
	name string
	// store holds the checkpoint and the output: "local" (a folder), "versitygw", or
	// "proxy" (versitygw behind the S3 fault proxy, failing 2% of requests).
	store string
	// kafka reads the orders from a topic of the real broker, five a batch, instead of
	// five files, one a batch.
	kafka bool
	// sink is what the query writes: "delta" (a Delta table, the default), "postgres" (a
	// PostgreSQL table) or "files" (the files sink's folder).
	sink string
	// kills are the killed runs, in order: LOCKSTEP_CRASH_AT values (the runner kills
	// lockstep run and itself when the batch reaches the phase) or killRandom.
	kills []string
	// query is the query's sources and transforms.
	query func(q *qt.Query) *qt.Query
}

// TestSparkDriverKilled: exactly-once under SIGKILL of the Spark driver. `lockstep run
// --runtime spark` and the driver JVM it started die together (as a pod's death kills both)
// at every phase of a batch — offsets/N written; the sink's data written, not committed;
// the sink committed, commits/N not written; commits/N written, Lockstep's record not —
// and at random instants, each killed run resumed by the next, the last run going to the
// end. The output equals an uninterrupted run's on the built-in engine (which the
// differential tests hold equal to Spark's): no row lost or twice, every Delta version
// readable, one lockstep_batches row per batch. The scenarios: files → Delta append through
// the S3 fault proxy; Kafka (the real broker) → Delta on a local folder; a window
// aggregation in update mode → Delta MERGE on versitygw and → PostgreSQL on a local folder;
// session windows, then windows of the sessions, in append mode → the files sink on a local
// folder; files → the files sink through the S3 fault proxy.
// Delta's own append sink has no hook between its files and its commit, so its sink-commit
// phase is met only by the random kills. It runs beside the package's other long tests
// (t.Parallel): its settings go to the runs it starts, never into this process's environment.
func TestSparkDriverKilled(t *testing.T) {
	t.Parallel()
	runner := sparktest.Runner(t)
	bin, err := crashtest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rng := crashtest.Rand(t, "killing within 3s of the first batch")
	window := []v1.GroupKey{{Window: &v1.Window{Column: "ts", Duration: "10s"}}}
	stateless := func(q *qt.Query) *qt.Query {
		return q.Filter("amount > 1.0").SelectColumns("id", "qty", "amount", "ts")
	}
	// Sessions, then an aggregate over them (chained by window_time on Spark): both
	// operators' state recovers.
	sessions := func(q *qt.Query) *qt.Query {
		return q.Watermark("ts", "5s").
			Aggregate("", []v1.GroupKey{qt.Key("qty"), qt.Session("ts", "8s")}, v1.Aggregation{Name: "n", Function: v1.AggCount}, v1.Aggregation{Name: "total", Function: v1.AggSum, Column: "amount"}).
			Aggregate("", []v1.GroupKey{qt.Window(v1.ColumnWindowEnd, "10s")}, qt.Agg("sessions", v1.AggCount, ""), qt.Agg("rows", v1.AggSum, "n"), qt.Agg("total", v1.AggSum, "total")).
			OutputMode(v1.OutputAppend)
	}
	update := func(q *qt.Query) *qt.Query {
		return q.Watermark("ts", "5s").
			Aggregate("", window, v1.Aggregation{Name: "n", Function: v1.AggCount}, v1.Aggregation{Name: "total", Function: v1.AggSum, Column: "amount"}).
			OutputMode(v1.OutputUpdate)
	}
	scenarios := []sparkCrash{
		{name: "files-to-delta-fault-proxy", store: "proxy", kills: []string{"sink-write:1", killRandom}, query: stateless},
		{name: "kafka-to-delta-local", store: "local", kafka: true, kills: []string{"sink-write:1", "commit:2"}, query: stateless},
		{name: "update-merge-versitygw", store: "versitygw", kills: []string{"offsets:0", "sink-commit:1"}, query: update},
		{name: "update-postgres-local", store: "local", sink: "postgres", kills: []string{"offsets:0", "sink-write:1", "sink-commit:2", "commit:3"}, query: update},
		{name: "sessions-then-windows-files-local", store: "local", sink: "files", kills: []string{"sink-write:1", "commit:2"}, query: sessions},
		// The files sink on S3: Spark's job writes the data files, the Go side creates the
		// manifest entry (a conditional PUT), every request of both through the fault proxy.
		{name: "files-to-files-fault-proxy", store: "proxy", sink: "files", kills: []string{"sink-write:1", "sink-commit:2", killRandom}, query: stateless},
	}
	// Each scenario its own random numbers, drawn from the seed in order: two run at once.
	rngs := make([]*rand.Rand, len(scenarios))
	for i := range rngs {
		rngs[i] = rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	}
	// Two scenarios at a time: a run waits on its JVM's start, its kill and S3 as much as it computes.
	casesAtOnce(t, 2, scenarios, func(tc sparkCrash) string { return tc.name }, func(t *testing.T, i int, tc sparkCrash) {
		rng := rngs[i]
		ctx := context.Background()
		dir := t.TempDir()
		// The runner's kill points are armed by a test-only switch (Crash.java).
		env := []string{spark.EnvRunnerDir + "=" + runner.Dir, "JAVA_HOME=" + filepath.Dir(filepath.Dir(runner.Java)),
			armedHooks()}
		in := filepath.Join(dir, "in")
		var brokers []string
		var topic string
		if tc.kafka {
			brokers, topic = testenv.KafkaTopic(t, "spark-crash")
			produceCrashInput(t, ctx, brokers, topic, 5)
		} else {
			writeCrashInput(t, in, 5)
		}
		src := func(name string) *qt.Query {
			// Two state partitions, as the differential corpus has (diffCases): the keys
			// still spread over more than one, and a stateful batch runs a quarter of the
			// default's tasks and state stores.
			q := qt.Make("crash-"+name, "spark").StatePartitions(2)
			if !tc.kafka {
				return q.FilesSource("orders", in, v1.FormatJSON, diffColumns...).
					EditSource("orders", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = ptr[int32](1) })
			}
			return q.KafkaSource("orders", brokers[0], topic, diffColumns...).EditSource("orders", func(s *v1.Source) {
				s.Kafka.StartingOffsets = v1.OffsetsEarliest
				s.Kafka.MaxOffsetsPerTrigger = ptr[int64](5)
			})
		}

		root, readOpts := dir, []s3.Option(nil)
		var proxy *testenv.S3Proxy
		if tc.store != "local" {
			srv := testenv.S3(t)
			readOpts = srv.Options()
			if tc.store == "proxy" {
				proxy = testenv.NewS3Proxy(t, srv, rng.Uint64())
				proxy.Random(0.02, testenv.SlowDown, testenv.InternalError, testenv.Unavailable, testenv.Reset)
				srv = proxy.Server()
			}
			env = append(env, srv.Env()...)
			root = "s3://" + srv.Bucket
		}
		var sink, ref func(q *qt.Query) *qt.Query
		var (
			refOpts []engine.Option // the reference run's, in this process
			dsn     string
		)
		switch tc.sink {
		case "postgres":
			dsn = testenv.Postgres(t)
			env = append(env, v1.PostgresDSNEnv+"="+dsn)
			refOpts = append(refOpts, engine.WithEnv(func(k string) string {
				if k == v1.PostgresDSNEnv {
					return dsn
				}
				return os.Getenv(k)
			}))
			table := func(name string) func(q *qt.Query) *qt.Query {
				return func(q *qt.Query) *qt.Query {
					return q.Sink(v1.Sink{Postgres: &v1.PostgresSink{Table: name, CreateTable: true, Connection: v1.PostgresConnection{DSNEnv: v1.PostgresDSNEnv}}})
				}
			}
			sink, ref = table("crash_out"), table("crash_ref")
		case "files":
			sink = func(q *qt.Query) *qt.Query { return q.FilesSink(root+"/out", v1.FormatJSON) }
			ref = func(q *qt.Query) *qt.Query { return q.FilesSink(filepath.Join(dir, "ref"), v1.FormatJSON) }
		default:
			sink = func(q *qt.Query) *qt.Query { return q.DeltaSink(root + "/out") }
			ref = func(q *qt.Query) *qt.Query { return q.DeltaSink(filepath.Join(dir, "ref")) }
		}

		file := filepath.Join(dir, "query.yaml")
		obj := sink(tc.query(src("run"))).AvailableNow().Checkpoint(root + "/ck").
			Edit(func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{} }).Obj()
		data, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		run := func(extra ...string) *exec.Cmd {
			cmd := exec.Command(bin, "run", "-f", file)
			// TMPDIR: a killed run leaves its Spark folder (engine/spark's launch) in the test's.
			cmd.Dir, cmd.Env = dir, crashtest.Env(append(env, append(extra, "TMPDIR="+dir)...)...)
			return cmd
		}
		for i, at := range tc.kills {
			if at == killRandom {
				delay := time.Duration(rng.Int64N(int64(3 * time.Second)))
				switch r := crashtest.KillAfter(t, run(), "batch ", delay, sparkRunTimeout); {
				case r.Killed:
					t.Logf("run %d: killed %s after the first batch", i, delay)
				case r.Code == 0:
					t.Logf("run %d: ended before its kill, %s after the first batch", i, delay)
				default:
					t.Fatalf("run %d failed: exit %d\n%s", i, r.Code, r.Stderr)
				}
				continue
			}
			r := crashtest.RunFor(t, run(engine.CrashAtEnv+"="+at), sparkRunTimeout)
			if !r.Killed {
				t.Fatalf("run %d with %s=%s was not killed: exit %d\n%s", i, engine.CrashAtEnv, at, r.Code, r.Stderr)
			}
			t.Logf("run %d: killed at %s", i, at)
		}
		if r := crashtest.RunFor(t, run(), sparkRunTimeout); r.Code != 0 {
			t.Fatalf("the run after the kills failed: exit %d\n%s", r.Code, r.Stderr)
		} else if !strings.Contains(r.Stderr, "resuming") {
			t.Errorf("the run after the kills did not resume:\n%s", r.Stderr)
		}

		if proxy != nil {
			proxy.Clear()
			if n := len(proxy.Faults()); n == 0 {
				t.Errorf("the S3 proxy injected no fault in %d requests", proxy.Requests())
			} else {
				t.Logf("the S3 proxy failed %d of %d requests: %v", n, proxy.Requests(), proxy.Counts())
			}
		}
		refSum := runBuiltin(t, ctx, ref(tc.query(src("ref"))).AvailableNow().Checkpoint(filepath.Join(dir, "ck-ref")).Obj(), refOpts...)
		var want, got []string
		switch tc.sink {
		case "postgres":
			conn := pgConnect(t, ctx, dsn)
			want = pgRows(t, ctx, conn, "SELECT window_start, window_end, n, total FROM crash_ref")
			got = pgRows(t, ctx, conn, "SELECT window_start, window_end, n, total FROM crash_out")
			// One lockstep_batches row per batch: the spark query's batches are the
			// built-in's (the same files, one a batch).
			var batches int64
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM lockstep_batches WHERE query_id <> $1", refSum.QueryID).Scan(&batches); err != nil {
				t.Fatal(err)
			}
			if batches != refSum.LastCommitted+1 {
				t.Errorf("lockstep_batches holds %d rows of the killed query, want %d (one per batch)", batches, refSum.LastCommitted+1)
			}
		default:
			delta := tc.sink != "files"
			want, got = readOutput(t, ctx, filepath.Join(dir, "ref"), delta), readOutput(t, ctx, root+"/out", delta, readOpts...)
		}
		if len(want) == 0 {
			t.Fatal("the uninterrupted run wrote no rows")
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("output after the kills differs from an uninterrupted run's (-uninterrupted +killed):\n%s", diff)
		}
	})
}

// armedHooks is the JAVA_TOOL_OPTIONS entry of a run whose runner's kill points are armed
// (Crash.java's system property), the tests' JVM options kept.
func armedHooks() string {
	return "JAVA_TOOL_OPTIONS=" + strings.TrimSpace(os.Getenv("JAVA_TOOL_OPTIONS")+" -Dlockstep.testHooks=true")
}

// sparkRunTimeout bounds how long a run of `lockstep run --runtime spark` may write nothing
// (crashtest.RunFor): the JVM alone says nothing for minutes while it starts on a busy 2-core
// machine, and a batch took two at a load average of 30.
const sparkRunTimeout = 8 * time.Minute

// crashOrder returns order i of file (or Kafka batch) f: five a file, a file's event times ten
// seconds after the one before.
func crashOrder(f, i int) string {
	ts := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(f*10+i*2) * time.Second)
	return fmt.Sprintf(`{"id":"o%d-%d","qty":%d,"amount":%d.5,"ts":%q}`, f, i, i+1, i, ts.Format(time.RFC3339))
}

// writeCrashInput writes n files of five orders each (crashOrder), oldest first by
// modification time.
func writeCrashInput(t *testing.T, dir string, n int) {
	t.Helper()
	writeOrderFiles(t, dir, time.Now().Add(-time.Hour), 0, n, crashOrder)
}

// writeOrderFiles writes files from to to-1 of five orders each, order(f, i) the i-th line of
// file f (part-<f>.json), file f modified f minutes after base.
func writeOrderFiles(t *testing.T, dir string, base time.Time, from, to int, order func(f, i int) string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for f := from; f < to; f++ {
		var b strings.Builder
		for i := range 5 {
			b.WriteString(order(f, i) + "\n")
		}
		p := filepath.Join(dir, fmt.Sprintf("part-%02d.json", f))
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		mt := base.Add(time.Duration(f) * time.Minute)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
}

// produceCrashInput produces writeCrashInput's orders of n files to topic, in order, to one
// partition.
func produceCrashInput(t *testing.T, ctx context.Context, brokers []string, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for f := range n {
		for i := range 5 {
			recs = append(recs, &kgo.Record{Value: []byte(crashOrder(f, i))})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}
