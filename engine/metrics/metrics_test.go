package metrics_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/metrics"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// series returns the samples of the metric name, keyed by their labels other than namespace
// and query ("" for none, else "k=v,k=v" sorted by name).
func series(t *testing.T, m *metrics.Metrics, name string) map[string]*dto.Metric {
	t.Helper()
	fams, err := m.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.Metric{}
	for _, fam := range fams {
		if fam.GetName() != name {
			continue
		}
		for _, s := range fam.GetMetric() {
			key := ""
			for _, l := range s.GetLabel() {
				if l.GetName() == "namespace" || l.GetName() == "query" {
					continue
				}
				if key != "" {
					key += ","
				}
				key += l.GetName() + "=" + l.GetValue()
			}
			got[key] = s
		}
	}
	return got
}

// TestCheckpointOperations: a run on an S3 checkpoint behind a proxy that answers the first two
// creates of offsets entries with SlowDown records every store operation in the latency
// histogram by operation, and the two retries against create.
func TestCheckpointOperations(t *testing.T) {
	srv := testenv.S3(t)
	proxy := testenv.NewS3Proxy(t, srv, 1)
	in := t.TempDir()
	for i := range 3 {
		data := fmt.Appendf(nil, `{"id":"o%d","amount":%d.5}`+"\n", i, i)
		if err := os.WriteFile(filepath.Join(in, fmt.Sprintf("part-%d.json", i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	one := int32(1)
	obj := querytest.Make("orders", "metrics-test").
		FilesSource("orders", in, v1.FormatJSON, querytest.Col("id", v1.TypeString), querytest.Col("amount", v1.TypeDouble)).
		EditSource("orders", func(s *v1.Source) { s.Files.MaxFilesPerTrigger = &one }).
		FilesSink(t.TempDir(), v1.FormatJSON).AvailableNow().Obj()
	m := metrics.New("metrics-test", "orders")
	p := proxy.Server()
	q, err := engine.New(obj, enginetest.Registry(t),
		engine.WithCheckpoint("s3://"+p.Bucket+"/"+t.Name()),
		engine.WithS3(s3.WithEndpoint(p.URL), s3.WithRegion(p.Region), s3.WithCredentials(p.AccessKey, p.SecretKey, ""),
			s3.WithRetries(5, time.Millisecond)),
		engine.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	proxy.Inject(testenv.Rule{Kind: testenv.SlowDown, Match: testenv.Match{Method: "PUT", Key: "offsets/", IfNoneMatch: true}, Times: 2})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sum, err := q.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Batches != 3 {
		t.Fatalf("%d batches, want 3 (one file each)", sum.Batches)
	}
	ops := series(t, m, "lockstep_checkpoint_operation_duration_seconds")
	// Each batch creates offsets/N and commits/N; the run also reads the logs and lists them.
	if c := ops["operation=create"].GetHistogram().GetSampleCount(); c < 6 {
		t.Errorf("create operations observed = %d, want at least 6 (offsets and commits of 3 batches); all: %v", c, ops)
	}
	for _, op := range []string{"get", "list"} {
		if ops["operation="+op].GetHistogram().GetSampleCount() == 0 {
			t.Errorf("no %s operation observed; all: %v", op, ops)
		}
	}
	retries := series(t, m, "lockstep_checkpoint_operation_retries_total")
	if got := retries["operation=create"].GetCounter().GetValue(); got != 2 {
		t.Errorf("lockstep_checkpoint_operation_retries_total{operation=create} = %v, want 2", got)
	}
	if got := retries["operation=get"].GetCounter().GetValue(); got != 0 {
		t.Errorf("lockstep_checkpoint_operation_retries_total{operation=get} = %v, want 0", got)
	}
	if got := series(t, m, "lockstep_s3_retries_total")["operation=create"].GetCounter().GetValue(); got != 2 {
		t.Errorf("lockstep_s3_retries_total{operation=create} = %v, want 2", got)
	}
	for op, s := range series(t, m, "lockstep_checkpoint_operation_errors_total") {
		if v := s.GetCounter().GetValue(); v != 0 {
			t.Errorf("lockstep_checkpoint_operation_errors_total{%s} = %v, want 0 (a retried create succeeded)", op, v)
		}
	}
}

// TestPartitionLag: the lag of a partitioned source is exported per partition; a batch that
// reads fewer partitions removes the others' series, and a replayed batch (which does not know
// its partitions) keeps the last values.
func TestPartitionLag(t *testing.T) {
	m := metrics.New("ns", "q")
	ms := func(v int64) *int64 { return &v }
	m.Committed(engine.Progress{Batch: 0, Sources: []engine.SourceProgress{{Name: "orders", Lag: ms(12), LagMs: ms(4000),
		Partitions: []engine.PartitionLag{
			{Topic: "orders", Partition: 0, Lag: 10, LagMs: ms(4000)},
			{Topic: "orders", Partition: 1, Lag: 2, LagMs: ms(1500)},
			{Topic: "orders", Partition: 2, Lag: 0, LagMs: ms(0)},
		}}}})
	check := func(when string, name string, want map[string]float64) {
		t.Helper()
		got := map[string]float64{}
		for k, s := range series(t, m, name) {
			got[k] = s.GetGauge().GetValue()
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %s = %v, want %v", when, name, got, want)
		}
	}
	check("batch 0", "lockstep_source_partition_lag_records", map[string]float64{
		"partition=0,source=orders,topic=orders": 10, "partition=1,source=orders,topic=orders": 2, "partition=2,source=orders,topic=orders": 0})
	check("batch 0", "lockstep_source_partition_lag_seconds", map[string]float64{
		"partition=0,source=orders,topic=orders": 4, "partition=1,source=orders,topic=orders": 1.5, "partition=2,source=orders,topic=orders": 0})
	check("batch 0", "lockstep_source_lag_seconds", map[string]float64{"source=orders": 4})
	check("batch 0", "lockstep_source_lag_records", map[string]float64{"source=orders": 12})

	m.Committed(engine.Progress{Batch: 1, Sources: []engine.SourceProgress{{Name: "orders", Lag: ms(3), LagMs: nil,
		Partitions: []engine.PartitionLag{{Topic: "orders", Partition: 0, Lag: 3}}}}})
	check("batch 1", "lockstep_source_partition_lag_records", map[string]float64{"partition=0,source=orders,topic=orders": 3})
	check("batch 1", "lockstep_source_partition_lag_seconds", map[string]float64{})

	m.Committed(engine.Progress{Batch: 1, Replay: true, Sources: []engine.SourceProgress{{Name: "orders"}}})
	check("replay", "lockstep_source_partition_lag_records", map[string]float64{"partition=0,source=orders,topic=orders": 3})
}
