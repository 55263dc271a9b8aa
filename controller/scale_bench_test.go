package controller_test

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/crashtest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

var (
	scaleQueries = flag.Int("controller.queries", 1000, "queries BenchmarkThousandQueries creates")
	scaleWindow  = flag.Duration("controller.window", time.Minute, "how long BenchmarkThousandQueries counts S3 requests and reconciles once every query's status is current")
)

// BenchmarkThousandQueries runs the real controller binary (`lockstep controller`, its
// reconciler and webhooks, the default resync) against a real API server with 1,000 queries,
// each with a checkpoint on versitygw written as an engine would (no engine runs: nothing
// schedules pods here), and reports what issue 19 asks for:
//
//   - reconcile-p50-ms, reconcile-p99-ms: the StreamingQuery reconciles of the steady window,
//     from the controller's own controller_runtime_reconcile_time_seconds histogram;
//
//   - rss-MB and peak-rss-MB: the controller process's resident memory after the window, and
//     its peak;
//
//   - s3-req/query/min: requests the controller sent to S3 during the window (an S3Proxy in
//     front of versitygw counts them), per query per minute;
//
//   - admission-p50-ms, admission-p99-ms: a changed spec (the filter) judged against the real
//     checkpoint, as server-side dry runs timed by the client, 200 in a row;
//
//   - settle-s: from the first create to every query's status showing its checkpoint's batch;
//
//   - cpu-ms/reconcile, cpu-ms/admission: the controller's CPU time per reconcile of the window
//     and per admission, which a loaded machine does not inflate as it does latencies.
//
//     go test -run '^$' -bench ThousandQueries -benchtime 1x -timeout 30m ./controller/
func BenchmarkThousandQueries(b *testing.B) {
	for b.Loop() {
		thousandQueries(b, *scaleQueries, *scaleWindow)
	}
}

func thousandQueries(b *testing.B, n int, window time.Duration) {
	wh := testenv.ControlPlaneWithWebhooks(b)
	wh.Config.QPS, wh.Config.Burst = 500, 1000 // the test's own client: not what is measured
	f := newFixture(b, wh.Config)
	ctx := context.Background()

	// The store's endpoint is a proxy that counts what the controller asks of S3.
	proxy := testenv.NewS3Proxy(b, f.s3, 1)
	f.store.Spec.S3.Endpoint = proxy.Server().URL
	if err := f.c.Update(ctx, f.store); err != nil {
		b.Fatal(err)
	}

	metricsPort, err := testenv.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	ctl := startControllerProcess(b, wh, metricsPort)
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	eventuallyWithin(b, "the controller's webhooks", 2*time.Minute, time.Second, func() error {
		q := f.query("probe").Obj()
		return f.c.Create(ctx, q, client.DryRunAll)
	})

	// 1,000 queries through admission, each followed by the checkpoint its engine would write.
	began := time.Now()
	parallel(b, n, 8, func(i int) error {
		q := f.query(fmt.Sprintf("q-%04d", i)).Obj()
		if err := f.c.Create(ctx, q); err != nil {
			return err
		}
		// Committed an hour ago: idle queries, whose status the window does not change.
		f.writeCheckpoint(q, 3, 3, time.Now().Add(-time.Hour))
		return nil
	})
	eventuallyWithin(b, "every query's status to show batch 3", 15*time.Minute, time.Second, func() error {
		var list v1.StreamingQueryList
		if err := f.c.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
			return err
		}
		behind := 0
		for _, q := range list.Items {
			if c := q.Status.LatestCommittedBatch; c == nil || *c != 3 {
				behind++
			}
		}
		if behind > 0 || len(list.Items) < n {
			return fmt.Errorf("%d of %d queries behind", behind, len(list.Items))
		}
		return nil
	})
	settle := time.Since(began)

	// The steady window: every status is current; the controller only resyncs.
	before := scrape(b, metricsURL)
	requests := proxy.Requests()
	cpu0 := processCPU(b, ctl.Process.Pid)
	time.Sleep(window)
	sent := proxy.Requests() - requests
	windowCPU := processCPU(b, ctl.Process.Pid) - cpu0
	after := scrape(b, metricsURL)
	reconciles := histogramDelta(b, before, after, "controller_runtime_reconcile_time_seconds", "controller", "streamingquery")

	// Admission of a change judged against the checkpoint.
	var took []time.Duration
	cpu0 = processCPU(b, ctl.Process.Pid)
	for i := range 200 {
		q := f.get(fmt.Sprintf("q-%04d", i%n))
		q.Spec.Transform[0].Filter = "amount > 1.0"
		start := time.Now()
		if err := f.c.Update(ctx, q, client.DryRunAll); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	admissionCPU := processCPU(b, ctl.Process.Pid) - cpu0
	slices.Sort(took)

	rss, peak := processMemory(b, ctl.Process.Pid)
	b.ReportMetric(reconciles.quantile(0.50)*1000, "reconcile-p50-ms")
	b.ReportMetric(reconciles.quantile(0.99)*1000, "reconcile-p99-ms")
	b.ReportMetric(float64(reconciles.count), "reconciles")
	b.ReportMetric(rss/1e6, "rss-MB")
	b.ReportMetric(peak/1e6, "peak-rss-MB")
	b.ReportMetric(float64(sent)/float64(n)/window.Minutes(), "s3-req/query/min")
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "admission-p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "admission-p99-ms")
	b.ReportMetric(settle.Seconds(), "settle-s")
	// What the machine's load does not distort: the controller's CPU per unit of work.
	b.ReportMetric(float64(windowCPU.Microseconds())/1000/float64(max(reconciles.count, 1)), "cpu-ms/reconcile")
	b.ReportMetric(float64(admissionCPU.Microseconds())/1000/float64(len(took)), "cpu-ms/admission")
	b.ReportMetric(0, "ns/op")
}

// startControllerProcess builds cmd/lockstep and runs `lockstep controller` as the manager's
// Deployment does, serving the webhooks the control plane calls (through a reverse proxy on
// the address the test binary holds for them); it is stopped when b ends.
func startControllerProcess(b *testing.B, wh *testenv.WebhookControlPlane, metricsPort int) *exec.Cmd {
	b.Helper()
	webhookPort, err := testenv.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(wh.CAData)
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", webhookPort)})
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 64}
	stop, err := wh.Serve(rp)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stop)
	dir := b.TempDir()
	bin, err := crashtest.Build(dir)
	if err != nil {
		b.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(wh.Config, kubeconfig); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "controller",
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", metricsPort),
		"--health-probe-bind-address", "0",
		"--webhook-port", strconv.Itoa(webhookPort), "--webhook-cert-dir", wh.CertDir,
		"--engine-image", testEngineImage)
	cmd.Env = append(crashtest.Env(), "KUBECONFIG="+kubeconfig)
	logf, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = logf.Close()
		if b.Failed() {
			log, _ := os.ReadFile(logf.Name())
			b.Logf("controller log (last 4 KiB):\n%s", log[max(0, len(log)-4096):])
		}
	})
	return cmd
}

func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	return clientcmd.WriteToFile(*kc, path)
}

// parallel runs do(0..n-1) on workers goroutines and fails b with the first error.
func parallel(b *testing.B, n, workers int, do func(i int) error) {
	b.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := do(i); err != nil {
					mu.Lock()
					first = cmp.Or(first, fmt.Errorf("item %d: %w", i, err))
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}

func scrape(b *testing.B, url string) map[string]*dto.MetricFamily {
	b.Helper()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return fams
}

// buckets is a histogram's cumulative counts by upper bound.
type buckets struct {
	bounds []float64
	counts []float64
	count  uint64
}

// histogramDelta returns the observations of the histogram name with label=value between two
// scrapes.
func histogramDelta(b *testing.B, before, after map[string]*dto.MetricFamily, name, label, value string) buckets {
	b.Helper()
	find := func(fams map[string]*dto.MetricFamily) *dto.Histogram {
		fam := fams[name]
		if fam == nil {
			return nil
		}
		for _, m := range fam.Metric {
			for _, l := range m.Label {
				if l.GetName() == label && l.GetValue() == value {
					return m.Histogram
				}
			}
		}
		return nil
	}
	h1, h0 := find(after), find(before)
	if h1 == nil {
		b.Fatalf("no %s{%s=%q} in the controller's metrics", name, label, value)
	}
	var out buckets
	for i, bk := range h1.Bucket {
		c := float64(bk.GetCumulativeCount())
		if h0 != nil {
			c -= float64(h0.Bucket[i].GetCumulativeCount())
		}
		out.bounds = append(out.bounds, bk.GetUpperBound())
		out.counts = append(out.counts, c)
	}
	out.count = h1.GetSampleCount()
	if h0 != nil {
		out.count -= h0.GetSampleCount()
	}
	return out
}

// quantile interpolates linearly within the bucket holding the q-quantile, as PromQL's
// histogram_quantile does.
func (h buckets) quantile(q float64) float64 {
	if h.count == 0 {
		return math.NaN()
	}
	rank := q * float64(h.count)
	lower, below := 0.0, 0.0
	for i, c := range h.counts {
		if c >= rank {
			if c == below {
				return h.bounds[i]
			}
			return lower + (h.bounds[i]-lower)*(rank-below)/(c-below)
		}
		lower, below = h.bounds[i], c
	}
	return lower
}

// processCPU returns the user and system time a process has used, from /proc/PID/stat.
func processCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name, which is in parentheses: utime and stime are the
	// 12th and 13th of them, in clock ticks (100 a second on Linux).
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// processMemory returns a process's resident set size and its peak, in bytes.
func processMemory(b *testing.B, pid int) (rss, peak float64) {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if k == "VmRSS" {
			rss = kb * 1024
		} else {
			peak = kb * 1024
		}
	}
	return rss, peak
}
