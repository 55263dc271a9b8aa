package delta_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// produce writes n JSON orders to topic and returns the rows the query
// below outputs for them.
func produce(t *testing.T, brokers []string, topic string, from, n int) []engine.Row {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var want []engine.Row
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("k-%05d", i)
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(id),
			Value: fmt.Appendf(nil, `{"id":%q,"country":"de","amount":%d}`, id, i)})
		want = append(want, engine.Row{id, "DE", float64(i)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return want
}

// A kafka → delta query crashed at every phase of a batch, then restarted
// with more records produced, leaves exactly the records in the table.
func TestKafkaToDeltaCrashAtEveryPhase(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			for _, phase := range engine.Phases() {
				t.Run(string(phase), func(t *testing.T) {
					brokers := testenv.Kafka(t)
					p := newPipeline(t, kind)
					q := querytest.Make("kafka-to-delta", "shop").
						KafkaSource("orders", brokers[0], "orders",
							querytest.Col("id", v1.TypeString), querytest.Col("country", v1.TypeString), querytest.Col("amount", v1.TypeDouble)).
						EditSource("orders", func(s *v1.Source) {
							s.Kafka.StartingOffsets = "earliest"
							s.Kafka.MaxOffsetsPerTrigger = new(int64(7))
						}).
						Select(querytest.As("id", "id"), querytest.As("country", "country.upperAscii()"), querytest.As("amount", "amount")).
						DeltaSink(p.table).
						Checkpoint(p.ckptA).
						AvailableNow().Obj()
					want := produce(t, brokers, "orders", 0, 30)
					p.crash(t, q, phase, 1)
					p.run(t, q)
					want = append(want, produce(t, brokers, "orders", 30, 12)...)
					sum := p.run(t, q)
					enginetest.SortRows(want)
					p.checkContent(t, want, sum)
				})
			}
		})
	}
}
