package controller_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// scraper serves a registry over HTTP, as the manager's metrics port does, and scrapes it.
type scraper struct {
	t   *testing.T
	url string
}

func newScraper(t *testing.T, reg *prometheus.Registry) *scraper {
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return &scraper{t: t, url: srv.URL}
}

// scrape returns the values of the metric name, keyed by its labels ("k=v,k=v", sorted),
// parsed from the text format with expfmt.
func (s *scraper) scrape(name string) (map[string]float64, error) {
	resp, err := http.Get(s.url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse the scrape: %w", err)
	}
	got := map[string]float64{}
	fam, ok := fams[name]
	if !ok {
		return got, nil
	}
	for _, m := range fam.GetMetric() {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(labels)
		got[strings.Join(labels, ",")] = value(m)
	}
	return got, nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	}
	return 0
}

// TestQueriesByPhase: a scrape lists the queries from the API server and counts them by phase.
func TestQueriesByPhase(t *testing.T) {
	f := newFixture(t, testenv.ControlPlane(t))
	f.create(f.query("a").Obj())
	f.create(f.query("b").Obj())
	reg := prometheus.NewRegistry()
	// Namespaced: other tests' queries share the API server.
	if _, err := controller.NewMetrics(reg, client.NewNamespacedClient(f.c, f.ns)); err != nil {
		t.Fatal(err)
	}
	got, err := newScraper(t, reg).scrape("lockstep_controller_queries")
	if err != nil {
		t.Fatal(err)
	}
	// No controller runs here: neither query has a phase yet.
	want := map[string]float64{"phase=Unknown": 2, "phase=Pending": 0, "phase=Running": 0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("lockstep_controller_queries = %v, want %v", got, want)
	}
}

// TestControllerMetrics: with the reconciler running, the phase gauge follows the phases it
// sets (a query it runs is Pending while no engine pod is ready; one it refuses is Failed),
// and a reconcile that returns an error (a query naming a CheckpointStore that does not
// exist) is counted against its query. (The running query may count one too: a status update
// that lost a race with the controller's own write is an error, retried.)
func TestControllerMetrics(t *testing.T) {
	f := newFixture(t, testenv.ControlPlane(t))
	reg := prometheus.NewRegistry()
	m, err := controller.NewMetrics(reg, client.NewNamespacedClient(f.c, f.ns))
	if err != nil {
		t.Fatal(err)
	}
	f.startManager(nil, controller.WithMetrics(m))
	f.create(f.query("runs").Obj())
	f.create(f.query("refused").CheckpointStore("no-such-store").Obj())
	s := newScraper(t, reg)
	var phases map[types.NamespacedName]v1.Phase
	eventually(t, "both queries have a phase", func() error {
		phases = map[types.NamespacedName]v1.Phase{}
		for _, name := range []string{"runs", "refused"} {
			q := f.get(name)
			if q.Status.Phase == "" {
				return fmt.Errorf("%s has no phase yet", name)
			}
			phases[types.NamespacedName{Namespace: f.ns, Name: name}] = q.Status.Phase
		}
		return nil
	})
	eventually(t, "the gauge counts the phases", func() error {
		want := map[string]float64{"phase=Pending": 0, "phase=Running": 0}
		for _, q := range []string{"runs", "refused"} {
			want["phase="+string(f.get(q).Status.Phase)]++
		}
		got, err := s.scrape("lockstep_controller_queries")
		if err != nil {
			return err
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("lockstep_controller_queries = %v, want %v (phases %v)", got, want, phases)
		}
		return nil
	})
	eventually(t, "the refused query's reconcile errors are counted", func() error {
		got, err := s.scrape("lockstep_controller_reconcile_errors_total")
		if err != nil {
			return err
		}
		if got["namespace="+f.ns+",query=refused"] < 1 {
			return fmt.Errorf("lockstep_controller_reconcile_errors_total = %v, want query=refused at least 1", got)
		}
		return nil
	})
}

// TestWebhookVerdictMetrics: the webhook counts each admission's compat findings by rule and
// verdict, and a change with no finding as rule none.
func TestWebhookVerdictMetrics(t *testing.T) {
	wh := testenv.ControlPlaneWithWebhooks(t)
	f := newFixture(t, wh.Config)
	reg := prometheus.NewRegistry()
	m, err := controller.NewMetrics(reg, client.NewNamespacedClient(f.c, f.ns))
	if err != nil {
		t.Fatal(err)
	}
	f.startManagerWith(wh, []controller.WebhookOption{controller.WithVerdictMetrics(m)})
	f.create(f.query("orders").Obj())
	f.writeCheckpoint(f.get("orders"), 0, 0, time.Now())
	s := newScraper(t, reg)

	before, err := s.scrape("lockstep_controller_webhook_verdicts_total")
	if err != nil {
		t.Fatal(err)
	}
	// Rejected: the files source's folder changes.
	if err := f.update("orders", func(q *v1.StreamingQuery) {
		q.Spec.Sources[0].Files.Path = "s3://" + f.s3.Bucket + "/landing/other"
	}, client.DryRunAll); err == nil {
		t.Fatal("a changed source folder was admitted")
	}
	// Files to console: the sink's kind changes (allowed) and so does the guarantee (a warning).
	if err := f.update("orders", func(q *v1.StreamingQuery) { q.Spec.Sink = v1.Sink{Console: &v1.ConsoleSink{}} }, client.DryRunAll); err != nil {
		t.Fatalf("sink change = %v", err)
	}
	// No finding: a new query has no checkpoint yet.
	f.create(f.query("fresh").Obj())
	after, err := s.scrape("lockstep_controller_webhook_verdicts_total")
	if err != nil {
		t.Fatal(err)
	}
	for _, series := range []string{"rule=files-path,verdict=rejected",
		"rule=sink-kind,verdict=allowed", "rule=sink-guarantee,verdict=warning", "rule=none,verdict=allowed"} {
		if after[series] <= before[series] {
			t.Errorf("lockstep_controller_webhook_verdicts_total{%s} = %v, was %v: want it counted (all: %v)", series, after[series], before[series], after)
		}
	}
	for series, n := range after {
		if strings.Contains(series, "verdict=rejected") && series != "rule=files-path,verdict=rejected" && n > before[series] {
			t.Errorf("lockstep_controller_webhook_verdicts_total{%s} = %v: no other rule rejected these changes", series, n)
		}
	}
}
