package kafka_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// benchAvroSchema is the Avro schema of the benchmark's input records: the JSON benchmark's
// {id, amount, sent} as another producer would register them.
const benchAvroSchema = `{"type":"record","name":"Order","namespace":"bench","fields":[` +
	`{"name":"id","type":"string"},{"name":"amount","type":"double"},{"name":"sent","type":"long"}]}`

// BenchmarkKafkaToKafkaAvro moves the same Avro records (the Schema Registry wire format,
// their schema in the real registry) through the plain franz-go loop, which passes the bytes
// through, and through a lockstep query that decodes each record by its writer schema,
// filters and encodes it again with the schema it registers for its output, in one run; it
// reports what BenchmarkKafkaToKafka reports for throughput (records/s, CPU, allocations,
// peak heap, their ratios to the loop), without the latency run.
//
//	go test ./engine/kafka -run '^$' -bench KafkaToKafkaAvro -benchtime 1x [-kafka.records 1000000]
func BenchmarkKafkaToKafkaAvro(b *testing.B) {
	brokers, broker := benchBroker(b)
	reg := testenv.SchemaRegistry(b)
	n := *benchRecords
	createTopic(b, brokers, "avro-in", benchPartitions, nil)
	preloadAvro(b, brokers, reg, "avro-in", n)
	againstTheLoop(b, brokers, broker, "avro-in", "avro-", n, avroQuery{reg: reg}, false)
}

// preloadAvro registers benchAvroSchema under <topic>-value and writes n records of it into
// topic, spread over its partitions.
func preloadAvro(b *testing.B, brokers []string, reg testenv.Registry, topic string, n int) {
	b.Helper()
	rc, err := sr.NewClient(sr.URLs(reg.URL), sr.BasicAuth(reg.User, reg.Password))
	if err != nil {
		b.Fatal(err)
	}
	s, err := rc.CreateSchema(context.Background(), topic+"-value", sr.Schema{Schema: benchAvroSchema, Type: sr.TypeAvro})
	if err != nil {
		b.Fatal(err)
	}
	schema := avro.MustParse(benchAvroSchema)
	var h sr.ConfluentHeader
	header, err := h.AppendEncode(nil, s.ID, nil)
	if err != nil {
		b.Fatal(err)
	}
	cl := benchProducer(b, brokers, topic)
	ctx := context.Background()
	var p kgo.FirstErrPromise
	for i := range n {
		body, err := avro.Marshal(schema, map[string]any{"id": fmt.Sprintf("o-%09d", i), "amount": float64(i%1000) / 4, "sent": int64(0)})
		if err != nil {
			b.Fatal(err)
		}
		cl.Produce(ctx, &kgo.Record{Value: append(append([]byte(nil), header...), body...)}, p.Promise())
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if err := p.Err(); err != nil {
		b.Fatal(err)
	}
}

// avroQuery is BenchmarkKafkaToKafka's query with Avro in and out.
type avroQuery struct{ reg testenv.Registry }

func (a avroQuery) query(brokers []string, in, out string) *v1.StreamingQuery {
	registry := func() *v1.SchemaRegistry { return &v1.SchemaRegistry{URL: a.reg.URL} }
	return querytest.Make("bench", "test").
		KafkaSource("in", brokers[0], in, querytest.Col("id", v1.TypeString), querytest.Col("amount", v1.TypeDouble), querytest.Col("sent", v1.TypeLong)).
		EditSource("in", func(s *v1.Source) {
			s.Kafka.BootstrapServers, s.Kafka.StartingOffsets = brokers, v1.OffsetsEarliest
			s.Kafka.MaxOffsetsPerTrigger = benchMaxOffsets
			s.Kafka.Format, s.Kafka.SchemaRegistry = v1.KafkaAvro, registry()
		}).
		Filter("amount >= 0.0").
		SelectColumns("id", "amount", "sent").
		KafkaSink(brokers[0], out).
		Edit(func(s *v1.StreamingQuerySpec) {
			s.Sink.Kafka.BootstrapServers = brokers
			s.Sink.Kafka.Format, s.Sink.Kafka.SchemaRegistry = v1.KafkaAvro, registry()
		}).
		AvailableNow().Obj()
}

func (a avroQuery) drain(b *testing.B, brokers []string, in, out string, n int) {
	q, err := engine.New(a.query(brokers, in, out), registry(b, kafka.WithGetenv(registryEnv(a.reg))), engine.WithCheckpoint(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	sum, err := q.Run(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if sum.NumOutputRows != int64(n) {
		b.Fatalf("the query wrote %d rows, want %d", sum.NumOutputRows, n)
	}
}

func (avroQuery) follow(*testing.B, []string, string, string, chan struct{}, chan struct{}) {
	panic("BenchmarkKafkaToKafkaAvro measures no latency")
}
