package spark_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kgo"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/engine/sink"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestDifferentialKafka: a Kafka source (the real broker) read by both runtimes, filtered and
// projected with the Kafka metadata columns, into files: equal multisets.
func TestDifferentialKafka(t *testing.T) {
	runner := testenv.SparkRunner(t)
	ctx := context.Background()
	brokers, topic := testenv.KafkaTopic(t, "spark-diff")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range 12 {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i%3)),
			Value: []byte(fmt.Sprintf(`{"id":"o%d","qty":%d,"ts":"2024-01-01T00:00:%02dZ"}`, i, i, i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	dir := t.TempDir()
	query := func(out, ck string) *v1.StreamingQuery {
		return qt.Make("kafka-diff", "diff").
			KafkaSource("orders", brokers[0], topic, v1.Column{Name: "id", Type: v1.TypeString}, v1.Column{Name: "qty", Type: v1.TypeLong}, v1.Column{Name: "ts", Type: v1.TypeTimestamp}).
			EditSource("orders", func(s *v1.Source) { s.Kafka.StartingOffsets = v1.OffsetsEarliest }).
			Filter("qty % 2 == 0").
			Select(v1.Projection{Name: "id", Expr: "id"}, v1.Projection{Name: "key", Expr: "_key"}, v1.Projection{Name: "partition", Expr: "_partition"},
				v1.Projection{Name: "offset", Expr: "_offset"}, v1.Projection{Name: "ts", Expr: "ts"}).
			FilesSink(out, v1.FormatJSON).AvailableNow().Checkpoint(ck).Obj()
	}
	reg := engine.NewRegistry()
	if err := reg.RegisterSource(v1.SourceKafka, kafka.SourceSpec(), kafka.NewSource); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterSink(v1.SinkFiles, sink.FilesSpec(), sink.NewFiles); err != nil {
		t.Fatal(err)
	}
	obj := query(filepath.Join(dir, "out-lockstep"), filepath.Join(dir, "ck-lockstep"))
	q, err := engine.New(obj, reg, engine.WithCheckpoint(obj.Spec.Checkpoint.Location))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Run(ctx); err != nil {
		t.Fatalf("run on the built-in engine: %v", err)
	}
	runSpark(t, ctx, runner, query(filepath.Join(dir, "out-spark"), filepath.Join(dir, "ck-spark")))
	want := readOutput(t, ctx, filepath.Join(dir, "out-lockstep"), false)
	got := readOutput(t, ctx, filepath.Join(dir, "out-spark"), false)
	if len(want) != 6 {
		t.Fatalf("the built-in engine wrote %d rows, want 6", len(want))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("output on spark differs from the built-in engine's (-lockstep +spark):\n%s", diff)
	}
}
