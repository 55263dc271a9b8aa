package spark_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/storetest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/spark"
	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
)

// The rebuild oracle on Spark (docs/rebuild.md): for each stateful change the Spark runtime
// can run, the old query runs batches 0–1 (one input file a batch), the state is rebuilt for
// the new query, and the new query runs batches 2–3; what it writes for them must equal what
// an uninterrupted run of the new query over batches 0–3 writes for them (in the oracle's JVM, its
// console sink's tables as the runner's prints them). No-data batches are off, so that both runs
// have the same batch boundaries (one file a batch).
type sparkRebuildCase struct {
	rule string // the compat rule the change is rejected by
	base sparkRebuildBase
	edit func(s *v1.StreamingQuerySpec)
}

// sparkRebuildBase is an old query of the rebuild oracle and its input: four files a folder,
// one per batch, the first two read by the old query.
type sparkRebuildBase struct {
	name  string
	query func(in string) *qt.Query
	input map[string][]string // folder → its four files
}

var (
	rebuildAggregate = sparkRebuildBase{name: "aggregate", query: oracleQuery, input: map[string][]string{"orders": oracleInput}}
	rebuildDedup     = sparkRebuildBase{name: "dedup", query: oracleDedup, input: map[string][]string{"orders": oracleInput}}
	// rebuildDedupAggregate drops duplicate orders before oracleQuery's aggregate: two stateful
	// operators, the aggregate the second.
	rebuildDedupAggregate = sparkRebuildBase{name: "dedup-aggregate", input: map[string][]string{"orders": oracleInput},
		query: func(in string) *qt.Query {
			return oracleQuery(in).Edit(func(s *v1.StreamingQuerySpec) {
				s.Transform = slices.Insert(s.Transform, 1, v1.Step{DropDuplicates: &v1.DropDuplicates{Columns: []string{"order_id"}}})
			})
		}}
	// rebuildSessions has its own orders: sessions are appended when the watermark closes them,
	// so batch 2 moves it past every session of batches 0–2 (its it order at 10:03), which
	// batch 3 then writes, for a gap of 30s as for one of 1m (that merges de's two sessions).
	rebuildSessions = sparkRebuildBase{name: "sessions", query: oracleSessions, input: map[string][]string{"orders": {
		`{"order_id":"o1","country":"de","city":"berlin","amount":10.0,"qty":1,"ts":"2026-01-05T10:00:05Z"}
{"order_id":"o2","country":"fr","city":"paris","amount":20.0,"qty":2,"ts":"2026-01-05T10:00:10Z"}`,
		`{"order_id":"o3","country":"de","city":"munich","amount":5.0,"qty":3,"ts":"2026-01-05T10:00:20Z"}
{"order_id":"o1","country":"de","city":"berlin","amount":10.0,"qty":1,"ts":"2026-01-05T10:00:05Z"}`,
		`{"order_id":"o4","country":"de","city":"berlin","amount":30.0,"qty":4,"ts":"2026-01-05T10:01:00Z"}
{"order_id":"o5","country":"it","city":"rome","amount":7.0,"qty":5,"ts":"2026-01-05T10:03:00Z"}`,
		`{"order_id":"o6","country":"fr","city":"lyon","amount":1.0,"qty":6,"ts":"2026-01-05T10:03:05Z"}`,
	}}}
	// rebuildStream is oracleStream, orders joined with returns within a minute after them:
	// batch 2's return of o1 matches the two o1 orders of batches 0 and 1, which only the
	// join's state holds then.
	rebuildStream = sparkRebuildBase{name: "stream-join", query: oracleStream, input: map[string][]string{"orders": oracleInput, "returns": {
		`{"order_id":"o2","country":"fr","city":"paris","amount":20.0,"qty":2,"ts":"2026-01-05T10:00:30Z"}`,
		`{"order_id":"o3","country":"de","city":"munich","amount":5.0,"qty":3,"ts":"2026-01-05T10:00:25Z"}`,
		`{"order_id":"o1","country":"de","city":"berlin","amount":10.0,"qty":1,"ts":"2026-01-05T10:00:50Z"}`,
		`{"order_id":"o6","country":"de","city":"munich","amount":1.0,"qty":6,"ts":"2026-01-05T10:02:35Z"}
{"order_id":"o5","country":"fr","city":"lyon","amount":7.0,"qty":5,"ts":"2026-01-05T10:02:40Z"}`,
	}}}
)

func sparkRebuildCases() []sparkRebuildCase {
	agg := func(s *v1.StreamingQuerySpec) *v1.Aggregate { return s.Transform[1].Aggregate }
	return []sparkRebuildCase{
		{rule: "key-columns", base: rebuildAggregate, edit: func(s *v1.StreamingQuerySpec) { agg(s).GroupBy[0].Column = "city" }},
		{rule: "key-order", base: rebuildAggregate, edit: func(s *v1.StreamingQuerySpec) {
			g := agg(s).GroupBy
			g[0], g[1] = g[1], g[0]
		}},
		{rule: "window-size", base: rebuildAggregate, edit: func(s *v1.StreamingQuerySpec) { agg(s).GroupBy[1].Window.Duration = "2m" }},
		{rule: "aggregate-added", base: rebuildAggregate, edit: func(s *v1.StreamingQuerySpec) {
			agg(s).Aggregates = append(agg(s).Aggregates, v1.Aggregation{Name: "mean", Function: v1.AggAvg, Column: "amount"})
		}},
		{rule: "aggregate-removed", base: rebuildAggregate, edit: func(s *v1.StreamingQuerySpec) { agg(s).Aggregates = agg(s).Aggregates[:2] }},
		{rule: "aggregate-function", base: rebuildAggregate, edit: func(s *v1.StreamingQuerySpec) { agg(s).Aggregates[2].Function = v1.AggMin }},
		// A sum of a long instead of a double: the state's type changes too.
		{rule: "aggregate-input", base: rebuildAggregate, edit: func(s *v1.StreamingQuerySpec) { agg(s).Aggregates[1].Column = "qty" }},
		{rule: "operator-added", base: rebuildAggregate, edit: func(s *v1.StreamingQuerySpec) {
			s.Transform = slices.Insert(s.Transform, 1, v1.Step{DropDuplicates: &v1.DropDuplicates{Columns: []string{"order_id"}}})
		}},
		// The aggregate, Spark's second stateful operator, becomes its first.
		{rule: "operator-removed", base: rebuildDedupAggregate, edit: func(s *v1.StreamingQuerySpec) { s.Transform = slices.Delete(s.Transform, 1, 2) }},
		{rule: "state-partitions", base: rebuildAggregate, edit: func(s *v1.StreamingQuerySpec) { s.StateStore.Partitions = 5 }},
		{rule: "key-columns (dropDuplicates)", base: rebuildDedup, edit: func(s *v1.StreamingQuerySpec) {
			s.Transform[0].DropDuplicates.Columns = []string{"city"}
		}},
		{rule: "session-gap", base: rebuildSessions, edit: func(s *v1.StreamingQuerySpec) { agg(s).GroupBy[1].Session.Gap = "1m" }},
		{rule: "join-keys", base: rebuildStream, edit: func(s *v1.StreamingQuerySpec) { s.Transform[1].Join.Keys = qt.Keys("city", "city") }},
		{rule: "join-type", base: rebuildStream, edit: func(s *v1.StreamingQuerySpec) { s.Transform[1].Join.Type = v1.JoinLeftOuter }},
	}
}

// rebuildQuery is base's query for the rebuild oracle: no no-data batches.
func rebuildQuery(base func(string) *qt.Query, in string, edit func(*v1.StreamingQuerySpec)) *v1.StreamingQuery {
	return base(in).Edit(func(s *v1.StreamingQuerySpec) {
		s.Runtime.Spark.Conf = map[string]string{"spark.sql.streaming.noDataMicroBatches.enabled": "false"}
		if edit != nil {
			edit(s)
		}
	}).Obj()
}

func TestSparkRebuildOracle(t *testing.T) {
	t.Parallel()
	runner := sparktest.Runner(t)
	ctx := context.Background()
	dir := t.TempDir()
	// The old queries' checkpoints after batches 0–1, one per base, run when a case first
	// needs it (so that -run picks the bases too) and copied for each case; each base reads
	// its own input folder, all four files written once the old query ran. The cases run two
	// at a time (-parallel): a case's rebuild is a JVM of its own, its runs are in the oracle's.
	type oldRun struct {
		once    sync.Once
		in, loc string
	}
	var mu sync.Mutex
	olds := map[string]*oldRun{}
	old := func(t *testing.T, b sparkRebuildBase) (in, loc string) {
		mu.Lock()
		o := olds[b.name]
		if o == nil {
			o = &oldRun{}
			olds[b.name] = o
		}
		mu.Unlock()
		o.once.Do(func() {
			in := filepath.Join(dir, "in-"+b.name)
			for folder, files := range b.input {
				writeFiles(t, filepath.Join(in, folder), files[:2])
			}
			loc := filepath.Join(dir, "old-"+b.name, "ck")
			if out := runSparkAt(t, ctx, runner, rebuildQuery(b.query, in, nil), loc); len(out) != 2 {
				t.Fatalf("old %s query ran batches %v, want 0 and 1", b.name, slices.Sorted(mapsKeys(out)))
			}
			for folder, files := range b.input {
				writeFiles(t, filepath.Join(in, folder), files)
			}
			o.in, o.loc = in, loc
		})
		if o.loc == "" {
			t.Fatalf("the old %s query did not run (see the case that ran it)", b.name)
		}
		return o.in, o.loc
	}
	for i, c := range sparkRebuildCases() {
		t.Run(c.rule, func(t *testing.T) {
			t.Parallel()
			in, oldLoc := old(t, c.base)
			nu := rebuildQuery(c.base.query, in, c.edit)
			// Each case's runs in a folder of its own, where their Spark log goes too. The
			// uninterrupted run writes no Lockstep checkpoint to rebuild: it runs in the JVM the
			// package's tests share, beside the other cases', and costs no JVM start.
			want := runOracleConsole(t, nu, filepath.Join(dir, fmt.Sprintf("case-%d", i), "uninterrupted"))
			if after := afterBatch(want, 1); len(after) != 2 || len(after[2])+len(after[3]) == 0 {
				t.Fatalf("the uninterrupted run wrote %v after batch 1, want rows in batches 2 and 3", after)
			}
			loc := filepath.Join(dir, fmt.Sprintf("case-%d", i), "rebuilt")
			if err := os.CopyFS(loc, os.DirFS(oldLoc)); err != nil {
				t.Fatal(err)
			}
			var progress []string
			q := newSparkQuery(t, runner, nu, loc, nil)
			sum, err := q.Rebuild(ctx, engine.RebuildOptions{Reason: c.rule, Progress: func(done, total int64, p engine.Progress) {
				progress = append(progress, fmt.Sprintf("%d/%d", done, total))
			}})
			if err != nil {
				t.Fatalf("Rebuild: %v\n%s", err, sparkLogTail(q))
			}
			if sum.Generation != 1 || sum.Replayed != 2 || !slices.Equal(progress, []string{"1/2", "2/2"}) {
				t.Errorf("Rebuild = %+v, progress %v; want generation 1, 2 batches replayed, progress 1/2 2/2", sum, progress)
			}
			// Batches 2–3 on the rebuilt state, in the oracle's JVM too, over the new generation's
			// Spark checkpoint: what is compared is the state the rebuild wrote. Query.Run after a
			// rebuild (its generation, claim and pins), a JVM each, is TestSparkRebuildKills's and
			// TestSparkRebuildAdopted's.
			got := runOracleConsole(t, nu, filepath.Join(loc, "generation-1"))
			if c.rule == "state-partitions" {
				// Re-sharded: the new generation's state has the new query's 5 partitions.
				parts, err := os.ReadDir(filepath.Join(loc, "generation-1", "state", "0"))
				n := 0
				for _, p := range parts {
					if _, err := strconv.Atoi(p.Name()); err == nil && p.IsDir() {
						n++
					}
				}
				if err != nil || n != 5 {
					t.Errorf("the rebuilt state has %d partitions (%v), want 5", n, err)
				}
			}
			if diff := cmp.Diff(afterBatch(want, 1), got); diff != "" {
				t.Errorf("batches 2–3 after the rebuild differ from an uninterrupted run of the new query (-want +got):\n%s", diff)
			}
		})
	}
}

func newSparkQuery(t *testing.T, runner spark.Runner, obj *v1.StreamingQuery, loc string, edit func(*spark.Options)) *spark.Query {
	t.Helper()
	opts := spark.Options{Runner: runner, Location: loc, LogPath: filepath.Join(filepath.Dir(loc), "spark.log"), Stdout: &bytes.Buffer{}}
	if edit != nil {
		edit(&opts)
	}
	q, err := spark.New(obj, opts)
	if err != nil {
		t.Fatalf("spark.New: %v", err)
	}
	return q
}

func sparkLogTail(q *spark.Query) string {
	log, _ := os.ReadFile(q.LogPath())
	return "Spark's log, last lines:\n" + tail(string(log), 40)
}

// runSparkAt runs obj on Spark at loc and returns what its console sink printed, per batch
// (each batch's rows sorted).
func runSparkAt(t *testing.T, ctx context.Context, runner spark.Runner, obj *v1.StreamingQuery, loc string) map[int64][]string {
	t.Helper()
	var out bytes.Buffer
	q := newSparkQuery(t, runner, obj, loc, func(o *spark.Options) { o.Stdout = &out })
	if _, err := q.Run(ctx); err != nil {
		t.Fatalf("run on spark at %s: %v\n%s", loc, err, sparkLogTail(q))
	}
	return consoleBatches(out.String())
}

// runOracleConsole runs obj, a query with a console sink, in the package's oracle at the
// checkpoint loc, and returns what the console sink would have printed, per batch (each batch's
// rows sorted), as runSparkAt does.
func runOracleConsole(t *testing.T, obj *v1.StreamingQuery, loc string) map[int64][]string {
	t.Helper()
	res := theOracle(t).run(t, &obj.Spec, loc)
	if !res.Ran {
		t.Fatalf("run on spark (the oracle's JVM) at %s: %s %s", loc, res.ErrorClass, res.Message)
	}
	var out strings.Builder
	for batch, table := range res.Shown {
		fmt.Fprintf(&out, "Batch: %s\n%s\n", batch, table)
	}
	return consoleBatches(out.String())
}

var consoleBatch = regexp.MustCompile(`^Batch: (\d+)$`)

// consoleBatches parses Spark's console sink: "Batch: N", then a table of rows.
func consoleBatches(s string) map[int64][]string {
	batches := map[int64][]string{}
	batch := int64(-1)
	header := false
	for _, line := range strings.Split(s, "\n") {
		if m := consoleBatch.FindStringSubmatch(line); m != nil {
			batch, _ = strconv.ParseInt(m[1], 10, 64)
			batches[batch] = []string{}
			header = true
			continue
		}
		if batch < 0 || !strings.HasPrefix(line, "|") {
			continue
		}
		if header { // the column names
			header = false
			continue
		}
		batches[batch] = append(batches[batch], line)
	}
	for _, rows := range batches {
		slices.Sort(rows)
	}
	return batches
}

// afterBatch is the batches of out after n.
func afterBatch(out map[int64][]string, n int64) map[int64][]string {
	after := map[int64][]string{}
	for b, rows := range out {
		if b > n {
			after[b] = rows
		}
	}
	return after
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// oldGeneration keeps the keys of a Spark checkpoint's old generation: not a later
// generation's folder (generation-<n>/), nor the records' generations and switches
// (_generations/).
func oldGeneration(key string) bool {
	for _, seg := range strings.Split(key, "/") {
		if strings.HasPrefix(seg, "generation-") || seg == "_generations" {
			return false
		}
	}
	return true
}

// snapshotDir reads every object of the old generation at the local location loc.
func snapshotDir(t *testing.T, loc string) map[string]string {
	t.Helper()
	st, err := checkpoint.OpenDir(loc)
	if err != nil {
		t.Fatal(err)
	}
	return storetest.Objects(t, st, oldGeneration)
}

// BenchmarkSparkRebuild is BenchmarkRebuild (engine) on Spark: the rows per CPU-second (this
// process and the runner JVMs) of a rebuild on Spark for new grouping keys over 10 recorded
// batches of 2,000 rows, beside a normal run of the new query over the same batches on Spark,
// and their ratio. A rebuild writes nothing, but starts Spark's query once per batch.
func BenchmarkSparkRebuild(b *testing.B) {
	runner := sparktest.Runner(b)
	ctx := context.Background()
	var runCPU, rebuildCPU time.Duration
	var rows int64
	edit := func(s *v1.StreamingQuerySpec) { s.Transform[1].Aggregate.GroupBy[0].Column = "city" }
	run := func(obj *v1.StreamingQuery, loc string) engine.Summary {
		q, err := spark.New(obj, spark.Options{Runner: runner, Location: loc, LogPath: filepath.Join(filepath.Dir(loc), "spark.log"), Stdout: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		sum, err := q.Run(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return sum
	}
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		in := filepath.Join(dir, "in")
		var files []string
		for f := range 10 {
			var lines []string
			for j := range 2000 {
				ts := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC).Add(time.Duration(f*2000+j) * 10 * time.Millisecond).Format(time.RFC3339Nano)
				lines = append(lines, fmt.Sprintf(`{"order_id":"o-%d","country":"c%d","city":"t%d","amount":%d.5,"qty":%d,"ts":%q}`, j%500, j%40, j%70, j%9, j%5, ts))
			}
			files = append(files, strings.Join(lines, "\n")+"\n")
		}
		writeFiles(b, filepath.Join(in, "orders"), files)
		loc := filepath.Join(dir, "ckpt")
		run(rebuildQuery(oracleQuery, in, nil), loc)
		nu := rebuildQuery(oracleQuery, in, edit)
		b.StartTimer()

		began := enginetest.CPU(true)
		q, err := spark.New(nu, spark.Options{Runner: runner, Location: loc, LogPath: filepath.Join(dir, "spark.log"), Stdout: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		rs, err := q.Rebuild(ctx, engine.RebuildOptions{})
		if err != nil {
			b.Fatal(err)
		}
		mid := enginetest.CPU(true)
		sum := run(nu, filepath.Join(dir, "fresh"))
		rebuildCPU += mid - began
		runCPU += enginetest.CPU(true) - mid
		rows += sum.NumInputRows
		if rs.InputRows != sum.NumInputRows {
			b.Fatalf("the rebuild read %d rows, the run %d", rs.InputRows, sum.NumInputRows)
		}
	}
	enginetest.ReportRebuild(b, rows, rebuildCPU, runCPU)
}

// adoptedInput is the orders PlainJob's dedup-agg reads, one file a batch: o1's duplicate in
// batch 1; batch 2 moves the watermark to 10:02, so batch 3 appends the windows of 10:00 and
// 10:01 (de's holds o1 twice once the dropDuplicates is gone).
var adoptedInput = []string{
	`{"order_id":"o1","country":"de","amount":10.0,"ts":"2026-01-05T10:00:05Z"}
{"order_id":"o2","country":"fr","amount":20.0,"ts":"2026-01-05T10:00:10Z"}`,
	`{"order_id":"o3","country":"de","amount":5.0,"ts":"2026-01-05T10:00:20Z"}
{"order_id":"o1","country":"de","amount":10.0,"ts":"2026-01-05T10:00:05Z"}`,
	`{"order_id":"o4","country":"de","amount":30.0,"ts":"2026-01-05T10:01:30Z"}
{"order_id":"o5","country":"fr","amount":7.0,"ts":"2026-01-05T10:02:10Z"}`,
	`{"order_id":"o6","country":"fr","amount":1.0,"ts":"2026-01-05T10:02:30Z"}`,
}

// adoptedQuery is the spark runtime's query of PlainJob's dedup-agg (its source unnamed, as
// the job leaves it), one file a batch and no no-data batches, as the job is run here.
func adoptedQuery(in string, edit func(*v1.StreamingQuerySpec)) *v1.StreamingQuery {
	return qt.Make("orders", "shop").FilesSource("orders", filepath.Join(in, "orders"), v1.FormatJSON,
		qt.Col("order_id", v1.TypeString), qt.Col("country", v1.TypeString), qt.Col("amount", v1.TypeDouble), qt.Col("ts", v1.TypeTimestamp)).
		EditSource("orders", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = ptr[int32](1) }).
		Watermark("ts", "10s").DropDuplicates("", "order_id").
		Aggregate("", []v1.GroupKey{qt.Key("country"), qt.Window("ts", "1m")},
			v1.Aggregation{Name: "orders", Function: v1.AggCount},
			v1.Aggregation{Name: "revenue", Function: v1.AggSum, Column: "amount"},
			v1.Aggregation{Name: "top", Function: v1.AggMax, Column: "amount"}).
		OutputMode(v1.OutputAppend).ConsoleSink().StatePartitions(3).AvailableNow().
		Edit(func(s *v1.StreamingQuerySpec) {
			s.Runtime.Spark = &v1.SparkRuntime{Conf: map[string]string{"spark.sql.streaming.noDataMicroBatches.enabled": "false"}}
			if edit != nil {
				edit(s)
			}
		}).Obj()
}

// plainJob runs cmd/lockstep/testdata/sparkjob/PlainJob.java, a Spark job with no Lockstep
// code, over input into ckpt, one file a batch, no no-data batches, and Spark's settings.
func plainJob(t *testing.T, runner spark.Runner, kind, input, ckpt string, settings ...string) {
	t.Helper()
	src, err := filepath.Abs("../../cmd/lockstep/testdata/sparkjob/PlainJob.java")
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{kind, input, ckpt, "maxFilesPerTrigger=1", "spark.sql.streaming.noDataMicroBatches.enabled=false"}, settings...)
	if out, err := runner.ProgramCommand(src, 768<<20, args...).CombinedOutput(); err != nil {
		t.Fatalf("plain Spark job %s: %v\n%s", kind, err, tail(string(out), 4000))
	}
}

// adopt runs obj on the Spark checkpoint at loc that a plain Spark job wrote: the spark
// runtime adopts it (the guard accepts it as it is) and runs what input is new.
func adopt(t *testing.T, ctx context.Context, runner spark.Runner, obj *v1.StreamingQuery, loc string) map[int64][]string {
	t.Helper()
	var out bytes.Buffer
	q := newSparkQuery(t, runner, obj, loc, func(o *spark.Options) {
		o.Stdout = &out
		o.Adopt = func(context.Context, spark.AdoptRequest) ([]byte, error) { return nil, nil }
	})
	if _, err := q.Run(ctx); err != nil {
		t.Fatalf("adopt the Spark checkpoint at %s: %v\n%s", loc, err, sparkLogTail(q))
	}
	return consoleBatches(out.String())
}

// TestSparkRebuildAdopted rebuilds a Spark checkpoint that a plain Spark job wrote (batches
// 0–1) and Lockstep adopted (batch 2 ran under Lockstep): Lockstep's records start at the
// adopted batch 1, so the boundaries of batches 0–1 come from Spark's offsets log. The
// dropDuplicates is removed (operator-removed); the output after the switch equals an
// uninterrupted run of the new query. When Spark purged batch 0's offsets before the
// adoption (spark.sql.streaming.minBatchesToRetain), the plan says so and nothing is written.
func TestSparkRebuildAdopted(t *testing.T) {
	t.Parallel()
	runner := sparktest.Runner(t)
	ctx := context.Background()
	dir := t.TempDir()
	noDedup := func(s *v1.StreamingQuerySpec) { s.Transform = slices.Delete(s.Transform, 1, 2) }

	t.Run("held", func(t *testing.T) {
		in, loc := filepath.Join(dir, "in"), filepath.Join(dir, "ckpt")
		writeFiles(t, filepath.Join(in, "orders"), adoptedInput[:2])
		plainJob(t, runner, "dedup-agg", in, loc)
		writeFiles(t, filepath.Join(in, "orders"), adoptedInput[:3])
		if out := adopt(t, ctx, runner, adoptedQuery(in, nil), loc); len(out) != 1 || out[2] == nil {
			t.Fatalf("the adopting run ran batches %v, want batch 2", slices.Sorted(mapsKeys(out)))
		}
		writeFiles(t, filepath.Join(in, "orders"), adoptedInput)

		nu := adoptedQuery(in, noDedup)
		q := newSparkQuery(t, runner, nu, loc, nil)
		p, err := q.PlanRebuild(ctx)
		if err != nil || p.Batches != 3 || p.Pending != -1 {
			t.Fatalf("PlanRebuild = %+v, %v; want batches 0–2 and none pending", p, err)
		}
		sum, err := q.Rebuild(ctx, engine.RebuildOptions{Reason: "operator-removed"})
		if err != nil {
			t.Fatalf("Rebuild: %v\n%s", err, sparkLogTail(q))
		}
		if sum.Generation != 1 || sum.Replayed != 3 {
			t.Errorf("Rebuild = %+v, want generation 1 with batches 0–2 replayed", sum)
		}
		got := runSparkAt(t, ctx, runner, nu, loc)
		want := runOracleConsole(t, nu, filepath.Join(dir, "uninterrupted"))
		if after := afterBatch(want, 2); len(after[3]) == 0 {
			t.Fatalf("the uninterrupted run wrote %v after batch 2, want rows in batch 3", after)
		}
		if diff := cmp.Diff(afterBatch(want, 2), got); diff != "" {
			t.Errorf("batch 3 after the rebuild differs from an uninterrupted run of the new query (-want +got):\n%s", diff)
		}
	})

	t.Run("purged", func(t *testing.T) {
		in, loc := filepath.Join(dir, "in-purged"), filepath.Join(dir, "ckpt-purged")
		writeFiles(t, filepath.Join(in, "orders"), adoptedInput[:3])
		// Batch 2 purges batch 0's offsets and commit.
		plainJob(t, runner, "dedup-agg", in, loc, "spark.sql.streaming.minBatchesToRetain=1")
		entries, err := os.ReadDir(filepath.Join(loc, "offsets"))
		if err != nil {
			t.Fatal(err)
		}
		var kept []string
		for _, e := range entries {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				kept = append(kept, e.Name())
			}
		}
		if slices.Sort(kept); !slices.Equal(kept, []string{"1", "2"}) {
			t.Fatalf("Spark's offsets log keeps batches %v, want 1 and 2 (batch 0 purged)", kept)
		}
		adopt(t, ctx, runner, adoptedQuery(in, nil), loc)
		before := snapshotDir(t, loc)

		q := newSparkQuery(t, runner, adoptedQuery(in, noDedup), loc, nil)
		want := regexp.MustCompile(`: Spark purged the offsets of batch 0: its offsets log in \S*` + regexp.QuoteMeta(loc) + ` keeps batches 1–2 only \(spark.sql.streaming.minBatchesToRetain\), so what batch 0 read is no longer recorded$`)
		if _, err := q.PlanRebuild(ctx); !errors.Is(err, engine.ErrRebuildImpossible) || !want.MatchString(err.Error()) {
			t.Errorf("PlanRebuild = %v, want ErrRebuildImpossible matching %s", err, want)
		}
		if _, err := q.Rebuild(ctx, engine.RebuildOptions{}); !errors.Is(err, engine.ErrRebuildImpossible) || !want.MatchString(err.Error()) {
			t.Errorf("Rebuild = %v, want ErrRebuildImpossible matching %s", err, want)
		}
		if diff := cmp.Diff(before, snapshotDir(t, loc)); diff != "" {
			t.Errorf("a rebuild that cannot be done changed the checkpoint (-before +after):\n%s", diff)
		}
	})
}

// TestSparkRebuildPinsStatics: a rebuild joins the static side's snapshot the old generation's
// batches joined, not the newest, and records it in the new generation's entries, so that the
// run after the switch joins it too. Orders joined with a customers folder are counted per
// tier; the first file's batch runs; then the count becomes per name (rebuilt) after the
// folder gained renamed customers (Bob New for b1, whom both files' orders name). Batch 1
// after the rebuild equals an uninterrupted run of the new query that started before the
// folder changed: no new name in it.
func TestSparkRebuildPinsStatics(t *testing.T) {
	t.Parallel()
	runner := sparktest.Runner(t)
	ctx := context.Background()
	dir := t.TempDir()
	in, customers := filepath.Join(dir, "in"), filepath.Join(dir, "customers")
	base := time.Now().Add(-time.Hour)
	writeFileAt(t, filepath.Join(in, "part-0.json"), diffInput[0], base)
	writeFileAt(t, filepath.Join(customers, "part-0.json"), diffCustomers, base)
	query := func(key string) *v1.StreamingQuery {
		return qt.Make("pinned", "spark").FilesSource("orders", in, v1.FormatJSON, diffColumns...).
			EditSource("orders", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = ptr[int32](1) }).
			Join(v1.Join{Type: v1.JoinLeftOuter, Keys: qt.Keys("id", "cid"), Static: qt.StaticFiles(customers, v1.FormatJSON, diffCustomerColumns...), RightPrefix: "c_"}).
			Aggregate("", []v1.GroupKey{qt.Key(key)}, qt.Agg("orders", v1.AggCount, "")).OutputMode(v1.OutputUpdate).
			ConsoleSink().AvailableNow().
			Edit(func(s *v1.StreamingQuerySpec) {
				s.Runtime.Spark = &v1.SparkRuntime{Conf: map[string]string{"spark.sql.streaming.noDataMicroBatches.enabled": "false"}}
			}).Obj()
	}
	loc := filepath.Join(dir, "rebuilt", "ck")
	if out := runSparkAt(t, ctx, runner, query("c_tier"), loc); len(out) != 1 {
		t.Fatalf("the old query ran batches %v, want 0", slices.Sorted(mapsKeys(out)))
	}
	writeFileAt(t, filepath.Join(in, "part-1.json"), diffInput[1], base.Add(time.Minute))
	want := runOracleConsole(t, query("c_name"), filepath.Join(dir, "uninterrupted", "ck"))
	writeFileAt(t, filepath.Join(customers, "part-1.json"), "{\"cid\":\"b1\",\"name\":\"Bob New\",\"tier\":8,\"since\":null}\n", base.Add(time.Minute))

	q := newSparkQuery(t, runner, query("c_name"), loc, nil)
	if _, err := q.Rebuild(ctx, engine.RebuildOptions{Reason: "key-columns"}); err != nil {
		t.Fatalf("Rebuild: %v\n%s", err, sparkLogTail(q))
	}
	got := runSparkAt(t, ctx, runner, query("c_name"), loc)
	if len(afterBatch(want, 0)[1]) == 0 {
		t.Fatalf("the uninterrupted run wrote nothing in batch 1: %v", want)
	}
	if diff := cmp.Diff(afterBatch(want, 0), got); diff != "" {
		t.Errorf("batch 1 after the rebuild differs from an uninterrupted run that joined the first snapshot (-want +got):\n%s", diff)
	}
}
