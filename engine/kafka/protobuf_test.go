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
)

// TestProtobufRoundTrip writes rows of every column type, nulls included, through the Kafka
// sink in format protobuf and reads them back with the source in format protobuf.
func TestProtobufRoundTrip(t *testing.T) {
	topic := "proto-roundtrip"
	brokers, reg := registryTopic(t, topic)
	cols, rows := everyType(123456789)
	sinkSpec := &v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: brokers, Topic: topic, Format: v1.KafkaProtobuf,
		SchemaRegistry: &v1.SchemaRegistry{URL: reg.URL}}}
	writeRows(t, registryEnv(reg), sinkSpec, cols, rows)
	spec := avroSourceSpec(brokers, reg, topic, cols)
	spec.Kafka.Format = v1.KafkaProtobuf
	got, _ := readColumns(t, newSource(t, spec, t.TempDir(), kafka.WithGetenv(registryEnv(reg))), len(cols))
	if diff := cmp.Diff(rows, got); diff != "" {
		t.Fatalf("rows read back (-written +read):\n%s", diff)
	}
}

// protoRecord encodes a message by hand: fields (number → varint or string) in the wire format.
func protoRecord(t *testing.T, id int, index []int, fields ...any) []byte {
	t.Helper()
	var h sr.ConfluentHeader
	b, err := h.AppendEncode(nil, id, index)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(fields); i += 2 {
		num := fields[i].(int)
		switch v := fields[i+1].(type) {
		case int64:
			b = appendUvarint(b, uint64(num<<3)) // wire type 0, varint
			b = appendUvarint(b, uint64(v))
		case string:
			b = appendUvarint(b, uint64(num<<3|2))
			b = appendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

func appendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// TestProtobufEvolution reads records of a Protobuf subject whose writers evolved: a field
// added, an int32 widened to int64, a second message of the file picked by its message
// index, and a schema id the registry does not know (onMalformed skip).
func TestProtobufEvolution(t *testing.T) {
	topic := "proto-evolution"
	brokers, reg := registryTopic(t, topic)
	cl := registryClient(t, reg)
	subject := topic + "-value"
	register := func(text string) int {
		s, err := cl.CreateSchema(testContext(t), subject, sr.Schema{Schema: text, Type: sr.TypeProtobuf})
		if err != nil {
			t.Fatalf("register %s: %v", text, err)
		}
		return s.ID
	}
	id1 := register("syntax = \"proto3\";\npackage shop;\nmessage Order { string id = 1; int32 n = 2; }\n")
	id2 := register("syntax = \"proto3\";\npackage shop;\nmessage Order { string id = 1; int64 n = 2; optional string note = 3; }\n" +
		"message Refund { string id = 1; int64 n = 2; string note = 3; }\n")
	produce(t, brokers,
		&kgo.Record{Topic: topic, Value: protoRecord(t, id1, []int{0}, 1, "a", 2, int64(1))},
		&kgo.Record{Topic: topic, Value: protoRecord(t, id2, []int{0}, 1, "b", 2, int64(1)<<40, 3, "big")},
		&kgo.Record{Topic: topic, Value: protoRecord(t, id2, []int{1}, 1, "r", 2, int64(5), 3, "refund")},
		&kgo.Record{Topic: topic, Value: protoRecord(t, 987655, nil, 1, "x")},
	)
	cols := v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeLong}, {Name: "note", Type: v1.TypeString}}
	spec := avroSourceSpec(brokers, reg, topic, cols)
	spec.Kafka.Format = v1.KafkaProtobuf
	spec.OnMalformed = v1.MalformedSkip
	got, res := readColumns(t, newSource(t, spec, t.TempDir(), kafka.WithGetenv(registryEnv(reg))), len(cols))
	want := []engine.Row{{"a", int64(1), nil}, {"b", int64(1) << 40, "big"}, {"r", int64(5), "refund"}}
	if diff := cmp.Diff(want, got); diff != "" || res.Malformed != 1 {
		t.Fatalf("read %d malformed (want 1), rows (-want +got):\n%s", res.Malformed, diff)
	}

	// The start guard names a column of another type.
	spec.Schema.Columns = v1.Columns{{Name: "id", Type: v1.TypeBoolean}}
	_, err := kafka.SourceWith(kafka.WithGetenv(registryEnv(reg)))(testContext(t), spec, engine.SourceEnv{
		Name: spec.Name, QueryID: "q1", Store: sourceStore(t, t.TempDir()), Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "column id (boolean): field shop.Order.id: the writer's string cannot be read as boolean") {
		t.Fatalf("new source with id as boolean = %v, want the column and both types named", err)
	}
}
