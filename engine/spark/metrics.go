package spark

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"
)

// Paths of the driver's UI that serve Spark's metrics in Prometheus' text format.
const (
	// DriverMetricsPath is Spark's PrometheusServlet: the driver's metrics system (JVM,
	// block manager, DAG scheduler, the streaming query's rates and latency), as
	// metrics_spark_driver_* series.
	DriverMetricsPath = "/metrics/prometheus"
	// ExecutorMetricsPath is Spark's PrometheusResource: each executor's metrics, the
	// driver's included, as the executors' heartbeats report them (metrics_executor_*
	// with an executor_id label).
	ExecutorMetricsPath = "/metrics/executors/prometheus"
)

// scrapeTimeout bounds one read of the driver's metrics, so that a busy driver slows a
// scrape of the engine's port by at most that.
const scrapeTimeout = 5 * time.Second

// MetricsConf returns the Spark settings that make the driver serve its own and its
// executors' metrics in Prometheus' text format on its UI at 127.0.0.1:port, and nowhere
// else (the runner's environment sets SPARK_LOCAL_IP, which the UI binds to). The
// streaming query's own metrics are on (spark.sql.streaming.metricsEnabled), the metrics'
// namespace is "spark" instead of the application id, so that names stay the same across
// restarts, and the UI keeps a hundred jobs, stages and batches instead of a thousand.
func MetricsConf(port int) map[string]string {
	return map[string]string{
		"spark.ui.enabled":                                  "true",
		"spark.ui.port":                                     strconv.Itoa(port),
		"spark.ui.killEnabled":                              "false",
		"spark.ui.showConsoleProgress":                      "false",
		"spark.ui.prometheus.enabled":                       "true",
		"spark.metrics.namespace":                           "spark",
		"spark.metrics.conf.*.sink.prometheusServlet.class": "org.apache.spark.metrics.sink.PrometheusServlet",
		"spark.metrics.conf.*.sink.prometheusServlet.path":  DriverMetricsPath,
		"spark.metrics.conf.driver.source.jvm.class":        "org.apache.spark.metrics.source.JvmSource",
		"spark.sql.streaming.metricsEnabled":                "true",
		// The UI keeps what it shows in the driver's heap; a streaming query runs a job per
		// batch, so keep a few batches' worth instead of Spark's 1000 jobs and stages.
		"spark.ui.retainedJobs":                          "100",
		"spark.ui.retainedStages":                        "100",
		"spark.sql.ui.retainedExecutions":                "100",
		"spark.sql.streaming.ui.retainedProgressUpdates": "100",
	}
}

// FreePort returns a TCP port of 127.0.0.1 that nothing listens on now, for the driver's UI.
// Another process may take it before Spark does; Spark then moves to the next port
// (spark.port.maxRetries) and the metrics are missing, never wrong.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a port for the Spark UI: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Metrics gathers the Spark metrics a driver serves on its UI (MetricsConf) for the
// engine's /metrics, with the labels of Lockstep's own metrics added. It never fails: while
// the driver is not serving (starting, stopped, busy past scrapeTimeout) it gathers only
// lockstep_spark_metrics_up at 0. It is safe for concurrent use.
type Metrics struct {
	base   string
	labels []*dto.LabelPair
	client *http.Client
}

var _ prometheus.Gatherer = (*Metrics)(nil)

// NewMetrics returns the gatherer of the metrics of the driver whose UI listens on
// 127.0.0.1:port; namespace and name are the query's, the labels namespace and query of
// every series.
func NewMetrics(port int, namespace, name string) *Metrics {
	return &Metrics{
		base: "http://127.0.0.1:" + strconv.Itoa(port),
		labels: []*dto.LabelPair{
			{Name: proto.String("namespace"), Value: proto.String(namespace)},
			{Name: proto.String("query"), Value: proto.String(name)},
		},
		client: &http.Client{Timeout: scrapeTimeout},
	}
}

// Gather reads the driver's and the executors' metrics.
func (m *Metrics) Gather() ([]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	var out []*dto.MetricFamily
	up := 1.0
	seen := map[string]bool{}
	for _, path := range []string{DriverMetricsPath, ExecutorMetricsPath} {
		fams, err := m.read(ctx, path)
		if err != nil {
			up = 0
			continue
		}
		for _, f := range fams {
			if seen[f.GetName()] {
				continue // a family both paths serve (spark_info): the first is kept
			}
			seen[f.GetName()] = true
			out = append(out, f)
		}
	}
	out = append(out, &dto.MetricFamily{
		Name: proto.String("lockstep_spark_metrics_up"),
		Help: proto.String("1 when the Spark driver served its and its executors' metrics to this scrape, else 0 (starting, stopped, or slower than 5s)."),
		Type: dto.MetricType_GAUGE.Enum(),
		Metric: []*dto.Metric{{
			Label: slices.Clone(m.labels),
			Gauge: &dto.Gauge{Value: proto.Float64(up)},
		}},
	})
	return out, nil
}

// read reads one of the driver's metrics pages.
func (m *Metrics) read(ctx context.Context, path string) ([]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", path, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	return m.parse(body)
}

// parse reads Spark's text format into families with the query's labels. Spark writes
// samples only (no TYPE lines: the families are untyped), and a gauge may hold a value that
// is not a number; such lines, and samples that repeat a series, are left out rather than
// failing the scrape.
func (m *Metrics) parse(body []byte) ([]*dto.MetricFamily, error) {
	var clean bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "#") {
			i := strings.LastIndexAny(line, " \t")
			if i < 0 {
				continue
			}
			if _, err := strconv.ParseFloat(line[i+1:], 64); err != nil {
				continue
			}
		}
		clean.WriteString(line)
		clean.WriteByte('\n')
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(&clean)
	if err != nil {
		return nil, err
	}
	out := make([]*dto.MetricFamily, 0, len(fams))
	for _, f := range fams {
		series := map[string]bool{}
		kept := f.Metric[:0]
		for _, mt := range f.Metric {
			mt.Label = m.withLabels(mt.Label)
			key := fmt.Sprint(mt.Label)
			if series[key] {
				continue
			}
			series[key] = true
			kept = append(kept, mt)
		}
		f.Metric = kept
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, nil
}

// withLabels adds the query's labels to a series that does not carry them already.
func (m *Metrics) withLabels(labels []*dto.LabelPair) []*dto.LabelPair {
	for _, l := range m.labels {
		if !slices.ContainsFunc(labels, func(p *dto.LabelPair) bool { return p.GetName() == l.GetName() }) {
			labels = append(labels, l)
		}
	}
	slices.SortFunc(labels, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
	return labels
}
