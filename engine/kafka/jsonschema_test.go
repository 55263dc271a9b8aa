package kafka_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestJSONSchemaRoundTrip writes rows of every column type, nulls included, through the sink
// in format jsonSchema and reads them back with the source in that format; the registry
// holds the derived JSON Schema under <topic>-value. A record whose id is an Avro schema, and
// one not in the wire format, follow onMalformed.
func TestJSONSchemaRoundTrip(t *testing.T) {
	topic := "jsonschema-roundtrip"
	brokers, reg := registryTopic(t, topic)
	cols, rows := everyType(123456000)
	registry := &v1.SchemaRegistry{URL: reg.URL}
	sinkSpec := &v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: brokers, Topic: topic, Format: v1.KafkaJSONSchema, SchemaRegistry: registry}}
	writeRows(t, registryEnv(reg), sinkSpec, cols, rows)
	cl := registryClient(t, reg)
	latest, err := cl.SchemaByVersion(testContext(t), topic+"-value", -1)
	if err != nil || latest.Type != sr.TypeJSON || !strings.Contains(latest.Schema.Schema, `"date-time"`) {
		t.Fatalf("latest schema of %s-value = %+v, %v; want the derived JSON Schema", topic, latest, err)
	}

	// Records of other writers: an Avro schema's id, and no wire header.
	avroSchema, err := cl.CreateSchema(testContext(t), topic+"-other", sr.Schema{Schema: `"string"`, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	var h sr.ConfluentHeader
	wrongID, err := h.AppendEncode(nil, avroSchema.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	produce(t, brokers,
		&kgo.Record{Topic: topic, Value: append(wrongID, `{"id":"d"}`...)},
		&kgo.Record{Topic: topic, Value: []byte(`{"id":"e"}`)})

	spec := kafkaSpec(brokers, topic)
	spec.Kafka.Format = v1.KafkaJSONSchema
	spec.Kafka.SchemaRegistry = registry
	spec.Schema = &v1.Schema{Columns: cols}
	spec.OnMalformed = v1.MalformedSkip
	got, res := readColumns(t, newSource(t, spec, t.TempDir(), kafka.WithGetenv(registryEnv(reg))), len(cols))
	if diff := cmp.Diff(rows, got); diff != "" || res.Malformed != 2 {
		t.Fatalf("read %d malformed (want 2), rows (-written +read):\n%s", res.Malformed, diff)
	}
}

// TestJSONSchemaSinkIncompatibleChange: under the subject's BACKWARD rule the registry
// refuses a column whose type changed; the sink stops before any record, naming the subject,
// the rule and the field. The start guard of a source names a column the latest schema lacks.
func TestJSONSchemaSinkIncompatibleChange(t *testing.T) {
	brokers := testenv.Kafka(t)
	reg := testenv.SchemaRegistry(t)
	topic := "jsonschema-incompatible"
	refusesNToString(t, backwardSubject(t, brokers, reg, topic, v1.KafkaJSONSchema), topic)

	src := kafkaSpec(brokers, topic)
	src.Kafka.Format = v1.KafkaJSONSchema
	src.Kafka.SchemaRegistry = &v1.SchemaRegistry{URL: reg.URL}
	src.Schema = &v1.Schema{Columns: v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "qty", Type: v1.TypeLong}}}
	_, err := kafka.SourceWith(kafka.WithGetenv(registryEnv(reg)))(testContext(t), src, engine.SourceEnv{
		Name: src.Name, QueryID: "q1", Store: sourceStore(t, t.TempDir()), Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "column qty: no property qty") {
		t.Fatalf("new source with a column the schema lacks = %v, want the start guard naming it", err)
	}
}
