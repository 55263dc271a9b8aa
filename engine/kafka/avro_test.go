package kafka_test

import (
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// registryTopic starts Kafka and the Schema Registry and creates topic, of
// one partition, for a test of a registry format.
func registryTopic(t *testing.T, topic string) ([]string, testenv.Registry) {
	t.Helper()
	brokers := testenv.Kafka(t)
	reg := testenv.SchemaRegistry(t)
	createTopic(t, brokers, topic, 1, nil)
	return brokers, reg
}

// registryEnv returns the variables that hold the shared registry's credentials.
func registryEnv(reg testenv.Registry) func(string) string {
	return func(k string) string {
		switch k {
		case v1.DefaultSchemaRegistryUsernameEnv:
			return reg.User
		case v1.DefaultSchemaRegistryPasswordEnv:
			return reg.Password
		}
		return ""
	}
}

// registryClient returns a client of the shared registry, as producers and admins use it.
func registryClient(t *testing.T, reg testenv.Registry) *sr.Client {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(reg.URL), sr.BasicAuth(reg.User, reg.Password))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// avroSourceSpec is a Kafka source of topic in format avro.
func avroSourceSpec(brokers []string, reg testenv.Registry, topic string, cols v1.Columns) *v1.Source {
	spec := kafkaSpec(brokers, topic)
	spec.Kafka.Format = v1.KafkaAvro
	spec.Kafka.SchemaRegistry = &v1.SchemaRegistry{URL: reg.URL}
	spec.Schema = &v1.Schema{Columns: cols}
	return spec
}

// readAll plans and reads one batch of everything in the topics.
func readAll(t *testing.T, s *kafka.Source) engine.ReadResult {
	t.Helper()
	p := plan(t, s, 0, nil, false)
	res, err := s.Read(testContext(t), engine.ReadRequest{Batch: 0, End: p.End})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return res
}

// readColumns reads one batch of everything in the topics of s, and returns its rows cut to
// their first n columns (the schema's, without _key and the other metadata columns) and the
// whole result.
func readColumns(t *testing.T, s *kafka.Source, n int) ([]engine.Row, engine.ReadResult) {
	t.Helper()
	res := readAll(t, s)
	var got []engine.Row
	for _, r := range res.Rows {
		got = append(got, slices.Clone(r[:n]))
	}
	return got, res
}

// registrySink returns a Kafka sink of spec for the columns cols of query q1, with the
// registry's credentials from getenv.
func registrySink(t *testing.T, getenv func(string) string, spec *v1.Sink, cols v1.Columns) (engine.Sink, error) {
	return kafka.SinkWith(kafka.WithGetenv(getenv))(testContext(t), spec,
		engine.SinkEnv{QueryID: "q1", Columns: cols, OutputMode: v1.OutputAppend, Logger: testLogger(t)})
}

// writeFirst writes rows as batch 0 of query q1 through sk, and closes sk when the test ends.
func writeFirst(t *testing.T, sk engine.Sink, cols v1.Columns, rows []engine.Row) {
	t.Helper()
	t.Cleanup(func() { sk.(*kafka.Sink).Close() })
	if err := sk.Write(testContext(t), &engine.Batch{QueryID: "q1", ID: 0, Time: time.Now(), Columns: cols, Rows: rows}); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// writeRows writes rows as batch 0 of query q1 through a new registrySink of spec.
func writeRows(t *testing.T, getenv func(string) string, spec *v1.Sink, cols v1.Columns, rows []engine.Row) {
	t.Helper()
	sk, err := registrySink(t, getenv, spec, cols)
	if err != nil {
		t.Fatalf("new sink: %v", err)
	}
	writeFirst(t, sk, cols, rows)
}

// everyType is a column of each type and three rows of them, the last all null, for the
// formats' round trips. ns is the nanoseconds of the rows' timestamps: a format that keeps
// microseconds is given a multiple of 1000.
func everyType(ns int) (v1.Columns, []engine.Row) {
	cols := v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeLong}, {Name: "price", Type: v1.TypeDouble},
		{Name: "ok", Type: v1.TypeBoolean}, {Name: "at", Type: v1.TypeTimestamp}}
	at := time.Date(2026, 3, 1, 12, 30, 0, ns, time.UTC)
	return cols, []engine.Row{
		{"a", int64(1), 1.5, true, at},
		{"b", int64(-7), -0.25, false, at.Add(time.Hour)},
		{"c", nil, nil, nil, nil},
	}
}

// TestAvroRoundTrip writes rows of every column type, nulls included, through the Kafka sink
// in format avro (its schema registered over TLS with basic authentication) and reads them
// back with the source in format avro.
func TestAvroRoundTrip(t *testing.T) {
	topic := "avro-roundtrip"
	brokers, reg := registryTopic(t, topic)
	cols, rows := everyType(123456000)
	tlsRegistry := &v1.SchemaRegistry{URL: reg.TLSURL, CAFile: reg.CAFile}
	sinkSpec := &v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: brokers, Topic: topic, Format: v1.KafkaAvro, SchemaRegistry: tlsRegistry}}
	writeRows(t, registryEnv(reg), sinkSpec, cols, rows)

	got, _ := readColumns(t, newSource(t, avroSourceSpec(brokers, reg, topic, cols), t.TempDir(), kafka.WithGetenv(registryEnv(reg))), len(cols))
	if diff := cmp.Diff(rows, got); diff != "" {
		t.Fatalf("rows read back (-written +read):\n%s", diff)
	}
	// The registry holds the derived schema under the topic-name strategy's subject.
	s, err := registryClient(t, reg).SchemaByVersion(testContext(t), topic+"-value", -1)
	if err != nil || !strings.Contains(s.Schema.Schema, `"timestamp-micros"`) {
		t.Fatalf("latest schema of %s-value = %+v, %v", topic, s, err)
	}
}

// producer writes Avro records in the Schema Registry wire format, as other clients do.
type producer struct {
	t       *testing.T
	brokers []string
	cl      *sr.Client
	subject string
}

// register registers schema text and returns the schema and its id.
func (p producer) register(text string) (avro.Schema, int) {
	p.t.Helper()
	s, err := p.cl.CreateSchema(testContext(p.t), p.subject, sr.Schema{Schema: text, Type: sr.TypeAvro})
	if err != nil {
		p.t.Fatalf("register %s: %v", text, err)
	}
	return avro.MustParse(text), s.ID
}

// send produces one record per value with schema id.
func (p producer) send(topic string, schema avro.Schema, id int, values ...map[string]any) {
	p.t.Helper()
	var h sr.ConfluentHeader
	var recs []*kgo.Record
	for _, v := range values {
		body, err := avro.Marshal(schema, v)
		if err != nil {
			p.t.Fatal(err)
		}
		b, err := h.AppendEncode(nil, id, nil)
		if err != nil {
			p.t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Value: append(b, body...)})
	}
	produce(p.t, p.brokers, recs...)
}

// TestAvroEvolution reads a topic whose writers evolved under the subject's BACKWARD rule: a
// field added with a default, an int widened to a long, an optional field removed; a record
// with a schema id the registry does not know follows onMalformed; the start guard names the
// column the latest schema lacks.
func TestAvroEvolution(t *testing.T) {
	topic := "avro-evolution"
	brokers, reg := registryTopic(t, topic)
	p := producer{t: t, brokers: brokers, cl: registryClient(t, reg), subject: topic + "-value"}

	v1s, id1 := p.register(`{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"n","type":"int"}]}`)
	if rs := p.cl.SetCompatibility(testContext(t), sr.SetCompatibility{Level: sr.CompatBackward}, p.subject); rs[0].Err != nil {
		t.Fatal(rs[0].Err)
	}
	// Added with a default, and n widened from int to long: BACKWARD allows both.
	v2s, id2 := p.register(`{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"n","type":"long"},` +
		`{"name":"note","type":["null","string"],"default":null}]}`)
	p.send(topic, v1s, id1, map[string]any{"id": "a", "n": 1})
	p.send(topic, v2s, id2, map[string]any{"id": "b", "n": int64(1) << 40, "note": "big"})

	cols := v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeLong}, {Name: "note", Type: v1.TypeString}}
	spec := avroSourceSpec(brokers, reg, topic, cols)
	spec.OnMalformed = v1.MalformedSkip
	src := newSource(t, spec, t.TempDir(), kafka.WithGetenv(registryEnv(reg)))

	// The optional field removed: BACKWARD allows it; its column reads null.
	v3s, id3 := p.register(`{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"n","type":"long"}]}`)
	p.send(topic, v3s, id3, map[string]any{"id": "c", "n": int64(3)})
	// A schema id the registry never gave.
	var h sr.ConfluentHeader
	unknown, _ := h.AppendEncode(nil, 987654, nil)
	produce(t, brokers, &kgo.Record{Topic: topic, Value: append(unknown, 2, 'x')})

	got, res := readColumns(t, src, len(cols))
	want := []engine.Row{{"a", int64(1), nil}, {"b", int64(1) << 40, "big"}, {"c", int64(3), nil}}
	if diff := cmp.Diff(want, got); diff != "" || res.Malformed != 1 {
		t.Fatalf("read %d malformed (want 1), rows (-want +got):\n%s", res.Malformed, diff)
	}

	// A type change BACKWARD forbids is refused by the registry.
	if _, err := p.cl.CreateSchema(testContext(t), p.subject, sr.Schema{Type: sr.TypeAvro,
		Schema: `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"n","type":"string"}]}`}); err == nil {
		t.Fatal("the registry took n changed from long to string under BACKWARD")
	}

	// The start guard: the latest schema (v3) lacks note.
	_, err := kafka.SourceWith(kafka.WithGetenv(registryEnv(reg)))(testContext(t), spec, engine.SourceEnv{
		Name: spec.Name, QueryID: "q1", Store: sourceStore(t, t.TempDir()), Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "column note: no field note") || !strings.Contains(err.Error(), p.subject) {
		t.Fatalf("new source on a subject whose latest schema lacks note = %v, want the column named", err)
	}
	if strings.Contains(err.Error(), "source "+spec.Name) {
		t.Errorf("new source error = %v names the source, which the engine's prefix does (source %s: source %s: …)", err, spec.Name, spec.Name)
	}
	// And a column of another type.
	spec.Schema.Columns = v1.Columns{{Name: "id", Type: v1.TypeLong}, {Name: "n", Type: v1.TypeLong}}
	_, err = kafka.SourceWith(kafka.WithGetenv(registryEnv(reg)))(testContext(t), spec, engine.SourceEnv{
		Name: spec.Name, QueryID: "q1", Store: sourceStore(t, t.TempDir()), Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "column id (long): field id: the writer's string cannot be read as long") {
		t.Fatalf("new source with id as long = %v, want the column and both types named", err)
	}

	// onMalformed fail stops at the unknown id.
	spec.Schema.Columns = cols
	spec.OnMalformed = v1.MalformedFail
	spec.Kafka.SchemaRegistry.Subject = "avro-evolution-unchecked" // no such subject: the guard passes
	failing := newSource(t, spec, t.TempDir(), kafka.WithGetenv(registryEnv(reg)))
	pl := plan(t, failing, 0, nil, false)
	if _, err := failing.Read(testContext(t), engine.ReadRequest{End: pl.End}); err == nil || !strings.Contains(err.Error(), "987654") {
		t.Fatalf("read with an unknown schema id and onMalformed fail = %v, want the id named", err)
	}
}

// TestAvroSinkIncompatibleChange changes an output column's type under the subject's BACKWARD
// rule: the sink fails at start, before any record, naming the subject, the rule and the field.
func TestAvroSinkIncompatibleChange(t *testing.T) {
	brokers := testenv.Kafka(t)
	reg := testenv.SchemaRegistry(t)
	topic := "avro-incompatible"
	newAvroSink := backwardSubject(t, brokers, reg, topic, v1.KafkaAvro)
	// A column added is compatible: its field defaults to null.
	added, err := newAvroSink(v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeLong}, {Name: "x", Type: v1.TypeDouble}})
	if err != nil {
		t.Fatalf("new sink with a column added: %v", err)
	}
	added.(*kafka.Sink).Close()

	refusesNToString(t, newAvroSink, topic)
	ends, err := admin(t, brokers).ListEndOffsets(testContext(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadmListed) {
		if o.Offset != 0 {
			t.Errorf("partition %d has %d records, want none", o.Partition, o.Offset)
		}
	})
}

// backwardSubject creates topic and returns a constructor of format sinks to it, once a first
// sink (id string, n long) has registered the value schema and the subject's rule is BACKWARD.
func backwardSubject(t *testing.T, brokers []string, reg testenv.Registry, topic string, format v1.KafkaFormat) func(v1.Columns) (engine.Sink, error) {
	t.Helper()
	createTopic(t, brokers, topic, 1, nil)
	spec := &v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: brokers, Topic: topic, Format: format,
		SchemaRegistry: &v1.SchemaRegistry{URL: reg.URL}}}
	newSink := func(cols v1.Columns) (engine.Sink, error) { return registrySink(t, registryEnv(reg), spec, cols) }
	first, err := newSink(v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeLong}})
	if err != nil {
		t.Fatal(err)
	}
	first.(*kafka.Sink).Close()
	if rs := registryClient(t, reg).SetCompatibility(testContext(t), sr.SetCompatibility{Level: sr.CompatBackward}, topic+"-value"); rs[0].Err != nil {
		t.Fatal(rs[0].Err)
	}
	return newSink
}

// refusesNToString checks that a sink whose column n changed from long to string fails to start
// with an IncompatibleSchemaError naming the subject, the BACKWARD rule and the field.
func refusesNToString(t *testing.T, newSink func(v1.Columns) (engine.Sink, error), topic string) {
	t.Helper()
	_, err := newSink(v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeString}})
	var ie *kafka.IncompatibleSchemaError
	if !errors.As(err, &ie) || ie.Subject != topic+"-value" || ie.Rule != "BACKWARD" || ie.Field != "n" {
		t.Fatalf("new sink with n changed from long to string = %v, want an IncompatibleSchemaError for subject %s-value, BACKWARD, field n", err, topic)
	}
	t.Logf("the sink's error: %v", err)
}

// TestAvroExampleQuery runs examples/queries/orders-avro.yaml against the test broker and
// registry: Avro orders in (written by another client, a decimal-free schema with a date
// field the query does not read), the large ones out as Avro, read back with their schema.
func TestAvroExampleQuery(t *testing.T) {
	brokers := testenv.Kafka(t)
	reg := testenv.SchemaRegistry(t)
	obj := querytest.Load(t, "../../examples/queries/orders-avro.yaml")
	in, out := "orders-example", "orders-large-example"
	src, snk := obj.Spec.Sources[0].Kafka, obj.Spec.Sink.Kafka
	src.BootstrapServers, src.Topics, src.SchemaRegistry.URL = brokers, []string{in}, reg.URL
	snk.BootstrapServers, snk.Topic, snk.SchemaRegistry.URL = brokers, out, reg.URL
	createTopic(t, brokers, in, 2, nil)
	createTopic(t, brokers, out, 2, nil)

	p := producer{t: t, brokers: brokers, cl: registryClient(t, reg), subject: in + "-value"}
	schema, id := p.register(`{"type":"record","name":"Order","namespace":"shop","fields":[` +
		`{"name":"order_id","type":"string"},{"name":"amount","type":"double"},` +
		`{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},` +
		`{"name":"day","type":{"type":"int","logicalType":"date"}}]}`)
	ts := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	var want []string
	for i := range 20 {
		amount := float64(i * 10)
		order := fmt.Sprintf("o-%02d", i)
		p.send(in, schema, id, map[string]any{"order_id": order, "amount": amount, "ts": ts.Add(time.Duration(i) * time.Minute), "day": ts})
		if amount >= 100 {
			want = append(want, order)
		}
	}

	kreg := registry(t, kafka.WithGetenv(registryEnv(reg)))
	q, err := engine.New(obj, kreg, engine.WithCheckpoint(t.TempDir()), engine.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Run(testContext(t)); err != nil {
		t.Fatalf("run: %v", err)
	}

	cl := registryClient(t, reg)
	var got []string
	for _, r := range consume(t, brokers, out) {
		var h sr.ConfluentHeader
		id, body, err := h.DecodeID([]byte(r.value))
		if err != nil {
			t.Fatal(err)
		}
		s, err := cl.SchemaByID(testContext(t), id)
		if err != nil {
			t.Fatal(err)
		}
		var row map[string]any
		if err := avro.Unmarshal(avro.MustParse(s.Schema), body, &row); err != nil {
			t.Fatalf("decode %x with schema %d: %v", body, id, err)
		}
		if r.key != fmt.Sprint(unionValue(row["order_id"])) {
			t.Errorf("record key %q, value %v", r.key, row)
		}
		got = append(got, r.key)
	}
	if diff := cmp.Diff(sorted(want), sorted(got)); diff != "" {
		t.Fatalf("orders in %s (-want +got):\n%s", out, diff)
	}
}

// unionValue returns the value of a union branch as hamba's generic decoding gives it.
func unionValue(v any) any {
	if m, ok := v.(map[string]any); ok {
		for _, inner := range m {
			return inner
		}
	}
	return v
}

// TestAvroSinkPinnedVersion writes with a version of the subject registered beforehand, whose
// extra field has a default, and refuses output columns the pinned schema cannot hold.
func TestAvroSinkPinnedVersion(t *testing.T) {
	topic := "avro-pinned"
	brokers, reg := registryTopic(t, topic)
	p := producer{t: t, brokers: brokers, cl: registryClient(t, reg), subject: topic + "-value"}
	_, id := p.register(`{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},` +
		`{"name":"amount","type":["null","double"],"default":null},{"name":"country","type":"string","default":"XX"}]}`)
	version := int32(1)
	spec := &v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: brokers, Topic: topic, Format: v1.KafkaAvro,
		SchemaRegistry: &v1.SchemaRegistry{URL: reg.URL, Version: &version}}}
	newPinned := func(cols v1.Columns) (engine.Sink, error) { return registrySink(t, registryEnv(reg), spec, cols) }
	cols := v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "amount", Type: v1.TypeDouble}}
	sk, err := newPinned(cols)
	if err != nil {
		t.Fatalf("new sink pinned to version 1: %v", err)
	}
	writeFirst(t, sk, cols, []engine.Row{{"a", 2.5}, {"b", nil}})
	schema := avro.MustParse(mustSchema(t, p.cl, id))
	var got []map[string]any
	for _, r := range consume(t, brokers, topic) {
		var h sr.ConfluentHeader
		gotID, body, err := h.DecodeID([]byte(r.value))
		if err != nil || gotID != id {
			t.Fatalf("record schema id %d (%v), want the pinned %d", gotID, err, id)
		}
		var m map[string]any
		if err := avro.Unmarshal(schema, body, &m); err != nil {
			t.Fatal(err)
		}
		got = append(got, map[string]any{"id": m["id"], "amount": unionValue(m["amount"]), "country": m["country"]})
	}
	want := []map[string]any{{"id": "a", "amount": 2.5, "country": "XX"}, {"id": "b", "amount": nil, "country": "XX"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("records (-want +got):\n%s", diff)
	}

	_, err = newPinned(v1.Columns{{Name: "id", Type: v1.TypeLong}, {Name: "n", Type: v1.TypeLong}})
	if err == nil || !strings.Contains(err.Error(), "column id (long): field id is string") || !strings.Contains(err.Error(), "column n: no field n") {
		t.Fatalf("new sink pinned with unfit columns = %v, want both columns named", err)
	}
}

func mustSchema(t *testing.T, cl *sr.Client, id int) string {
	t.Helper()
	s, err := cl.SchemaByID(testContext(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return s.Schema
}

// TestAvroLogicalTypesAndNestedRecords reads a nullable nested record through a__b columns,
// a decimal as a double and as an exact string, an enum, and a date as a timestamp.
func TestAvroLogicalTypesAndNestedRecords(t *testing.T) {
	topic := "avro-logical"
	brokers, reg := registryTopic(t, topic)
	p := producer{t: t, brokers: brokers, cl: registryClient(t, reg), subject: topic + "-value"}
	schema, id := p.register(`{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},` +
		`{"name":"customer","type":["null",{"type":"record","name":"Customer","fields":[{"name":"country","type":"string"}]}]},` +
		`{"name":"total","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},` +
		`{"name":"exact","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},` +
		`{"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"]}},` +
		`{"name":"day","type":{"type":"int","logicalType":"date"}}]}`)
	day := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	p.send(topic, schema, id,
		map[string]any{"id": "a", "customer": map[string]any{"Customer": map[string]any{"country": "FR"}}, "total": big.NewRat(1250, 100), "exact": big.NewRat(1250, 100), "status": "PAID", "day": day},
		map[string]any{"id": "b", "customer": nil, "total": big.NewRat(-5, 100), "exact": big.NewRat(-5, 100), "status": "NEW", "day": day},
	)
	cols := v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "customer__country", Type: v1.TypeString},
		{Name: "total", Type: v1.TypeDouble}, {Name: "exact", Type: v1.TypeString}, {Name: "status", Type: v1.TypeString},
		{Name: "day", Type: v1.TypeTimestamp}}
	got, _ := readColumns(t, newSource(t, avroSourceSpec(brokers, reg, topic, cols), t.TempDir(), kafka.WithGetenv(registryEnv(reg))), len(cols))
	want := []engine.Row{{"a", "FR", 12.5, "12.50", "PAID", day}, {"b", nil, -0.05, "-0.05", "NEW", day}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("rows (-want +got):\n%s", diff)
	}
}
