package controller_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-dev/lockstep/controller"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

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
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, fam := range fams {
		if fam.GetName() != "lockstep_controller_queries" {
			continue
		}
		for _, m := range fam.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	// No controller runs here: neither query has a phase yet.
	want := map[string]float64{"Unknown": 2, "Pending": 0, "Running": 0}
	for phase, n := range want {
		if got[phase] != n {
			t.Errorf("lockstep_controller_queries{phase=%q} = %v, want %v (all: %v)", phase, got[phase], n, got)
		}
	}
}
