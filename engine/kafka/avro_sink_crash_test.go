package kafka_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine/crashtest"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

var deltaToKafkaAvro = ordersSpec("delta: {path: %[3]q, maxFilesPerTrigger: 1}",
	"kafka: {bootstrapServers: [%[2]s], topic: %[1]s, exactlyOnce: true, format: avro,\n      keyColumn: id, keyFormat: avro, schemaRegistry: {url: \"%[4]s\"}}")

// writeOrderVersions writes n versions of 10 orders each to the Delta table at dir, one file
// a version, and returns the ids a read_committed consumer must see.
func writeOrderVersions(t *testing.T, dir string, n int) []string {
	t.Helper()
	f, err := s3.OpenFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	cols := v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "amount", Type: v1.TypeDouble}}
	var want []string
	for v := range n {
		var rows []delta.Row
		for i := range 10 {
			id := fmt.Sprintf("d%03d-%d", v, i)
			amount := float64(i%3) - 0.5
			rows = append(rows, delta.Row{id, amount})
			if amount > 0 {
				want = append(want, id)
			}
		}
		if _, err := delta.Open(f).Write(context.Background(), delta.Write{Columns: cols, Rows: rows, Mode: delta.Append}); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	return want
}

// avroOrders decodes what a read_committed consumer read of the sink's topic: each record's
// key (a primitive Avro string) and the id field of its value, both by their schema ids.
func avroOrders(t *testing.T, reg testenv.Registry, recs []consumed) (ids []string) {
	t.Helper()
	cl := registryClient(t, reg)
	schemas := map[int]avro.Schema{}
	decode := func(b []byte) any {
		t.Helper()
		var h sr.ConfluentHeader
		id, rest, err := h.DecodeID(b)
		if err != nil {
			t.Fatalf("not in the wire format: %v", err)
		}
		s, ok := schemas[id]
		if !ok {
			text, err := cl.SchemaByID(testContext(t), id)
			if err != nil {
				t.Fatal(err)
			}
			s = avro.MustParse(text.Schema)
			schemas[id] = s
		}
		var v any
		if err := avro.Unmarshal(s, rest, &v); err != nil {
			t.Fatalf("decode with schema %d: %v", id, err)
		}
		return v
	}
	for _, r := range recs {
		value, ok := decode([]byte(r.value)).(map[string]any)
		if !ok {
			t.Fatalf("value %q is not a record", r.value)
		}
		id := avroNullable(value["id"])
		if key := decode([]byte(r.key)); key != id {
			t.Errorf("record %v has key %v", id, key)
		}
		ids = append(ids, fmt.Sprint(id))
	}
	slices.Sort(ids)
	return ids
}

// avroNullable unwraps a generic decoder's ["null", T] union value.
func avroNullable(v any) any {
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		for _, x := range m {
			return x
		}
	}
	return v
}

// TestCrashDeltaToKafkaAvroExactlyOnce kills a delta → kafka(avro, exactly once) query at
// every phase boundary (including between the produce and the transaction's commit) and at
// random instants: a read_committed consumer then reads every kept order exactly once, as
// an uninterrupted run writes them, values and keys in Avro through the real Schema Registry.
func TestCrashDeltaToKafkaAvroExactlyOnce(t *testing.T) {
	for _, cp := range crashtest.Points() {
		t.Run(cp.String(), func(t *testing.T) {
			brokers := testenv.Kafka(t)
			s, reg, want := deltaToKafkaAvroScenario(t, brokers, 5, "out", "ref", "timing")
			s.killAt("out", cp)
			checkReadCommitted(t, s, brokers, reg, want)
		})
	}
	t.Run("random", func(t *testing.T) {
		brokers := testenv.Kafka(t)
		s, reg, want := deltaToKafkaAvroScenario(t, brokers, 30, "out", "ref", "timing")
		span := s.timing("timing")
		s.killRandomly("out", 10, max(span, time.Second))
		checkReadCommitted(t, s, brokers, reg, want)
	})
}

// deltaToKafkaAvroScenario creates topics on brokers and writes versions versions of orders
// into a Delta table, for the delta → kafka(avro, exactly once) query on the real registry; it
// returns the scenario, the registry and the ids of the kept orders.
func deltaToKafkaAvroScenario(t *testing.T, brokers []string, versions int, topics ...string) (*scenario, testenv.Registry, []string) {
	t.Helper()
	reg := testenv.SchemaRegistry(t)
	for _, topic := range topics {
		createTopic(t, brokers, topic, 3, nil)
	}
	in := filepath.Join(t.TempDir(), "in")
	want := writeOrderVersions(t, in, versions)
	spec := strings.NewReplacer("%[3]q", fmt.Sprintf("%q", in), "%[4]s", reg.URL).Replace(withBrokers(deltaToKafkaAvro, brokers))
	s := newScenario(t, spec)
	s.env = registryVars(reg)
	return s, reg, want
}

// checkReadCommitted finishes the scenario's query into topic out, runs it uninterrupted into
// ref, and compares what a read_committed consumer reads of both, and the ids with want.
func checkReadCommitted(t *testing.T, s *scenario, brokers []string, reg testenv.Registry, want []string) {
	t.Helper()
	s.finish("out")
	s.reference("ref")
	got := avroOrders(t, reg, consume(t, brokers, "out"))
	if diff := cmp.Diff(avroOrders(t, reg, consume(t, brokers, "ref")), got); diff != "" {
		t.Errorf("read_committed output differs from an uninterrupted run (-uninterrupted +crashed):\n%s", diff)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read_committed ids (-want +got):\n%s", diff)
	}
}
