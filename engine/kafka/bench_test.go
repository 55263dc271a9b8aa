package kafka_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/internal/gctune"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// The kafka→kafka benchmark (docs/benchmarks.md):
//
//	go test ./engine/kafka -run '^$' -bench KafkaToKafka -benchtime 1x [-kafka.records 1000000]
var (
	benchRecords    = flag.Int("kafka.records", 1_000_000, "records the kafka→kafka benchmark moves through each pipeline")
	benchRate       = flag.Int("kafka.latency-rate", 5_000, "records per second produced while latency is measured")
	benchLatencyFor = flag.Duration("kafka.latency-for", 5*time.Second, "how long latency is measured")
	benchMaxOffsets = flag.Int64("kafka.max-offsets", 100_000, "maxOffsetsPerTrigger of the lockstep query in the throughput run")
	benchRounds     = flag.Int("kafka.rounds", 3, "rounds of the two pipelines, alternating, that the kafka→kafka benchmarks take the medians of")
	benchSelect     = flag.Bool("kafka.select", false, "add a select of the record's own columns, so that the query writes the values it reads (without the metadata columns)")
)

const benchPartitions = 4

// benchRuns numbers the topics of runs: the testing package may run a
// benchmark function more than once on one broker.
var benchRuns atomic.Int64

// benchBroker starts an Apache Kafka broker of the benchmark's own, so that
// the benchmark's CPU figures are the pipeline's alone, and returns its
// address and process id.
func benchBroker(b *testing.B) ([]string, int) {
	b.Helper()
	k := testenv.KafkaProcess(b, fmt.Sprintf("num.partitions=%d", benchPartitions))
	return []string{k.Addr}, k.PID()
}

// processCPU returns the user and system CPU time process pid used so far
// (from /proc, in clock ticks of 10 ms), 0 when it cannot be read.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis; utime and stime
	// are the 14th and 15th of the line.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// benchValue is an input record: {"id":"o-000000042","amount":12.5,"sent":<unix ns>}.
func benchValue(buf []byte, i int, sent int64) []byte {
	buf = append(buf, `{"id":"o-`...)
	buf = fmt.Appendf(buf, "%09d", i)
	buf = append(buf, `","amount":`...)
	buf = strconv.AppendFloat(buf, float64(i%1000)/4, 'g', -1, 64)
	buf = append(buf, `,"sent":`...)
	buf = strconv.AppendInt(buf, sent, 10)
	return append(buf, '}')
}

func benchProducer(b *testing.B, brokers []string, topic string) *kgo.Client {
	return client(b, brokers, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(200_000))
}

// preload writes n records into topic, spread over its partitions.
func preload(b *testing.B, brokers []string, topic string, n int) {
	b.Helper()
	cl := benchProducer(b, brokers, topic)
	ctx := context.Background()
	var p kgo.FirstErrPromise
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Value: benchValue(nil, i, 0)}, p.Promise())
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if err := p.Err(); err != nil {
		b.Fatal(err)
	}
}

// usage is what a run cost this process, and the broker's.
type usage struct {
	wall      time.Duration
	cpu       time.Duration
	allocs    uint64
	brokerCPU time.Duration
	// faults are minor page faults: the heap growing into new memory.
	faults int64
	// peakHeap is the most heap memory live objects held during the run
	// (runtime/metrics, sampled every 5ms).
	peakHeap uint64
}

func measure(broker int, fn func()) usage {
	var ru0, ru1 syscall.Rusage
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	broker0 := processCPU(broker)
	stop := samplePeakHeap()
	began := time.Now()
	fn()
	wall := time.Since(began)
	peakHeap := stop()
	brokerCPU := processCPU(broker) - broker0
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	runtime.ReadMemStats(&ms1)
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	return usage{wall: wall, cpu: cpu, allocs: ms1.Mallocs - ms0.Mallocs, brokerCPU: brokerCPU, faults: ru1.Minflt - ru0.Minflt, peakHeap: peakHeap}
}

// samplePeakHeap samples the bytes of live heap objects until stop, which returns the
// largest sample.
func samplePeakHeap() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	done, result := make(chan struct{}), make(chan uint64)
	go func() {
		var peak uint64
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-done:
				result <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); return <-result }
}

// pipeline is one way to move records from a topic to another.
type pipeline interface {
	// drain moves the first n records of in to out and returns when they
	// are acknowledged.
	drain(b *testing.B, brokers []string, in, out string, n int)
	// follow moves records from in to out until stop is closed; ready is
	// closed once it listens.
	follow(b *testing.B, brokers []string, in, out string, ready, stop chan struct{})
}

// plainLoop is the ceiling: franz-go's consumer and producer, records passed
// through as they are.
type plainLoop struct{}

func (plainLoop) client(b *testing.B, brokers []string, in, out string) *kgo.Client {
	return client(b, brokers, kgo.ConsumeTopics(in), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DefaultProduceTopic(out), kgo.MaxBufferedRecords(200_000))
}

func (l plainLoop) drain(b *testing.B, brokers []string, in, out string, n int) {
	cl := l.client(b, brokers, in, out)
	ctx := context.Background()
	var p kgo.FirstErrPromise
	for count := 0; count < n; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			b.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			cl.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, p.Promise())
			count++
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if err := p.Err(); err != nil {
		b.Fatal(err)
	}
}

func (l plainLoop) follow(b *testing.B, brokers []string, in, out string, ready, stop chan struct{}) {
	cl := l.client(b, brokers, in, out)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	close(ready)
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { cl.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, nil) })
	}
}

// lockstepQuery is the query under test: json in, one filter, json out.
type lockstepQuery struct{}

func (lockstepQuery) query(brokers []string, in, out string, availableNow bool) *v1.StreamingQuery {
	q := querytest.Make("bench", "test").
		KafkaSource("in", brokers[0], in, querytest.Col("id", v1.TypeString), querytest.Col("amount", v1.TypeDouble), querytest.Col("sent", v1.TypeLong)).
		EditSource("in", func(s *v1.Source) {
			s.Kafka.BootstrapServers, s.Kafka.StartingOffsets = brokers, v1.OffsetsEarliest
			if availableNow {
				s.Kafka.MaxOffsetsPerTrigger = benchMaxOffsets
			}
		}).
		Filter("amount >= 0.0")
	if *benchSelect {
		q = q.SelectColumns("id", "amount", "sent")
	}
	q = q.KafkaSink(brokers[0], out).
		Edit(func(s *v1.StreamingQuerySpec) { s.Sink.Kafka.BootstrapServers = brokers })
	if availableNow {
		q = q.AvailableNow()
	}
	return q.Obj()
}

func (l lockstepQuery) drain(b *testing.B, brokers []string, in, out string, n int) {
	phases := &phaseObserver{ms: map[string]int64{}}
	began := time.Now()
	q, err := engine.New(l.query(brokers, in, out, true), registry(b), engine.WithCheckpoint(b.TempDir()),
		engine.WithObserver(phases))
	if err != nil {
		b.Fatal(err)
	}
	sum, err := q.Run(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("lockstep: %d ms in all, %d ms to the first batch; the batches' phases (ms, summed): %v",
		time.Since(began).Milliseconds(), phases.start.Sub(began).Milliseconds(), phases.ms)
	if sum.NumOutputRows != int64(n) {
		b.Fatalf("the query wrote %d rows, want %d", sum.NumOutputRows, n)
	}
}

func (l lockstepQuery) follow(b *testing.B, brokers []string, in, out string, ready, stop chan struct{}) {
	q, err := engine.New(l.query(brokers, in, out, false), registry(b), engine.WithCheckpoint(b.TempDir()),
		engine.WithObserver(readyObserver{ready}))
	if err != nil {
		b.Fatal(err)
	}
	go func() { <-stop; q.Stop() }()
	if _, err := q.Run(context.Background()); err != nil {
		b.Error(err)
	}
}

// phaseObserver sums the batches' phase durations, for the benchmark's log.
type phaseObserver struct {
	start time.Time
	ms    map[string]int64
}

func (o *phaseObserver) Started(engine.Start) { o.start = time.Now() }
func (o *phaseObserver) Committed(p engine.Progress) {
	for k, v := range p.DurationMs {
		o.ms[k] += v
	}
}

type readyObserver struct{ ready chan struct{} }

func (o readyObserver) Started(engine.Start)      { close(o.ready) }
func (o readyObserver) Committed(engine.Progress) {}

// latencies produces records at the configured rate into a fresh topic
// while p follows it, and returns the end-to-end latency of every record:
// from just before it is produced to when a consumer of the output gets it.
func latencies(b *testing.B, brokers []string, p pipeline, name string) []time.Duration {
	b.Helper()
	run := benchRuns.Add(1)
	in, out := fmt.Sprintf("%s-lat-in-%d", name, run), fmt.Sprintf("%s-lat-out-%d", name, run)
	createTopic(b, brokers, in, benchPartitions, nil)
	createTopic(b, brokers, out, benchPartitions, nil)
	ready, stop, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { defer close(done); p.follow(b, brokers, in, out, ready, stop) }()
	<-ready

	cons := client(b, brokers, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	var mu sync.Mutex
	var lat []time.Duration
	cctx, ccancel := context.WithCancel(context.Background())
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for cctx.Err() == nil {
			fs := cons.PollFetches(cctx)
			now := time.Now().UnixNano()
			fs.EachRecord(func(r *kgo.Record) {
				if sent := sentOf(r.Value); sent > 0 {
					mu.Lock()
					lat = append(lat, time.Duration(now-sent))
					mu.Unlock()
				}
			})
		}
	}()

	prod := benchProducer(b, brokers, in)
	ctx := context.Background()
	const tick = 10 * time.Millisecond
	perTick := max(1, *benchRate*int(tick)/int(time.Second))
	total := 0
	ticker := time.NewTicker(tick)
	// A second of warm-up records (sent 0, not measured): connections,
	// producer ids and metadata are in place before the measurement.
	for end := time.Now().Add(time.Second); time.Now().Before(end); <-ticker.C {
		for range perTick {
			prod.Produce(ctx, &kgo.Record{Value: benchValue(nil, 0, 0)}, nil)
		}
	}
	for end := time.Now().Add(*benchLatencyFor); time.Now().Before(end); <-ticker.C {
		for range perTick {
			prod.Produce(ctx, &kgo.Record{Value: benchValue(nil, total, time.Now().UnixNano())}, nil)
			total++
		}
	}
	ticker.Stop()
	if err := prod.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	for {
		mu.Lock()
		n := len(lat)
		mu.Unlock()
		if n >= total || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	ccancel()
	<-consumed
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(lat) < total {
		b.Fatalf("%s: %d of %d records came through", name, len(lat), total)
	}
	return lat
}

// sentOf reads "sent" from a value.
func sentOf(v []byte) int64 {
	i := bytes.Index(v, []byte(`"sent":`))
	if i < 0 {
		return 0
	}
	v = v[i+len(`"sent":`):]
	j := 0
	for j < len(v) && v[j] >= '0' && v[j] <= '9' {
		j++
	}
	n, _ := strconv.ParseInt(string(v[:j]), 10, 64)
	return n
}

func percentile(d []time.Duration, p float64) time.Duration {
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// BenchmarkKafkaToKafka moves the same records through the plain franz-go
// loop (the ceiling) and through a lockstep query, in one run, and reports
// records/s, CPU and allocations per record of this process (the broker runs
// in its own), the ratio to the ceiling, and p50/p99 end-to-end latency with
// the default trigger.
func BenchmarkKafkaToKafka(b *testing.B) {
	brokers, broker := benchBroker(b)
	n := *benchRecords
	createTopic(b, brokers, "in", benchPartitions, nil)
	preload(b, brokers, "in", n)
	againstTheLoop(b, brokers, broker, "in", "", n, lockstepQuery{}, true)
}

// againstTheLoop moves the n records of topic in through the plain franz-go loop (the ceiling)
// and through lockstep, alternating, -kafka.rounds times in one run, each run into a new topic
// named after prefix. Each half then reports the median of its rounds' records/s, CPU,
// allocations and page faults per record of this process, the broker's CPU per record and peak
// heap, and lockstep the medians of the rounds' ratios of the rate, the rate per CPU-second and
// the heap to the ceiling's (each round's halves ran side by side, under the same load); with
// latency, p50/p99 end-to-end latency.
func againstTheLoop(b *testing.B, brokers []string, broker int, in, prefix string, n int, lockstep pipeline, latency bool) {
	halves := []struct {
		name string
		p    pipeline
	}{{"ceiling", plainLoop{}}, {"lockstep", lockstep}}
	// Both halves run with the garbage collector's settings of lockstep run and lockstep
	// engine (internal/gctune), so that the ratio compares the work, not the collector's
	// settings.
	restore := gctune.Apply(gctune.Defaults(gctune.OSEnv))
	runs := make([][]usage, len(halves))
	for round := range *benchRounds {
		for i, h := range halves {
			out := fmt.Sprintf("%s%s-out-%d", prefix, h.name, benchRuns.Add(1))
			createTopic(b, brokers, out, benchPartitions, nil)
			u := measure(broker, func() { h.p.drain(b, brokers, in, out, n) })
			runs[i] = append(runs[i], u)
			b.Logf("round %d, %s: %.0f records/s, %d cpu-ns/record, %d broker-cpu-ns/record, peak heap %d MB", round+1, h.name,
				float64(n)/u.wall.Seconds(), u.cpu.Nanoseconds()/int64(n), u.brokerCPU.Nanoseconds()/int64(n), u.peakHeap>>20)
		}
	}
	restore()
	records := float64(n)
	rate := func(u usage) float64 { return records / u.wall.Seconds() }
	// perCPU: records per CPU-second of this process and the broker together; on a loaded
	// machine the rate moves with the neighbours, the CPU each record costs much less.
	perCPU := func(u usage) float64 { return records / (u.cpu + u.brokerCPU).Seconds() }
	heapMB := func(u usage) float64 { return float64(u.peakHeap) / (1 << 20) }
	for i, h := range halves {
		b.Run(h.name, func(b *testing.B) {
			rs := runs[i]
			b.ReportMetric(median(rs, rate), "records/s")
			b.ReportMetric(median(rs, func(u usage) float64 { return float64(u.cpu.Nanoseconds()) / records }), "cpu-ns/record")
			b.ReportMetric(median(rs, func(u usage) float64 { return float64(u.allocs) / records }), "allocs/record")
			// The broker's CPU for the pipeline's requests: on a machine where both pipelines
			// are CPU-bound, the ratio of the rates is about the ratio of this process's and
			// the broker's CPU.
			b.ReportMetric(median(rs, func(u usage) float64 { return float64(u.brokerCPU.Nanoseconds()) / records }), "broker-cpu-ns/record")
			b.ReportMetric(median(rs, func(u usage) float64 { return float64(u.faults) * 1000 / records }), "page-faults/1k-records")
			b.ReportMetric(median(rs, heapMB), "peak-heap-MB")
			if i > 0 {
				ratio := func(f func(usage) float64) float64 {
					r := make([]float64, len(rs))
					for k, u := range rs {
						r[k] = f(u) / f(runs[0][k])
					}
					return medianOf(r)
				}
				b.ReportMetric(ratio(rate), "x-ceiling")
				b.ReportMetric(ratio(perCPU), "x-ceiling-cpu")
				b.ReportMetric(ratio(heapMB), "x-ceiling-heap")
			}
			if latency && b.N == 1 {
				b.Cleanup(gctune.Apply(gctune.Defaults(gctune.OSEnv)))
				lat := latencies(b, brokers, h.p, h.name)
				b.ReportMetric(float64(percentile(lat, 0.50).Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
			}
		})
	}
}

// median is the median of f over the runs.
func median(runs []usage, f func(usage) float64) float64 {
	v := make([]float64, len(runs))
	for i, u := range runs {
		v[i] = f(u)
	}
	return medianOf(v)
}

// medianOf is the median of v (the mean of the middle two for an even count).
func medianOf(v []float64) float64 {
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
