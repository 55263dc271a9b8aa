package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/lockstep-dev/lockstep/engine"
)

// windowedTicks is a rate source counted per one-second window: input rows, state
// rows and a watermark, with no service to run.
const windowedTicks = `apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: ticks-per-second, namespace: metrics-test}
spec:
  sources:
  - name: ticks
    rate: {rowsPerSecond: 200}
  transform:
  - watermark: {column: timestamp, delay: 1s}
  - aggregate:
      name: per-second
      groupBy: [{window: {column: timestamp, duration: 1s}}]
      aggregates: [{name: ticks, function: count}]
  sink: {console: {}}
  outputMode: update
  trigger: {processingTime: 100ms}
`

// lockedBuffer is a bytes.Buffer that goroutines (a run, the manager) write while the test
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// liveRun is `lockstep run --http 127.0.0.1:0 --progress json` running in the test.
type liveRun struct {
	url        string // http://host:port
	checkpoint string // the checkpoint's folder
	stderr     *lockedBuffer
	stop       func() // cancels the run and waits for it to return
}

var pageLine = regexp.MustCompile(`query page on (http://[^/ ]+)/`)

// startRun runs the query in yaml with its checkpoint in a temporary folder and
// waits until its HTTP server listens.
func startRun(t *testing.T, yaml string) *liveRun {
	t.Helper()
	dir := t.TempDir()
	file := writeFile(t, filepath.Join(dir, "query.yaml"), yaml)
	ctx, cancel := context.WithCancel(t.Context())
	r := &liveRun{stderr: &lockedBuffer{}, checkpoint: filepath.Join(dir, "checkpoint")}
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = runQuery(ctx, file, r.checkpoint, progressJSON, "127.0.0.1:0", io.Discard, r.stderr)
	}()
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(r.stop)
	for r.url == "" {
		if m := pageLine.FindStringSubmatch(r.stderr.String()); m != nil {
			r.url = m[1]
			break
		}
		select {
		case <-done:
			t.Fatalf("the run ended before serving: %v\n%s", runErr, r.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return r
}

// get fetches path from the run's server.
func (r *liveRun) get(t *testing.T, path string) []byte {
	t.Helper()
	resp, err := http.Get(r.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", path, resp.Status, b)
	}
	return b
}

// scrape parses /metrics with the Prometheus text parser.
func (r *liveRun) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(r.get(t, "/metrics")))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// scrapeUntil scrapes until the run has committed at least n batches.
func (r *liveRun) scrapeUntil(t *testing.T, n int) map[string]*dto.MetricFamily {
	t.Helper()
	for {
		fams := r.scrape(t)
		if value(t, fams, "lockstep_batches_committed_total", nil) >= float64(n) {
			return fams
		}
		time.Sleep(50 * time.Millisecond) // a poll, not a deadline: the test's timeout bounds it
	}
}

// progressLines returns the committed batches' progress from the JSON output.
func progressLines(t *testing.T, stderr string) []engine.Progress {
	t.Helper()
	var out []engine.Progress
	sc := bufio.NewScanner(strings.NewReader(stderr))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			Event string `json:"event"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Event != "progress" {
			continue
		}
		var p engine.Progress
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// metric finds the sample of family name whose labels include labels.
func metric(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	t.Fatalf("no %s with labels %v", name, labels)
	return nil
}

// value is a counter's or gauge's value.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	m := metric(t, fams, name, labels)
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	t.Fatalf("%s is neither a counter nor a gauge", name)
	return 0
}

// TestRunServesMetrics scrapes /metrics of a real run and checks the values
// against the progress of the same batches.
func TestRunServesMetrics(t *testing.T) {
	run := startRun(t, windowedTicks)
	fams := run.scrapeUntil(t, 3)
	run.stop()

	n := value(t, fams, "lockstep_batches_committed_total", nil)
	last := int64(value(t, fams, "lockstep_last_committed_batch", nil))
	var batches []engine.Progress
	for _, p := range progressLines(t, run.stderr.String()) {
		if p.Batch <= last {
			batches = append(batches, p)
		}
	}
	if float64(len(batches)) != n {
		t.Fatalf("the scrape counted %v batches up to batch %d; the progress has %d", n, last, len(batches))
	}
	var in, out int64
	var ms float64
	for _, p := range batches {
		in += p.NumInputRows
		out += p.NumOutputRows
		ms += float64(p.DurationMs["triggerExecution"])
	}
	end := batches[len(batches)-1]
	query := map[string]string{"namespace": "metrics-test", "query": "ticks-per-second"}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for k, v := range query {
			m[k] = v
		}
		return m
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"lockstep_input_rows_total", with("source", "ticks"), float64(in)},
		{"lockstep_malformed_rows_total", with("source", "ticks"), 0},
		{"lockstep_output_rows_total", query, float64(out)},
		{"lockstep_batches_replayed_total", query, 0},
		{"lockstep_watermark_seconds", query, float64(end.WatermarkMs) / 1e3},
		{"lockstep_state_rows", with("operator", "per-second"), float64(end.StateOperators[0].NumRowsTotal)},
		{"lockstep_state_memory_bytes", with("operator", "per-second"), float64(end.StateOperators[0].MemoryUsedBytes)},
		{"lockstep_last_commit_timestamp_seconds", query, float64(end.Timestamp.UnixMilli()) / 1e3},
	} {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v (from the progress)", c.name, c.labels, got, c.want)
		}
	}
	if in == 0 {
		t.Errorf("no input rows in %d batches", len(batches))
	}

	h := metric(t, fams, "lockstep_batch_duration_seconds", query).GetHistogram()
	if float64(h.GetSampleCount()) != n {
		t.Errorf("batch duration histogram counts %d batches, want %v", h.GetSampleCount(), n)
	}
	// The histogram observes the exact duration, the progress its milliseconds.
	if diff := h.GetSampleSum()*1e3 - ms; diff < 0 || diff > float64(len(batches)) {
		t.Errorf("batch duration sum = %vs, progress says %vms", h.GetSampleSum(), ms)
	}
	for _, phase := range []string{"latestOffset", "walCommit", "getBatch", "addBatch", "commitOffsets"} {
		ph := metric(t, fams, "lockstep_batch_phase_duration_seconds", with("phase", phase)).GetHistogram()
		var want float64
		for _, p := range batches {
			want += float64(p.DurationMs[phase])
		}
		if float64(ph.GetSampleCount()) != n || math.Abs(ph.GetSampleSum()*1e3-want) > 1e-6 {
			t.Errorf("phase %s: %d samples summing %vs, want %v summing %vms", phase, ph.GetSampleCount(), ph.GetSampleSum(), n, want)
		}
	}
	if _, ok := fams["lockstep_batch_phase_duration_seconds"]; ok {
		for _, m := range fams["lockstep_batch_phase_duration_seconds"].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "phase" && l.GetValue() == "triggerExecution" {
					t.Error("the whole batch is a phase too; it is lockstep_batch_duration_seconds")
				}
			}
		}
	}

	info := metric(t, fams, "lockstep_query_info", query)
	labels := map[string]string{}
	for _, l := range info.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["query_id"] != end.QueryID || labels["guarantee"] != "none" || labels["trigger"] != "processingTime=100ms" {
		t.Errorf("lockstep_query_info labels = %v, want query_id %s, guarantee none, trigger processingTime=100ms", labels, end.QueryID)
	}
	for name, f := range fams {
		if !strings.HasPrefix(name, "lockstep_") {
			t.Errorf("metric %s: `lockstep run` exports only the query's metrics", name)
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "batch" || l.GetName() == "batch_id" {
					t.Errorf("%s has a batch label: unbounded cardinality", name)
				}
			}
		}
	}
}
