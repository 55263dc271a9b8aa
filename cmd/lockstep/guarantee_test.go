package main

import (
	"testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/compat"
)

// TestPlannerAndEngineAgreeOnGuarantees holds the two places that name a
// sink's delivery guarantee to one answer: compat (what lockstep plan, the
// webhook, the status and Terraform report before a run) and the sink's own
// declaration in the engine's registry (what a run reports).
func TestPlannerAndEngineAgreeOnGuarantees(t *testing.T) {
	reg, err := newRegistry()
	if err != nil {
		t.Fatal(err)
	}
	sinks := map[v1.SinkKind]v1.Sink{
		v1.SinkFiles:    {Files: &v1.FilesSink{Path: "/out", Format: v1.FormatJSON}},
		v1.SinkConsole:  {Console: &v1.ConsoleSink{}},
		v1.SinkKafka:    {Kafka: &v1.KafkaSink{BootstrapServers: []string{"k:9092"}, Topic: "t"}},
		v1.SinkWebhook:  {Webhook: &v1.WebhookSink{URL: "http://h/"}},
		v1.SinkDelta:    {Delta: &v1.DeltaSink{Path: "/table"}},
		v1.SinkPostgres: {Postgres: &v1.PostgresSink{Connection: v1.PostgresConnection{DSNEnv: "PG_DSN"}, Table: "t"}},
	}
	for _, kind := range reg.SinkKinds() {
		sink, ok := sinks[kind]
		if !ok {
			t.Errorf("sink %s is registered but this test has no spec for it", kind)
			continue
		}
		spec, _ := reg.SinkSpec(kind)
		planned, _ := compat.GuaranteeOf(&v1.StreamingQuerySpec{
			Sources: []v1.Source{{Name: "r", Rate: &v1.RateSource{RowsPerSecond: 1}}},
			Sink:    sink,
		})
		if string(planned) != string(spec.Guarantee.Level) {
			t.Errorf("sink %s: compat.GuaranteeOf = %s, the engine's registry declares %s", kind, planned, spec.Guarantee.Level)
		}
	}
}
