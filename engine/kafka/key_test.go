package kafka_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestKeyFormatsRoundTrip writes keyed rows through the sink with each keyFormat (a string
// key and a long key, a null key giving a record without one) and reads them back with the
// source in the same keyFormat: _key holds each key's text. Avro and protobuf keys are
// registered under <topic>-key, Avro's as a primitive schema, as Confluent's serializers
// write a String or Long key.
func TestKeyFormatsRoundTrip(t *testing.T) {
	brokers := testenv.Kafka(t)
	reg := testenv.SchemaRegistry(t)
	cols := v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeLong}}
	rows := []engine.Row{{"a", int64(1)}, {"b", int64(-7)}, {nil, nil}}
	for _, tc := range []struct {
		format     v1.KafkaFormat
		keyColumn  string
		wantKeys   []any
		wantSchema string // the key subject's latest schema; "" for none
	}{
		{v1.KafkaJSON, "id", []any{"a", "b", nil}, ""},
		{v1.KafkaJSON, "n", []any{"1", "-7", nil}, ""},
		{v1.KafkaAvro, "id", []any{"a", "b", nil}, `"string"`},
		{v1.KafkaAvro, "n", []any{"1", "-7", nil}, `"long"`},
		{v1.KafkaProtobuf, "id", []any{"a", "b", nil}, "optional string id = 1;"},
		{v1.KafkaProtobuf, "n", []any{"1", "-7", nil}, "optional int64 n = 1;"},
	} {
		t.Run(fmt.Sprintf("%s %s", tc.format, tc.keyColumn), func(t *testing.T) {
			topic := fmt.Sprintf("keys-%s-%s", tc.format, tc.keyColumn)
			createTopic(t, brokers, topic, 1, nil)
			registry := &v1.SchemaRegistry{URL: reg.URL}
			sinkSpec := &v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: brokers, Topic: topic, Format: v1.KafkaJSON,
				KeyColumn: tc.keyColumn, KeyFormat: tc.format}}
			if tc.format.UsesSchemaRegistry() {
				sinkSpec.Kafka.SchemaRegistry = registry
			}
			writeRows(t, registryEnv(reg), sinkSpec, cols, rows)

			spec := kafkaSpec(brokers, topic)
			spec.Schema = &v1.Schema{Columns: cols}
			spec.Kafka.KeyFormat = tc.format
			if tc.format.UsesSchemaRegistry() {
				spec.Kafka.SchemaRegistry = registry
			}
			res := readAll(t, newSource(t, spec, t.TempDir(), kafka.WithGetenv(registryEnv(reg))))
			var keys []any
			for _, r := range res.Rows {
				keys = append(keys, r[len(cols)])
			}
			if diff := cmp.Diff(tc.wantKeys, keys); diff != "" {
				t.Errorf("_key read back (-want +got):\n%s", diff)
			}
			if tc.wantSchema == "" {
				return
			}
			s, err := registryClient(t, reg).SchemaByVersion(testContext(t), topic+"-key", -1)
			if err != nil || !strings.Contains(s.Schema.Schema, tc.wantSchema) {
				t.Errorf("latest schema of %s-key = %+v, %v; want it to hold %s", topic, s, err, tc.wantSchema)
			}
		})
	}
}

// TestAvroKeysOfOtherWriters reads keys other clients wrote in the Schema Registry wire
// format: a primitive long, a record (read as JSON text), and a key not in the wire format,
// which makes its record malformed (onMalformed skip counts it).
func TestAvroKeysOfOtherWriters(t *testing.T) {
	topic := "keys-avro-writers"
	brokers, reg := registryTopic(t, topic)
	cl := registryClient(t, reg)
	key := func(text string, v any) []byte {
		t.Helper()
		s, err := cl.CreateSchema(testContext(t), topic+"-key", sr.Schema{Schema: text, Type: sr.TypeAvro})
		if err != nil {
			t.Fatalf("register %s: %v", text, err)
		}
		body, err := avro.Marshal(avro.MustParse(text), v)
		if err != nil {
			t.Fatal(err)
		}
		var h sr.ConfluentHeader
		b, err := h.AppendEncode(nil, s.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		return append(b, body...)
	}
	// The subject has no compatibility rule (the test registry sets none by default), so it
	// takes both schemas.
	long := key(`"long"`, int64(42))
	record := key(`{"type":"record","name":"OrderKey","fields":[{"name":"shop","type":"string"},{"name":"order","type":"long"}]}`,
		map[string]any{"shop": "berlin", "order": int64(7)})
	value := func(id string) []byte { return []byte(fmt.Sprintf(`{"id":%q,"n":1}`, id)) }
	produce(t, brokers,
		&kgo.Record{Topic: topic, Key: long, Value: value("long")},
		&kgo.Record{Topic: topic, Key: record, Value: value("record")},
		&kgo.Record{Topic: topic, Key: []byte("plain"), Value: value("plain")},
	)

	spec := kafkaSpec(brokers, topic)
	spec.Kafka.KeyFormat = v1.KafkaAvro
	spec.Kafka.SchemaRegistry = &v1.SchemaRegistry{URL: reg.URL}
	spec.OnMalformed = v1.MalformedSkip
	res := readAll(t, newSource(t, spec, t.TempDir(), kafka.WithGetenv(registryEnv(reg))))
	got := map[any]any{}
	for _, r := range res.Rows {
		got[r[0]] = r[len(idCols)]
	}
	want := map[any]any{"long": "42", "record": `{"order":7,"shop":"berlin"}`}
	if diff := cmp.Diff(want, got); diff != "" || res.Malformed != 1 {
		t.Errorf("read %d malformed (want 1: the key not in the wire format); _key by id (-want +got):\n%s", res.Malformed, diff)
	}
}
