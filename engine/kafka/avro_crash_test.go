package kafka_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/crashtest"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

var kafkaAvroToDelta = ordersSpec(kafkaOrders(15, ",\n      format: avro, schemaRegistry: {url: \"%[3]s\"}"), "delta: {path: %[1]q}",
	"select: [{name: id, expr: id}, {name: amount, expr: amount}]")

// produceAvroOrders writes perPartition Avro orders {id, amount} to each partition of a new
// topic, with a schema registered under <topic>-value, and returns the ids the query keeps.
func produceAvroOrders(t *testing.T, brokers []string, reg testenv.Registry, topic string, partitions int32, perPartition int) []string {
	t.Helper()
	createTopic(t, brokers, topic, partitions, nil)
	text := `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"amount","type":"double"}]}`
	s, err := registryClient(t, reg).CreateSchema(testContext(t), topic+"-value", sr.Schema{Schema: text, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	schema := avro.MustParse(text)
	var h sr.ConfluentHeader
	var recs []*kgo.Record
	var kept []string
	for p := range partitions {
		for i := range perPartition {
			id := fmt.Sprintf("%s-%d-%04d", topic, p, i)
			amount := float64(i%3) - 0.5
			body, err := avro.Marshal(schema, map[string]any{"id": id, "amount": amount})
			if err != nil {
				t.Fatal(err)
			}
			value, _ := h.AppendEncode(nil, s.ID, nil)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: append(value, body...)})
			if amount > 0 {
				kept = append(kept, id)
			}
		}
	}
	produce(t, brokers, recs...)
	slices.Sort(kept)
	return kept
}

// deltaOutput reads the Delta table at dir, rows sorted.
func deltaOutput(t *testing.T, dir string) []engine.Row {
	t.Helper()
	f, err := s3.OpenFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	tbl := delta.Open(f)
	snap, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, rows, err := tbl.ReadAll(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]engine.Row, len(rows))
	for i, r := range rows {
		got[i] = engine.Row(r)
	}
	enginetest.SortRows(got)
	return got
}

// kafkaAvroToDeltaScenario produces perPartition Avro orders into each of 3 partitions of
// the topic orders on brokers, through the real registry, for the kafka(avro) → delta query;
// it returns the scenario and the ids of the kept orders.
func kafkaAvroToDeltaScenario(t *testing.T, brokers []string, perPartition int) (*scenario, []string) {
	t.Helper()
	reg := testenv.SchemaRegistry(t)
	want := produceAvroOrders(t, brokers, reg, "orders", 3, perPartition)
	s := newScenario(t, strings.ReplaceAll(withBrokers(kafkaAvroToDelta, brokers), "%[3]s", reg.URL))
	s.env = registryVars(reg)
	return s, want
}

// registryVars are the environment of a query whose registry is reg, with its default
// credential variables.
func registryVars(reg testenv.Registry) []string {
	return []string{v1.DefaultSchemaRegistryUsernameEnv + "=" + reg.User, v1.DefaultSchemaRegistryPasswordEnv + "=" + reg.Password}
}

// TestCrashKafkaAvroToDelta kills a kafka(avro) → delta query (SIGKILL by the binary itself)
// at every phase boundary: the table then holds every kept order once, as an uninterrupted
// run's does, with the Avro records decoded through the real Schema Registry.
func TestCrashKafkaAvroToDelta(t *testing.T) {
	for _, cp := range crashtest.Points() {
		t.Run(cp.String(), func(t *testing.T) {
			brokers := testenv.Kafka(t)
			s, want := kafkaAvroToDeltaScenario(t, brokers, 20)
			out := filepath.Join(s.dir, "out")
			s.killAt(out, cp)
			s.finish(out)
			ref := filepath.Join(s.dir, "ref")
			s.reference(ref)
			checkIDs(t, "table", deltaOutput(t, out), deltaOutput(t, ref), want)
		})
	}
}
