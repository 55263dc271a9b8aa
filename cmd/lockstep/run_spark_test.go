package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
)

// TestRunSpark: `lockstep run --runtime spark` runs a query file written for the built-in
// engine on Spark with the same progress lines and exit codes; the checkpoint then refuses
// the built-in engine (exit 3) and `lockstep plan` names the runtime rule, and a second
// Spark run resumes after the committed batch.
func TestRunSpark(t *testing.T) {
	sparktest.Runner(t)
	f := newRunFixture(t, goodOrders)
	ckpt := filepath.Join(f.dir, "ckpt")
	spec := f.spec(t, "orders", "fail")
	_, stderr, code := runCommand(t, "run", "--runtime", "spark", "-f", spec, "--checkpoint", ckpt)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	containsAll(t, "output", stderr, "lockstep: runtime spark: the Spark driver's log is "+filepath.Join(f.dir, "spark-orders.log"))
	containsAll(t, "output", stderr, goodOrdersFirstRun...)

	_, stderr, code = runCommand(t, "run", "--runtime", "lockstep", "-f", spec, "--checkpoint", ckpt)
	if code != exitRefused || !strings.Contains(stderr, "written by the spark runtime") {
		t.Errorf("--runtime lockstep on a Spark checkpoint: exit %d, want %d:\n%s", code, exitRefused, stderr)
	}
	stdout, stderr, code := runCommand(t, "plan", "-f", spec, "--checkpoint", ckpt)
	if code != exitRefused || !strings.Contains(stdout, "✗ runtime spec.runtime") {
		t.Errorf("plan of the built-in engine on a Spark checkpoint: exit %d, want %d:\n%s%s", code, exitRefused, stdout, stderr)
	}

	if stdout, stderr, code := runCommand(t, "plan", "--runtime", "spark", "-f", spec, "--checkpoint", ckpt); code != exitOK {
		t.Errorf("plan --runtime spark of the same query: exit %d, want %d:\n%s%s", code, exitOK, stdout, stderr)
	}

	_, stderr, code = runCommand(t, "run", "--runtime", "spark", "-f", spec, "--checkpoint", ckpt)
	if code != exitOK || !strings.Contains(stderr, "lockstep: resuming from batch 1 (batches up to 0 are committed)") {
		t.Errorf("second run: exit %d:\n%s", code, stderr)
	}
	if _, stderr, code := runCommand(t, "run", "--runtime", "flink", "-f", spec); code != exitInvalid {
		t.Errorf("--runtime flink: exit %d, want %d:\n%s", code, exitInvalid, stderr)
	}
}

// TestRunSparkServesMetricsAndPage runs a query on real Spark with --http: /metrics holds
// Lockstep's metrics of the batches Spark committed and, on the same port, the Spark
// driver's and executors' own metrics; the query's page, in a real browser, lists the
// batches.
func TestRunSparkServesMetricsAndPage(t *testing.T) {
	sparktest.Runner(t)
	f := newRunFixture(t, goodOrders)
	query := strings.NewReplacer("%NAME%", "orders", "%IN%", f.in, "%OUT%", f.out, "%POLICY%", "fail",
		"spec:\n", "spec:\n  runtime: {spark: {}}\n", "{availableNow: true}", "{processingTime: 500ms}").Replace(ordersQuery)
	run := startRun(t, query)
	run.scrapeUntil(t, 1)
	for i, data := range []string{`{"id":"d","amount":3}`, `{"id":"e","amount":4}`} {
		if err := os.WriteFile(filepath.Join(f.in, fmt.Sprintf("more-%d.json", i)), []byte(data+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		run.scrapeUntil(t, i+2)
	}
	// The driver's metrics system and the executors' heartbeats report on their own clock.
	var fams map[string]*dto.MetricFamily
	for {
		fams = run.scrape(t)
		if value(t, fams, "lockstep_spark_metrics_up", nil) == 1 && hasPrefix(fams, "metrics_executor_") &&
			hasPrefix(fams, "metrics_spark_driver_spark_streaming_") {
			break
		}
		time.Sleep(200 * time.Millisecond) // a poll: the test's timeout bounds it
	}
	labels := map[string]string{"namespace": "shop", "query": "orders"}
	if n := value(t, fams, "lockstep_batches_committed_total", labels); n < 3 {
		t.Errorf("lockstep_batches_committed_total = %v, want at least 3", n)
	}
	if n := value(t, fams, "lockstep_input_rows_total", map[string]string{"source": "orders"}); n != 5 {
		t.Errorf("lockstep_input_rows_total = %v, want 5", n)
	}
	if n := value(t, fams, "lockstep_output_rows_total", nil); n != 4 {
		t.Errorf("lockstep_output_rows_total = %v, want 4", n)
	}
	for _, name := range []string{"lockstep_batch_duration_seconds", "lockstep_query_info", "metrics_spark_driver_BlockManager_memory_maxMem_MB_Number",
		"metrics_spark_driver_jvm_heap_used_Value", "metrics_executor_memoryUsed_bytes"} {
		if fams[name] == nil {
			t.Errorf("/metrics has no %s", name)
		}
	}
	if m := metric(t, fams, "metrics_executor_memoryUsed_bytes", map[string]string{"executor_id": "driver", "query": "orders"}); m == nil {
		t.Errorf("no executor metrics of the driver for the query")
	}

	dom := pageDOM(t, run.url+"/", "spark-run-page")
	run.stop()
	for _, want := range []string{`<h1 id="query">shop/orders</h1>`, `data-live="true"`, "processingTime=500ms", `href="/metrics"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if rows := regexp.MustCompile(`<tr data-batch="(\d+)">`).FindAllStringSubmatch(dom, -1); len(rows) < 3 {
		t.Errorf("the page lists %d batches, want at least 3", len(rows))
	}
	if !strings.Contains(svgOf(t, dom, "rates"), "<circle") {
		t.Errorf("the rates chart draws no point")
	}
}

// hasPrefix says whether a family's name starts with prefix.
func hasPrefix(fams map[string]*dto.MetricFamily, prefix string) bool {
	for name := range fams {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}
