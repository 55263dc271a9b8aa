package controller

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/compat"
)

// listBudget bounds the list of StreamingQueries a scrape makes (from the cache).
const listBudget = 5 * time.Second

// Metrics are the controller's own Prometheus metrics, beside controller-runtime's:
//
//	lockstep_controller_queries{phase}                              StreamingQueries by status.phase, at scrape time
//	lockstep_controller_reconcile_errors_total{namespace,query}     reconciles that returned an error
//	lockstep_controller_webhook_verdicts_total{rule,verdict}        compat findings at admission: allowed, warning, rejected
//
// A nil *Metrics records nothing.
type Metrics struct {
	reconcileErrors *prometheus.CounterVec
	verdicts        *prometheus.CounterVec
}

// NewMetrics registers the metrics on reg (the manager's: controller-runtime's
// metrics.Registry); reader lists the queries counted by phase at each scrape.
func NewMetrics(reg prometheus.Registerer, reader client.Reader) (*Metrics, error) {
	m := &Metrics{
		reconcileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lockstep_controller_reconcile_errors_total",
			Help: "Reconciles of a StreamingQuery that returned an error (and so were retried)."}, []string{"namespace", "query"}),
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lockstep_controller_webhook_verdicts_total",
			Help: "Findings of the compat check at admission, by rule and verdict (allowed, warning, rejected); a change with no finding counts as rule none, allowed."},
			[]string{"rule", "verdict"}),
	}
	for _, c := range []prometheus.Collector{m.reconcileErrors, m.verdicts, &queriesByPhase{reader: reader}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) reconcileFailed(namespace, name string) {
	if m != nil {
		m.reconcileErrors.WithLabelValues(namespace, name).Inc()
	}
}

func (m *Metrics) verdict(v compat.Verdict) {
	if m == nil {
		return
	}
	if len(v.Findings) == 0 {
		m.verdicts.WithLabelValues("none", "allowed").Inc()
	}
	for _, f := range v.Findings {
		verdict := "allowed"
		switch f.Severity {
		case compat.Rejected:
			verdict = "rejected"
		case compat.Warning:
			verdict = "warning"
		}
		m.verdicts.WithLabelValues(f.Rule, verdict).Inc()
	}
}

// queriesByPhase counts the StreamingQueries by phase when scraped, so that a deleted query
// leaves no stale series behind.
type queriesByPhase struct{ reader client.Reader }

var queriesDesc = prometheus.NewDesc("lockstep_controller_queries",
	"StreamingQueries by status.phase (Unknown before the controller has set one).", []string{"phase"}, nil)

func (q *queriesByPhase) Describe(ch chan<- *prometheus.Desc) { ch <- queriesDesc }

func (q *queriesByPhase) Collect(ch chan<- prometheus.Metric) {
	// A scrape carries no context; the budget keeps a slow cache from holding it.
	ctx, cancel := context.WithTimeout(context.Background(), listBudget)
	defer cancel()
	var list v1.StreamingQueryList
	if err := q.reader.List(ctx, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(queriesDesc, err)
		return
	}
	counts := map[string]float64{}
	for _, phase := range []v1.Phase{v1.PhasePending, v1.PhaseRunning} {
		counts[string(phase)] = 0 // the usual phases are present even at 0
	}
	for _, item := range list.Items {
		phase := string(item.Status.Phase)
		if phase == "" {
			phase = "Unknown"
		}
		counts[phase]++
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(queriesDesc, prometheus.GaugeValue, n, phase)
	}
}
