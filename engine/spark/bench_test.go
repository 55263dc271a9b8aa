package spark_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/codec"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/engine/sink"
	"github.com/lockstep-dev/lockstep/engine/spark"
	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

var benchEvents = flag.Int64("runtimes.events", 1_000_000, "Nexmark events BenchmarkRuntimes writes as Parquet (bids, auctions, people) and runs through each query on each runtime")

// benchFiles is how many Parquet files each table is written in: a query reads one a batch.
const benchFiles = 10

// BenchmarkRuntimes runs Nexmark's queries (enginetest.NexmarkLists, but q7, which is q5's
// shape) over the same Parquet tables (the nexmark source's bids, auctions and people, written
// once by the built-in engine; each of a query's nexmark sources becomes a files source of its
// table) into a Parquet files sink, on the built-in engine and on Spark local[2], side by side in
// one run: events per CPU-second (this process's CPU and its children's, so the Spark driver
// JVM's too), the Spark figure as a ratio of the built-in's, and the time from a restart to its
// first committed batch (one more file of the first source after the run: a process start, the
// checkpoint read, one batch).
func BenchmarkRuntimes(b *testing.B) {
	runner := sparktest.Runner(b)
	// Spark as users run it: the JVM's defaults, not the tests' short-run options (C1 alone,
	// serial GC) that testenv.Main sets.
	b.Setenv("JAVA_TOOL_OPTIONS", "")
	ctx := context.Background()
	events := *benchEvents
	tables := map[v1.NexmarkTable][]string{}
	for _, table := range []v1.NexmarkTable{v1.NexmarkBid, v1.NexmarkAuction, v1.NexmarkPerson} {
		tables[table] = writeNexmark(b, ctx, filepath.Join(b.TempDir(), string(table)), v1.NexmarkSource{
			Table: table, EventsPerSecond: 100_000, AsFastAsPossible: true,
			MaxEventsPerTrigger: events / benchFiles, NumEvents: &events, StartTime: "2026-01-05T10:00:00Z",
		})
		if len(tables[table]) != benchFiles {
			b.Fatalf("the %s table is %d Parquet files, want %d", table, len(tables[table]), benchFiles)
		}
	}
	for _, list := range enginetest.NexmarkLists {
		for _, q := range list.Queries {
			if q.Name == "q7" {
				continue // q5's shape
			}
			var builtin float64
			for _, rt := range []string{"lockstep", "spark"} {
				b.Run(q.Name+"/runtime="+rt, func(b *testing.B) {
					var used, restart time.Duration
					for range b.N {
						dir := b.TempDir()
						obj := q.Steps(qt.Make("bench-"+q.Name, "bench").NexmarkSource(list.Source, v1.NexmarkSource{Table: list.Table})).
							FilesSink(filepath.Join(dir, "out"), v1.FormatParquet).AvailableNow().Checkpoint(filepath.Join(dir, "ck")).Obj()
						parts := map[string][]string{}
						for _, s := range obj.Spec.Sources {
							parts[s.Name] = tables[s.Nexmark.Table]
						}
						nexmarkAsFiles(b, &obj.Spec, filepath.Join(dir, "in"), parts)
						began := enginetest.CPU(true)
						runOn(b, ctx, rt, runner, enginetest.Registry(b), obj, nil)
						used += enginetest.CPU(true) - began
						restart += restartTime(b, ctx, rt, runner, obj, tables[list.Table][0])
					}
					reportRuntime(b, rt, float64(events)*float64(b.N)/used.Seconds(), "events/cpu-s", restart, &builtin)
				})
			}
		}
	}
}

// runOn runs obj on the runtime rt to the end (the built-in engine with the components of reg),
// telling obs of its batches.
func runOn(b *testing.B, ctx context.Context, rt string, runner spark.Runner, reg *engine.Registry, obj *v1.StreamingQuery, obs engine.Observer) engine.Summary {
	b.Helper()
	var (
		run func(context.Context) (engine.Summary, error)
		log string
	)
	if rt == "spark" {
		log = filepath.Join(b.TempDir(), "spark.log")
		q, err := spark.New(obj, spark.Options{Location: obj.Spec.Checkpoint.Location, Runner: runner, LogPath: log, Observer: obs})
		if err != nil {
			b.Fatal(err)
		}
		run = q.Run
	} else {
		opts := []engine.Option{engine.WithCheckpoint(obj.Spec.Checkpoint.Location)}
		if obs != nil {
			opts = append(opts, engine.WithObserver(obs))
		}
		q, err := engine.New(obj, reg, opts...)
		if err != nil {
			b.Fatal(err)
		}
		run = q.Run
	}
	sum, err := run(ctx)
	if err != nil {
		data, _ := os.ReadFile(log)
		b.Fatalf("run on %s: %v\n%s", rt, err, tail(string(data), 40))
	}
	return sum
}

// restartTime adds one more file (part, under another name) to obj's input and runs obj again:
// the time from the start to its first committed batch.
func restartTime(b *testing.B, ctx context.Context, rt string, runner spark.Runner, obj *v1.StreamingQuery, part string) time.Duration {
	b.Helper()
	if err := os.Link(part, filepath.Join(obj.Spec.Sources[0].Files.Path, "more-"+filepath.Base(part))); err != nil {
		b.Fatal(err)
	}
	return toFirstBatch(b, ctx, rt, runner, enginetest.Registry(b), obj)
}

// toFirstBatch runs obj on rt again: the time from its start to its first committed batch.
func toFirstBatch(b *testing.B, ctx context.Context, rt string, runner spark.Runner, reg *engine.Registry, obj *v1.StreamingQuery) time.Duration {
	b.Helper()
	first := &firstBatch{}
	began := time.Now()
	runOn(b, ctx, rt, runner, reg, obj, first)
	first.mu.Lock()
	defer first.mu.Unlock()
	if first.at.IsZero() {
		b.Fatalf("the restart on %s committed no batch", rt)
	}
	return first.at.Sub(began)
}

// reportRuntime reports a runtime's rate per CPU-second (in unit) and its mean restart time; the
// built-in engine's rate is kept in builtin, and Spark's is also reported as its ratio.
func reportRuntime(b *testing.B, rt string, perCPU float64, unit string, restart time.Duration, builtin *float64) {
	b.ReportMetric(perCPU, unit)
	b.ReportMetric(restart.Seconds()/float64(b.N), "restart-to-batch-s")
	if rt == "lockstep" {
		*builtin = perCPU
	} else if *builtin > 0 {
		b.ReportMetric(perCPU / *builtin, "x-builtin")
	}
}

// firstBatch records when the first batch was committed.
type firstBatch struct {
	mu sync.Mutex
	at time.Time
}

func (f *firstBatch) Started(engine.Start) {}
func (f *firstBatch) Committed(engine.Progress) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at.IsZero() {
		f.at = time.Now()
	}
}

// BenchmarkRuntimesKafkaToDelta moves -runtimes.events JSON records (4 partitions of a topic on
// the real broker) through a filter into a Delta table on the built-in engine and on Spark
// local[2], side by side: input rows per CPU-second of this process and its children (the
// broker's CPU, a long-lived child, is not in it), Spark's ratio to the built-in's, and the
// restart to the first committed batch after 1,000 more records.
func BenchmarkRuntimesKafkaToDelta(b *testing.B) {
	runner := sparktest.Runner(b)
	b.Setenv("JAVA_TOOL_OPTIONS", "") // Spark as users run it, as in BenchmarkRuntimes
	ctx := context.Background()
	n := *benchEvents
	brokers, topic := testenv.KafkaTopic(b, "runtimes")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	created, err := kadm.NewClient(cl).CreateTopics(ctx, 4, 1, nil, topic)
	if err == nil {
		err = created.Error()
	}
	if err != nil {
		b.Fatalf("create %s: %v", topic, err)
	}
	produce := func(from, count int64) {
		start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		var p kgo.FirstErrPromise
		for i := from; i < from+count; i++ {
			v := fmt.Sprintf(`{"id":"o%d","amount":%d.5,"ts":%q}`, i, i%1000, start.Add(time.Duration(i)*time.Millisecond).Format(time.RFC3339Nano))
			cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, p.Promise())
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		if err := p.Err(); err != nil {
			b.Fatal(err)
		}
	}
	produce(0, n)
	produced := n
	reg := engine.NewRegistry()
	for _, err := range []error{
		reg.RegisterSource(v1.SourceKafka, kafka.SourceSpec(), kafka.NewSource),
		reg.RegisterSink(v1.SinkDelta, delta.SinkSpec(), delta.NewSink),
	} {
		if err != nil {
			b.Fatal(err)
		}
	}
	var builtin float64
	for _, rt := range []string{"lockstep", "spark"} {
		b.Run("runtime="+rt, func(b *testing.B) {
			var (
				used, restart time.Duration
				rows          int64
			)
			for range b.N {
				dir := b.TempDir()
				obj := qt.Make("bench-kafka", "bench").
					KafkaSource("orders", brokers[0], topic, qt.Col("id", v1.TypeString), qt.Col("amount", v1.TypeDouble), qt.Col("ts", v1.TypeTimestamp)).
					EditSource("orders", func(s *v1.Source) {
						s.Kafka.StartingOffsets = v1.OffsetsEarliest
						s.Kafka.MaxOffsetsPerTrigger = ptr(n / 10)
					}).
					Filter("amount >= 0.0").SelectColumns("id", "amount", "ts").
					DeltaSink(filepath.Join(dir, "out")).AvailableNow().Checkpoint(filepath.Join(dir, "ck")).Obj()
				began := enginetest.CPU(true)
				sum := runOn(b, ctx, rt, runner, reg, obj, nil)
				used += enginetest.CPU(true) - began
				rows += sum.NumInputRows
				produce(produced, 1000)
				produced += 1000
				restart += toFirstBatch(b, ctx, rt, runner, reg, obj)
			}
			reportRuntime(b, rt, float64(rows)/used.Seconds(), "rows/cpu-s", restart, &builtin)
		})
	}
}

// benchShape is one of BenchmarkSparkFiles's queries over the bids: as Lockstep's spec (query)
// and as the hand-written job's shape (testdata/handjob/HandJob.java, which has the same query in
// Spark's API), the columns it writes, and a column whose sum both must agree on ("" for none).
type benchShape struct {
	name  string
	query func(in, static string) *qt.Query
	out   v1.Columns
	sum   string
}

// benchShapes are BenchmarkSparkFiles's queries: a stateless filter and projection, a windowed
// aggregate with a watermark (append mode), and an inner join with a static table.
var benchShapes = []benchShape{
	{
		name: "filter",
		query: func(in, _ string) *qt.Query {
			// half the bids: prices are 10^(6u) cents
			return benchBids(in).Filter("price > 1000").
				Select(qt.As("auction", "auction"), qt.As("bidder", "bidder"), qt.As("euro", "double(price) * 0.908"), qt.As("dateTime", "dateTime"))
		},
		out: v1.Columns{{Name: "auction", Type: v1.TypeLong}, {Name: "bidder", Type: v1.TypeLong}, {Name: "euro", Type: v1.TypeDouble}, {Name: "dateTime", Type: v1.TypeTimestamp}},
	},
	{
		name: "aggregate",
		query: func(in, _ string) *qt.Query {
			return benchBids(in).Watermark("dateTime", "5s").
				Aggregate("", []v1.GroupKey{qt.Window("dateTime", "10s"), qt.Key("auction")}, qt.Agg("bids", v1.AggCount, ""), qt.Agg("maxPrice", v1.AggMax, "price")).
				OutputMode(v1.OutputAppend)
		},
		out: v1.Columns{{Name: "window_start", Type: v1.TypeTimestamp}, {Name: "window_end", Type: v1.TypeTimestamp}, {Name: "auction", Type: v1.TypeLong},
			{Name: "bids", Type: v1.TypeLong}, {Name: "maxPrice", Type: v1.TypeLong}},
		sum: "bids",
	},
	{
		name: "join",
		query: func(in, static string) *qt.Query {
			return benchBids(in).Join(v1.Join{Keys: qt.Keys("auction", "id"), Static: qt.StaticFiles(static, v1.FormatParquet, v1.NexmarkColumns(v1.NexmarkAuction)...),
				Select: []v1.JoinColumn{{Side: v1.SideLeft, Column: "auction"}, {Side: v1.SideLeft, Column: "bidder"}, {Side: v1.SideLeft, Column: "price"},
					{Side: v1.SideLeft, Column: "dateTime"}, {Side: v1.SideRight, Column: "seller"}, {Side: v1.SideRight, Column: "category"}}})
		},
		out: v1.Columns{{Name: "auction", Type: v1.TypeLong}, {Name: "bidder", Type: v1.TypeLong}, {Name: "price", Type: v1.TypeLong},
			{Name: "dateTime", Type: v1.TypeTimestamp}, {Name: "seller", Type: v1.TypeLong}, {Name: "category", Type: v1.TypeLong}},
		sum: "category",
	},
}

// benchBids is the start of each of BenchmarkSparkFiles's queries: the bids in in, one file a batch.
func benchBids(in string) *qt.Query {
	return qt.Make("bench-files", "bench").FilesSource("bids", in, v1.FormatParquet, v1.NexmarkColumns(v1.NexmarkBid)...).
		EditSource("bids", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = ptr[int32](1) })
}

// BenchmarkSparkFiles compares Lockstep-on-Spark with the same queries written by hand as plain
// Spark jobs (testdata/handjob/HandJob.java), one sub-benchmark a shape (benchShapes): a stateless
// filter and projection, a windowed aggregate with a watermark, and a stream–static join with the
// auctions of the same Nexmark events. Each reads the bids of -runtimes.events Nexmark events
// (1,000 events a second of event time), in 10 Parquet files read one a batch, into Parquet files
// (Lockstep's files sink; Spark's own file sink), on the same Spark jars, local[2], 8 shuffle
// partitions, the JVMs started alike (options, heap, class-data archive). Each reports its
// CPU-seconds (this process's and its children's: the JVM's) and wall seconds per run, and the
// Lockstep run its ratios to the hand-written job's, x-hand-cpu and x-hand-wall. Both must write
// the same number of rows, and the same sum of the shape's sum column.
//
// shape=filter/job=rows runs the filter into the webhook sink (an HTTP receiver in this process
// that counts rows and keeps nothing), whose rows the runner hands to its Go parent (rows.go): the
// cost of that stream, as x-files-cpu, its CPU-seconds over the files sink's (job=lockstep).
func BenchmarkSparkFiles(b *testing.B) {
	runner := sparktest.Runner(b)
	b.Setenv("JAVA_TOOL_OPTIONS", "") // Spark as users run it, as in BenchmarkRuntimes
	ctx := context.Background()
	events := *benchEvents
	gen := func(table v1.NexmarkTable) []string {
		return writeNexmark(b, ctx, filepath.Join(b.TempDir(), string(table)), v1.NexmarkSource{
			Table: table, EventsPerSecond: 1_000, AsFastAsPossible: true, // 10 s windows: 100 of them
			MaxEventsPerTrigger: events / benchFiles, NumEvents: &events, StartTime: "2026-01-05T10:00:00Z",
		})
	}
	bids := gen(v1.NexmarkBid)
	static := filepath.Join(b.TempDir(), "auctions") // the join's static table: only its Parquet files
	linkAll(b, gen(v1.NexmarkAuction), static)
	classes := compileHandJob(b, runner)
	mem := v1.SparkProcess{}.MemoryOrDefault()
	heap := mem.Value()
	var received atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Rows []json.RawMessage `json:"rows"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		received.Add(int64(len(body.Rows)))
	}))
	defer hook.Close()
	for _, shape := range benchShapes {
		var hand, files struct {
			cpu, wall float64
			out       benchOutput
		}
		jobs := []string{"hand", "lockstep"}
		if shape.name == "filter" {
			jobs = append(jobs, "rows")
		}
		for _, job := range jobs {
			b.Run("shape="+shape.name+"/job="+job, func(b *testing.B) {
				var (
					cpu, wall time.Duration
					out       benchOutput
				)
				for range b.N {
					dir := b.TempDir()
					in, outDir, ck := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "ck")
					linkAll(b, bids, in) // hard links keep the files' order (modification times)
					began, start := enginetest.CPU(true), time.Now()
					if job == "hand" {
						cmd := runner.ClassCommand(classes, "HandJob", heap, shape.name, "local[2]", "8", in, outDir, ck, static)
						cmd.Env = append(os.Environ(), "SPARK_LOCAL_IP=127.0.0.1")
						log, err := os.Create(filepath.Join(dir, "spark.log"))
						if err != nil {
							b.Fatal(err)
						}
						cmd.Stderr = log
						err = cmd.Run()
						log.Close()
						if err != nil {
							data, _ := os.ReadFile(log.Name())
							b.Fatalf("the hand-written job: %v\n%s", err, tail(string(data), 40))
						}
					} else {
						q := shape.query(in, static).FilesSink(outDir, v1.FormatParquet).AvailableNow().Checkpoint(ck).StatePartitions(8)
						if job == "rows" {
							received.Store(0)
							q = q.Sink(v1.Sink{Webhook: &v1.WebhookSink{URL: hook.URL, MaxRowsPerRequest: 10_000}})
						}
						runOn(b, ctx, "spark", runner, nil, q.Obj(), nil)
					}
					cpu += enginetest.CPU(true) - began
					wall += time.Since(start)
					if job == "rows" {
						out.rows += received.Load()
					} else {
						o := outputOf(b, ctx, job, outDir, shape)
						out.rows, out.sum = out.rows+o.rows, out.sum+o.sum
					}
				}
				perRun := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
				out = benchOutput{rows: out.rows / int64(b.N), sum: out.sum / int64(b.N)}
				b.ReportMetric(perRun(cpu), "cpu-s")
				b.ReportMetric(perRun(wall), "wall-s")
				b.ReportMetric(float64(out.rows), "rows")
				switch {
				case job == "hand":
					hand.cpu, hand.wall, hand.out = perRun(cpu), perRun(wall), out
				case job == "lockstep":
					files.cpu, files.wall, files.out = perRun(cpu), perRun(wall), out
					if hand.cpu == 0 {
						return // the hand-written job did not run (-bench chose this one only)
					}
					if out != hand.out {
						b.Fatalf("Lockstep wrote %d rows a run (sum of %q %d), the hand-written job %d (sum %d)", out.rows, shape.sum, out.sum, hand.out.rows, hand.out.sum)
					}
					b.ReportMetric(perRun(cpu)/hand.cpu, "x-hand-cpu")
					b.ReportMetric(perRun(wall)/hand.wall, "x-hand-wall")
				case files.cpu != 0:
					if out.rows != files.out.rows {
						b.Fatalf("the webhook received %d rows a run, the files sink wrote %d", out.rows, files.out.rows)
					}
					b.ReportMetric(perRun(cpu)/files.cpu, "x-files-cpu")
				}
			})
		}
	}
}

// linkAll hard-links files into the new folder dir.
func linkAll(b *testing.B, files []string, dir string) {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, p := range files {
		if err := os.Link(p, filepath.Join(dir, filepath.Base(p))); err != nil {
			b.Fatal(err)
		}
	}
}

// compileHandJob compiles testdata/handjob/HandJob.java against the runner's libraries, once,
// into a folder it returns.
func compileHandJob(b *testing.B, runner spark.Runner) string {
	b.Helper()
	java, err := filepath.EvalSymlinks(runner.Java)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	cmd := exec.Command(filepath.Join(filepath.Dir(java), "javac"), "-nowarn", "-d", dir,
		"-cp", filepath.Join(runner.Dir, "libs", "*"), filepath.Join("testdata", "handjob", "HandJob.java"))
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("javac HandJob.java: %v\n%s", err, out)
	}
	return dir
}

// benchOutput is what a run of BenchmarkSparkFiles wrote: its rows, and the sum of its shape's
// sum column.
type benchOutput struct {
	rows, sum int64
}

// outputOf reads what a run of shape wrote into out: Lockstep's through its manifest, the
// hand-written job's in the Parquet files its sink's log lists.
func outputOf(b *testing.B, ctx context.Context, job, out string, shape benchShape) benchOutput {
	b.Helper()
	folder, err := s3.OpenFolder(out)
	if err != nil {
		b.Fatal(err)
	}
	var (
		cols v1.Columns
		rows []engine.Row
	)
	if job == "lockstep" {
		if cols, rows, err = sink.ReadRows(ctx, folder); err != nil {
			b.Fatal(err)
		}
	} else {
		objs, err := folder.List(ctx, "")
		if err != nil {
			b.Fatal(err)
		}
		cols = shape.out
		dec := codec.NewDecoder(cols)
		for _, o := range checkpoint.Visible(objs) {
			if !strings.HasSuffix(o.Key, ".parquet") {
				continue
			}
			data, err := folder.Get(ctx, o.Key)
			if err != nil {
				b.Fatal(err)
			}
			rows = append(rows, dec.Decode(v1.FormatParquet, data, func(m codec.Malformed) { b.Fatalf("%s: %s", o.Key, m.Reason) })...)
		}
	}
	o := benchOutput{rows: int64(len(rows))}
	if shape.sum == "" {
		return o
	}
	i := slices.IndexFunc(cols, func(c v1.Column) bool { return c.Name == shape.sum })
	if i < 0 {
		b.Fatalf("the %s job's output has no column %s: %v", job, shape.sum, cols)
	}
	for _, r := range rows {
		v, ok := r[i].(int64)
		if !ok {
			b.Fatalf("the %s job's column %s holds %T, want int64", job, shape.sum, r[i])
		}
		o.sum += v
	}
	return o
}
