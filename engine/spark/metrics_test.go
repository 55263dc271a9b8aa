package spark

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestMetricsGather reads what a driver's UI serves (the text of Spark 4.2's PrometheusServlet
// and PrometheusResource) into families with the query's labels, leaving out a sample that is
// not a number and one that repeats a series; a driver that does not answer is
// lockstep_spark_metrics_up 0, never an error.
func TestMetricsGather(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc(DriverMetricsPath, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`metrics_spark_driver_BlockManager_memory_maxMem_MB_Number{type="gauges"} 434
metrics_spark_driver_BlockManager_memory_maxMem_MB_Value{type="gauges"} 434
metrics_spark_driver_spark_streaming_lockstep_latency_Value{type="gauges"} 12
metrics_spark_driver_odd_Value{type="gauges"} true
metrics_spark_driver_DAGScheduler_job_allJobs_Count{type="counters"} 3
metrics_spark_driver_DAGScheduler_job_allJobs_Count{type="counters"} 3
`))
	})
	mux.HandleFunc(ExecutorMetricsPath, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`spark_info{version="4.2.0", revision="x"} 1.0
metrics_executor_memoryUsed_bytes{application_id="local-1", application_name="shop/orders", executor_id="driver"} 2048
metrics_executor_memoryUsed_bytes{application_id="local-1", application_name="shop/orders", executor_id="1"} 1024
`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)

	got := series(t, NewMetrics(p, "shop", "orders"))
	want := map[string]float64{
		`lockstep_spark_metrics_up{namespace="shop",query="orders"}`:                                                                                      1,
		`metrics_spark_driver_BlockManager_memory_maxMem_MB_Number{namespace="shop",query="orders",type="gauges"}`:                                        434,
		`metrics_spark_driver_BlockManager_memory_maxMem_MB_Value{namespace="shop",query="orders",type="gauges"}`:                                         434,
		`metrics_spark_driver_spark_streaming_lockstep_latency_Value{namespace="shop",query="orders",type="gauges"}`:                                      12,
		`metrics_spark_driver_DAGScheduler_job_allJobs_Count{namespace="shop",query="orders",type="counters"}`:                                            3,
		`spark_info{namespace="shop",query="orders",revision="x",version="4.2.0"}`:                                                                        1,
		`metrics_executor_memoryUsed_bytes{application_id="local-1",application_name="shop/orders",executor_id="driver",namespace="shop",query="orders"}`: 2048,
		`metrics_executor_memoryUsed_bytes{application_id="local-1",application_name="shop/orders",executor_id="1",namespace="shop",query="orders"}`:      1024,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Gather (-want +got):\n%s", diff)
	}

	srv.Close()
	got = series(t, NewMetrics(p, "shop", "orders"))
	if diff := cmp.Diff(map[string]float64{`lockstep_spark_metrics_up{namespace="shop",query="orders"}`: 0}, got); diff != "" {
		t.Errorf("Gather of a driver that does not answer (-want +got):\n%s", diff)
	}
}

// series gathers g through prometheus.Gatherers, as the engine's /metrics does, into
// name{labels} → value.
func series(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	fams, err := prometheus.Gatherers{g}.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			key := f.GetName() + "{"
			for i, l := range m.GetLabel() {
				if i > 0 {
					key += ","
				}
				key += l.GetName() + "=" + strconv.Quote(l.GetValue())
			}
			out[key+"}"] = value(m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	default:
		return m.GetUntyped().GetValue()
	}
}
