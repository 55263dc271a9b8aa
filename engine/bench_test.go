package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/metrics"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// batchSizes are the rows per batch the throughput benchmarks run at.
var batchSizes = []int{1_000, 100_000}

// benchRun runs obj with the default trigger on a fake clock; each call of
// the returned function lets one batch run (prepare is called first, with
// the timer stopped) and returns its progress.
func benchRun(b *testing.B, obj *v1.StreamingQuery, opts ...engine.Option) (batch func(prepare func()) engine.Progress) {
	b.Helper()
	return benchRunObserved(b, obj, nil, opts...)
}

// benchRunObserved is benchRun with another observer beside the benchmark's (nil for none).
func benchRunObserved(b *testing.B, obj *v1.StreamingQuery, also *metrics.Metrics, opts ...engine.Option) (batch func(prepare func()) engine.Progress) {
	b.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	rec := enginetest.NewRecorder()
	var obs engine.Observer = rec
	if also != nil {
		obs = withMetrics{rec, also}
	}
	opts = append(opts, engine.WithClock(clk), engine.WithObserver(obs), engine.WithIdlePoll(time.Second), engine.WithStdout(io.Discard))
	q, err := engine.New(obj, enginetest.Registry(b), opts...)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := q.Run(context.Background())
		done <- err
	}()
	b.Cleanup(func() {
		q.Stop()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
	first := true
	return func(prepare func()) engine.Progress {
		b.StopTimer()
		if prepare != nil {
			prepare()
		}
		b.StartTimer()
		if !first {
			enginetest.Step(b, clk, time.Second, time.Minute)
		}
		first = false
		return rec.Next(b, time.Minute)
	}
}

// report adds rows/s, ns/row (wall) and cpu-ns/row (user+system CPU of the
// whole process) over rows processed since began.
func report(b *testing.B, rows int64, cpuBegan time.Duration) {
	if rows == 0 {
		return
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rows), "ns/row")
	b.ReportMetric(float64((enginetest.CPU(false)-cpuBegan).Nanoseconds())/float64(rows), "cpu-ns/row")
}

// BenchmarkFilesToFiles runs batches of a files→files query: JSON lines in
// (one new file per batch), a filter and a projection, Parquet out, local
// checkpoint.
func BenchmarkFilesToFiles(b *testing.B) {
	for _, n := range batchSizes {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			in := filepath.Join(dir, "in")
			if err := os.MkdirAll(in, 0o755); err != nil {
				b.Fatal(err)
			}
			var data bytes.Buffer
			for i := range n {
				fmt.Fprintf(&data, `{"id":"o-%d","country":"de","amount":%d.25,"qty":%d}`+"\n", i, i%100-10, i%7+1)
			}
			files := 0
			addFile := func() {
				// Write beside the folder and rename into it, as producers of a
				// files source must: the source may list the folder at any time.
				name := fmt.Sprintf("f-%06d.json", files)
				files++
				tmp := filepath.Join(dir, name)
				if err := os.WriteFile(tmp, data.Bytes(), 0o644); err != nil {
					b.Fatal(err)
				}
				if err := os.Rename(tmp, filepath.Join(in, name)); err != nil {
					b.Fatal(err)
				}
			}
			addFile()
			obj := querytest.Make("bench", "default").
				FilesSource("orders", in, v1.FormatJSON,
					querytest.Col("id", v1.TypeString), querytest.Col("country", v1.TypeString),
					querytest.Col("amount", v1.TypeDouble), querytest.Col("qty", v1.TypeLong)).
				Filter("amount > 0.0").
				Select(querytest.As("id", "id"), querytest.As("country", "country.upperAscii()"), querytest.As("total", "amount * double(qty)")).
				FilesSink(filepath.Join(dir, "out"), v1.FormatParquet).
				Checkpoint(filepath.Join(dir, "ckpt")).Obj()
			b.ReportAllocs()
			batch := benchRun(b, obj)
			batch(nil) // the first batch, before timing
			b.ResetTimer()
			began := enginetest.CPU(false)
			var rows int64
			for b.Loop() {
				rows += batch(addFile).NumInputRows
			}
			report(b, rows, began)
		})
	}
}

// BenchmarkRateToFiles runs batches of a rate→files query: n rows a second,
// one second a batch, a projection, Parquet out, local checkpoint.
func BenchmarkRateToFiles(b *testing.B) {
	for _, n := range batchSizes {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			obj := querytest.Make("bench", "default").
				RateSource("ticks", int64(n)).
				Select(querytest.As("at", "timestamp"), querytest.As("value", "value"), querytest.As("even", "value % 2 == 0")).
				FilesSink(filepath.Join(dir, "out"), v1.FormatParquet).
				Checkpoint(filepath.Join(dir, "ckpt")).Obj()
			b.ReportAllocs()
			batch := benchRun(b, obj)
			batch(nil)
			b.ResetTimer()
			began := enginetest.CPU(false)
			var rows int64
			for b.Loop() {
				rows += batch(nil).NumInputRows
			}
			report(b, rows, began)
		})
	}
}

// BenchmarkBatchOverhead runs batches of one row (rate at 1 row a second,
// console sink to nowhere), so that a batch costs what the engine and the
// checkpoint cost: planning, offsets/N, reading, commits/N. The
// sink=files-s3 case writes the row to a files sink on the same S3 server,
// through the same S3 layer (a data file and a manifest entry a batch).
// Besides the mean it reports the median batch (p50-ms/batch).
func BenchmarkBatchOverhead(b *testing.B) {
	for _, where := range []string{"local", "s3", "s3/sink=files-s3"} {
		b.Run("checkpoint="+where, func(b *testing.B) {
			ckpt := filepath.Join(b.TempDir(), "ckpt")
			q := querytest.Make("bench", "default").RateSource("ticks", 1)
			if where != "local" {
				s := testenv.S3(b)
				s.Setenv(b)
				ckpt = "s3://" + s.Bucket + "/ckpt"
				if strings.HasSuffix(where, "files-s3") {
					q = q.FilesSink("s3://"+s.Bucket+"/out", v1.FormatJSON)
				}
			}
			if !strings.HasSuffix(where, "files-s3") {
				q = q.ConsoleSink()
			}
			obj := q.Checkpoint(ckpt).Obj()
			b.ReportAllocs()
			batch := benchRun(b, obj)
			batch(nil)
			var durations []time.Duration
			b.ResetTimer()
			for b.Loop() {
				began := time.Now()
				batch(nil)
				durations = append(durations, time.Since(began))
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/batch")
			slices.Sort(durations)
			b.ReportMetric(float64(durations[len(durations)/2].Microseconds())/1000, "p50-ms/batch")
		})
	}
}

// withMetrics tells the recorder and the metrics of a run, as `lockstep run --http` does.
type withMetrics struct {
	rec *enginetest.Recorder
	m   *metrics.Metrics
}

func (w withMetrics) Started(s engine.Start) { w.rec.Started(s); w.m.Started(s) }

func (w withMetrics) Committed(p engine.Progress) { w.m.Committed(p); w.rec.Committed(p) }

func (w withMetrics) StoreOperation(op engine.StoreOperation) { w.m.StoreOperation(op) }

// BenchmarkMetricsOverhead runs the same batches with and without the Prometheus metrics
// observing them (metrics=on also scrapes the registry after each batch, as a Prometheus
// polling each batch would): a windowed count over a rate source of 1,000 rows a second, a
// batch a second, console sink to nowhere, local checkpoint. The difference between the two
// is the metrics' cost per batch: recording the progress, the checkpoint operations, and a
// scrape.
func BenchmarkMetricsOverhead(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("metrics=%v", map[bool]string{false: "off", true: "on"}[on]), func(b *testing.B) {
			dir := b.TempDir()
			obj := querytest.Make("bench", "default").
				RateSource("ticks", 1000).
				Watermark("timestamp", "1s").
				Aggregate("per-second", []v1.GroupKey{querytest.Window("timestamp", "1s")},
					querytest.Agg("ticks", v1.AggCount, "")).
				ConsoleSink().OutputMode(v1.OutputUpdate).
				Checkpoint(filepath.Join(dir, "ckpt")).Obj()
			var m *metrics.Metrics
			if on {
				m = metrics.New("default", "bench")
			}
			b.ReportAllocs()
			batch := benchRunObserved(b, obj, m)
			batch(nil)
			b.ResetTimer()
			began := enginetest.CPU(false)
			for b.Loop() {
				batch(nil)
				if m != nil {
					if _, err := m.Gather(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/batch")
			b.ReportMetric(float64((enginetest.CPU(false)-began).Microseconds())/float64(b.N), "cpu-µs/batch")
		})
	}
}

// BenchmarkMetricsPerBatch is the metrics' own work for one batch, without the batch: record
// the progress of a batch of a Kafka source with 12 partitions and one stateful operator,
// the 8 checkpoint operations of such a batch, and serve a scrape in the text format.
func BenchmarkMetricsPerBatch(b *testing.B) {
	m := metrics.New("default", "bench")
	lag := int64(120)
	src := engine.SourceProgress{Name: "orders", NumInputRows: 1000, Lag: &lag, LagMs: &lag}
	for p := range int32(12) {
		src.Partitions = append(src.Partitions, engine.PartitionLag{Topic: "orders", Partition: p, Lag: 10, LagMs: &lag})
	}
	p := engine.Progress{Batch: 1, Timestamp: time.Now(), NumInputRows: 1000, NumOutputRows: 10, Duration: 40 * time.Millisecond,
		DurationMs:  map[string]int64{"latestOffset": 2, "walCommit": 5, "getBatch": 10, "transform": 8, "addBatch": 9, "commitOffsets": 5, "triggerExecution": 40},
		WatermarkMs: time.Now().UnixMilli(), Sources: []engine.SourceProgress{src},
		StateOperators: []engine.StateOperatorProgress{{Operator: "per-second", NumRowsTotal: 3, MemoryUsedBytes: 4096, CommitTimeMs: 3}}}
	ops := []string{"create", "get", "put", "put", "get", "list", "create", "put"}
	record := func() {
		m.Committed(p)
		for _, op := range ops {
			m.StoreOperation(engine.StoreOperation{Op: op, Duration: time.Millisecond})
		}
	}
	h := m.Handler()
	b.Run("record", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			record()
		}
	})
	b.Run("scrape", func(b *testing.B) {
		record()
		b.ReportAllocs()
		for b.Loop() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		b.ReportMetric(float64(strings.Count(w.Body.String(), "\n")), "lines/scrape")
	})
}
