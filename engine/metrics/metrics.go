package metrics

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine"
)

var (
	_ engine.IdleObserver  = (*Metrics)(nil)
	_ engine.StoreObserver = (*Metrics)(nil)
)

// Prefix starts every metric name this package exports.
const Prefix = "lockstep_"

// durationBuckets spans a few milliseconds (an empty local batch) to minutes
// (a large batch on S3), in seconds.
var durationBuckets = prometheus.ExponentialBuckets(0.005, 2.5, 12)

// storeBuckets spans a local file (well under a millisecond) to an S3 request
// retried for a minute, in seconds.
var storeBuckets = prometheus.ExponentialBuckets(0.0005, 2.5, 14)

// Metrics holds one query's metrics. Its Observer methods are called from the
// engine's goroutine; Handler and Gather may be called concurrently. A scrape
// sees whole batches: it never sees a batch's row counts without its duration.
type Metrics struct {
	// mu is held by an observer method while it records, and by Gather, so
	// that a scrape is consistent with some batch's progress.
	mu  sync.Mutex
	reg *prometheus.Registry
	// extra are WithGatherer's gatherers.
	extra []prometheus.Gatherer

	info                 *prometheus.GaugeVec
	committed, replayed  prometheus.Counter
	lastBatch, lastTime  prometheus.Gauge
	idle                 prometheus.Counter
	inputRows, malformed *prometheus.CounterVec
	outputRows           prometheus.Counter
	duration             prometheus.Histogram
	phase                *prometheus.HistogramVec
	lag, lagSeconds      *prometheus.GaugeVec
	partLag, partLagSecs *prometheus.GaugeVec
	watermark            prometheus.Gauge
	stateRows, stateMem  *prometheus.GaugeVec
	stateDropped         *prometheus.CounterVec
	stateCommit          *prometheus.HistogramVec
	s3RetriesBy          *prometheus.CounterVec
	s3Uncertain          prometheus.Counter
	// The checkpoint store's operations are recorded as they happen, from
	// any goroutine, without mu: a scrape may see an operation of a batch
	// before the batch.
	storeOps               *prometheus.HistogramVec
	storeRetries, storeErr *prometheus.CounterVec

	catalog []Desc
}

// Desc describes one metric of the catalog.
type Desc struct {
	// Name is the metric's name; a histogram's series add _bucket, _sum
	// and _count to it.
	Name string
	Type dto.MetricType
	Help string
	// Labels are the metric's own labels, besides namespace and query.
	Labels []string
}

// Option configures New.
type Option func(*settings)

type settings struct {
	process bool
	extra   []prometheus.Gatherer
}

// WithProcessCollectors adds the Go runtime and process collectors (go_*,
// process_*) to the registry, as a pod's /metrics usually has. Off by default
// so that tests and `lockstep ui` export only the query's metrics.
func WithProcessCollectors() Option { return func(s *settings) { s.process = true } }

// WithGatherer adds g's metrics to every Gather (and so to Handler's pages), gathered
// after the query's own and outside the lock that keeps those consistent: a Spark driver's
// metrics (engine/spark.Metrics). An error of g fails the scrape, so g should report what
// it cannot read as a metric instead.
func WithGatherer(g prometheus.Gatherer) Option {
	return func(s *settings) { s.extra = append(s.extra, g) }
}

// New returns the metrics of the query namespace/name on a registry of their
// own; namespace and name become the labels namespace and query of every
// metric.
func New(namespace, name string, opts ...Option) *Metrics {
	var s settings
	for _, o := range opts {
		o(&s)
	}
	reg := prometheus.NewRegistry()
	if s.process {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	var catalog []Desc
	f := factory{reg: prometheus.WrapRegistererWith(prometheus.Labels{"namespace": namespace, "query": name}, reg), catalog: &catalog}
	m := &Metrics{
		reg:   reg,
		extra: s.extra,
		info: f.gaugeVec("query_info", "The running query: its checkpoint's query id, delivery guarantee and trigger; always 1.",
			"query_id", "guarantee", "trigger"),
		committed: f.counter("batches_committed_total", "Batches committed by this process."),
		replayed: f.counter("batches_replayed_total",
			"Committed batches that re-ran a batch an earlier run planned but did not commit, with its logged offsets."),
		lastBatch:  f.gauge("last_committed_batch", "The id of the newest batch this process committed."),
		lastTime:   f.gauge("last_commit_timestamp_seconds", "The timestamp of the newest committed batch, in Unix seconds."),
		idle:       f.counter("idle_triggers_total", "Triggers that found no new data in any source and so ran no batch."),
		inputRows:  f.counterVec("input_rows_total", "Rows read from the source.", "source"),
		malformed:  f.counterVec("malformed_rows_total", "Records of the source skipped or dead-lettered by its onMalformed policy.", "source"),
		outputRows: f.counter("output_rows_total", "Rows handed to the sink."),
		duration: f.histogram(prometheus.HistogramOpts{Name: "batch_duration_seconds",
			Help: "A batch's time from planning to the commit entry (the progress' triggerExecution).", Buckets: durationBuckets}),
		phase: f.histogramVec(prometheus.HistogramOpts{Name: "batch_phase_duration_seconds",
			Help:    "A batch's time per phase (the progress' durationMs keys: latestOffset, walCommit, getBatch, transform, addBatch, commitOffsets).",
			Buckets: durationBuckets}, "phase"),
		lag: f.gaugeVec("source_lag_records",
			"Records the source held beyond the batch's end offset when the batch was planned; absent when the source cannot tell.", "source"),
		lagSeconds: f.gaugeVec("source_lag_seconds",
			"How old, at the batch's timestamp, the newest record read up to the batch's end was, where records remained beyond it (0 when none did); the largest over the source's partitions; absent when the source cannot tell.", "source"),
		partLag: f.gaugeVec("source_partition_lag_records",
			"Records a partition of the source (Kafka) held beyond the batch's end offset when the batch was planned.", "source", "topic", "partition"),
		partLagSecs: f.gaugeVec("source_partition_lag_seconds",
			"How old, at the batch's timestamp, the newest record read from the partition up to the batch's end was (its Kafka timestamp), where records remained beyond it; 0 when none did.",
			"source", "topic", "partition"),
		watermark: f.gauge("watermark_seconds", "The batch's event-time watermark in Unix seconds; 0 when the query has none."),
		stateRows: f.gaugeVec("state_rows", "Keys in the stateful operator's state after the batch.", "operator"),
		stateMem:  f.gaugeVec("state_memory_bytes", "Estimated memory used by the stateful operator's state.", "operator"),
		stateDropped: f.counterVec("state_rows_dropped_by_watermark_total",
			"Input rows the stateful operator dropped as later than the watermark.", "operator"),
		stateCommit: f.histogramVec(prometheus.HistogramOpts{Name: "state_commit_duration_seconds",
			Help: "Time to write a batch's state files, per stateful operator.", Buckets: durationBuckets}, "operator"),
		s3RetriesBy: f.counterVec("s3_retries_total",
			"S3 requests retried, by operation (get, create, put, list, delete), over the checkpoint, the sources and the sink.", "operation"),
		s3Uncertain: f.counter("s3_uncertain_writes_total",
			"S3 creates whose outcome was unknown (a lost reply, a timeout) and that were resolved by reading the object back."),
		storeOps: f.histogramVec(prometheus.HistogramOpts{Name: "checkpoint_operation_duration_seconds",
			Help:    "Operations on the checkpoint's store (logs, state files, sources' files) by operation: get, create, put, list, delete; retries included.",
			Buckets: storeBuckets}, "operation"),
		storeRetries: f.counterVec("checkpoint_operation_retries_total",
			"Requests retried by operations on the checkpoint's store, by operation (S3 only; a local folder retries nothing).", "operation"),
		storeErr: f.counterVec("checkpoint_operation_errors_total",
			"Operations on the checkpoint's store that failed (a missing object or a lost create race is not a failure), by operation.", "operation"),
	}
	m.catalog = catalog
	for _, op := range engine.StoreOps() {
		// Present at 0, so that rate() sees the first failure.
		m.storeRetries.WithLabelValues(op)
		m.storeErr.WithLabelValues(op)
	}
	return m
}

// Catalog describes every metric the package registers (not the Go and
// process collectors), in the order of the package documentation.
func (m *Metrics) Catalog() []Desc { return slices.Clone(m.catalog) }

// Registry returns the registry holding the query's metrics, to register more
// collectors on. Gather it through Metrics.Gather, which is consistent.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Gather gathers the registry between two batches, then WithGatherer's gatherers.
func (m *Metrics) Gather() ([]*dto.MetricFamily, error) {
	if len(m.extra) == 0 {
		return m.gatherOwn()
	}
	return append(prometheus.Gatherers{prometheus.GathererFunc(m.gatherOwn)}, m.extra...).Gather()
}

func (m *Metrics) gatherOwn() ([]*dto.MetricFamily, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reg.Gather()
}

// Handler serves the metrics in the Prometheus text format (or OpenMetrics,
// when the scraper asks for it).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// Started records the run's identity in lockstep_query_info.
func (m *Metrics) Started(s engine.Start) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.info.Reset()
	m.info.WithLabelValues(s.QueryID, string(s.Guarantee.Level), s.Trigger).Set(1)
	if s.LastCommitted >= 0 {
		m.lastBatch.Set(float64(s.LastCommitted))
	}
}

// Committed adds a committed batch.
func (m *Metrics) Committed(p engine.Progress) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.committed.Inc()
	if p.Replay {
		m.replayed.Inc()
	}
	m.lastBatch.Set(float64(p.Batch))
	if !p.Timestamp.IsZero() {
		m.lastTime.Set(float64(p.Timestamp.UnixMilli()) / 1e3)
	}
	for _, s := range p.Sources {
		m.inputRows.WithLabelValues(s.Name).Add(float64(s.NumInputRows))
		m.malformed.WithLabelValues(s.Name).Add(float64(s.NumMalformedRows))
		if s.Lag != nil {
			m.lag.WithLabelValues(s.Name).Set(float64(*s.Lag))
		}
		if s.LagMs != nil {
			m.lagSeconds.WithLabelValues(s.Name).Set(seconds(*s.LagMs))
		}
		m.partitions(s)
	}
	m.outputRows.Add(float64(p.NumOutputRows))
	m.duration.Observe(p.Duration.Seconds())
	for phase, ms := range p.DurationMs {
		if phase == checkpoint.DurationTotal {
			continue // that is lockstep_batch_duration_seconds
		}
		m.phase.WithLabelValues(phase).Observe(seconds(ms))
	}
	m.watermark.Set(float64(p.WatermarkMs) / 1e3)
	for _, op := range p.StateOperators {
		m.stateRows.WithLabelValues(op.Operator).Set(float64(op.NumRowsTotal))
		m.stateMem.WithLabelValues(op.Operator).Set(float64(op.MemoryUsedBytes))
		m.stateDropped.WithLabelValues(op.Operator).Add(float64(op.NumRowsDroppedByWatermark))
		m.stateCommit.WithLabelValues(op.Operator).Observe(seconds(op.CommitTimeMs))
	}
	if p.S3 != nil {
		for op, n := range p.S3.Retries {
			m.s3RetriesBy.WithLabelValues(op).Add(float64(n))
		}
		m.s3Uncertain.Add(float64(p.S3.UncertainWrites))
	}
}

// partitions sets the lag of the source's partitions, forgetting those the
// source no longer reads. A batch that does not know its partitions (a
// replay) leaves the last values.
func (m *Metrics) partitions(s engine.SourceProgress) {
	if s.Partitions == nil {
		return
	}
	m.partLag.DeletePartialMatch(prometheus.Labels{"source": s.Name})
	m.partLagSecs.DeletePartialMatch(prometheus.Labels{"source": s.Name})
	for _, p := range s.Partitions {
		part := strconv.Itoa(int(p.Partition))
		m.partLag.WithLabelValues(s.Name, p.Topic, part).Set(float64(p.Lag))
		if p.LagMs != nil {
			m.partLagSecs.WithLabelValues(s.Name, p.Topic, part).Set(seconds(*p.LagMs))
		}
	}
}

// StoreOperation records an operation on the checkpoint's store.
func (m *Metrics) StoreOperation(op engine.StoreOperation) {
	m.storeOps.WithLabelValues(op.Op).Observe(op.Duration.Seconds())
	if op.Retries > 0 {
		m.storeRetries.WithLabelValues(op.Op).Add(float64(op.Retries))
	}
	if op.Failed {
		m.storeErr.WithLabelValues(op.Op).Inc()
	}
}

// Idle counts a trigger that found no new data.
func (m *Metrics) Idle(time.Time) { m.idle.Inc() } // one counter: consistent alone

func seconds(ms int64) float64 { return float64(ms) / 1e3 }

// factory registers metrics named Prefix+name on one registerer and
// describes them in catalog.
type factory struct {
	reg     prometheus.Registerer
	catalog *[]Desc
}

func (f factory) register(c prometheus.Collector, name, help string, typ dto.MetricType, labels []string) {
	f.reg.MustRegister(c)
	*f.catalog = append(*f.catalog, Desc{Name: Prefix + name, Type: typ, Help: help, Labels: labels})
}

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: Prefix + name, Help: help})
	f.register(c, name, help, dto.MetricType_COUNTER, nil)
	return c
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + name, Help: help}, labels)
	f.register(c, name, help, dto.MetricType_COUNTER, labels)
	return c
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: Prefix + name, Help: help})
	f.register(g, name, help, dto.MetricType_GAUGE, nil)
	return g
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Prefix + name, Help: help}, labels)
	f.register(g, name, help, dto.MetricType_GAUGE, labels)
	return g
}

func (f factory) histogram(o prometheus.HistogramOpts) prometheus.Histogram {
	name := o.Name
	o.Name = Prefix + o.Name
	h := prometheus.NewHistogram(o)
	f.register(h, name, o.Help, dto.MetricType_HISTOGRAM, nil)
	return h
}

func (f factory) histogramVec(o prometheus.HistogramOpts, labels ...string) *prometheus.HistogramVec {
	name := o.Name
	o.Name = Prefix + o.Name
	h := prometheus.NewHistogramVec(o, labels)
	f.register(h, name, o.Help, dto.MetricType_HISTOGRAM, labels)
	return h
}
