package spark_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestDifferentialKafka: a Kafka source (the real broker) read by both runtimes, filtered and
// projected with the Kafka metadata columns, into a Kafka sink keyed by a column: the records
// each runtime produced, read back by a read_committed consumer, are equal multisets of
// (key, value), and each carries the header that names its batch. Both read and write over
// SASL on TLS (SCRAM-SHA-512 in, PLAIN out; the CA of the broker's certificate trusted by
// file), the credentials in the default variables.
func TestDifferentialKafka(t *testing.T) {
	runner := sparktest.Runner(t)
	ctx := context.Background()
	listeners := testenv.KafkaShared(t)
	brokers, topic := []string{listeners.Addr}, "spark-diff"
	t.Setenv(v1.DefaultKafkaUsernameEnv, testenv.KafkaUser)
	t.Setenv(v1.DefaultKafkaPasswordEnv, testenv.KafkaPassword)
	secure := func(sasl **v1.KafkaSASL, tls **v1.KafkaTLS, mech v1.SASLMechanism) {
		*sasl, *tls = &v1.KafkaSASL{Mechanism: mech}, &v1.KafkaTLS{CAFile: listeners.CAFile}
	}
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
			KafkaSource("orders", listeners.SASLAddr, topic, v1.Column{Name: "id", Type: v1.TypeString}, v1.Column{Name: "qty", Type: v1.TypeLong}, v1.Column{Name: "ts", Type: v1.TypeTimestamp}).
			EditSource("orders", func(s *v1.Source) {
				s.Kafka.StartingOffsets = v1.OffsetsEarliest
				secure(&s.Kafka.SASL, &s.Kafka.TLS, v1.SASLScramSHA512)
			}).
			Filter("qty % 2 == 0").
			Select(v1.Projection{Name: "id", Expr: "id"}, v1.Projection{Name: "key", Expr: "_key"}, v1.Projection{Name: "partition", Expr: "_partition"},
				v1.Projection{Name: "offset", Expr: "_offset"}, v1.Projection{Name: "ts", Expr: "ts"}).
			KafkaSink(listeners.SASLAddr, out).Edit(func(s *v1.StreamingQuerySpec) {
			s.Sink.Kafka.KeyColumn = "id"
			secure(&s.Sink.Kafka.SASL, &s.Sink.Kafka.TLS, v1.SASLPlain)
		}).
			AvailableNow().Checkpoint(ck).Obj()
	}
	outLockstep, outSpark := "spark-diff-out-lockstep", "spark-diff-out-spark"
	// The built-in sink produces to topics that exist (it does not ask the broker to create them).
	created, err := kadm.NewClient(cl).CreateTopics(ctx, 2, 1, nil, outLockstep, outSpark)
	if err == nil {
		err = created.Error()
	}
	if err != nil {
		t.Fatalf("create the output topics: %v", err)
	}
	runBuiltin(t, ctx, query(outLockstep, filepath.Join(dir, "ck-lockstep")))
	runSpark(t, ctx, runner, query(outSpark, filepath.Join(dir, "ck-spark")))
	want := readRecords(t, ctx, brokers, outLockstep, 6)
	got := readRecords(t, ctx, brokers, outSpark, 6)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records on spark differ from the built-in engine's (-lockstep +spark):\n%s", diff)
	}

	// JSON and CSV values with malformed ones among them, skipped (onMalformed: skip), into
	// files: Spark's from_json and from_csv take no DROPMALFORMED, so the runner parses
	// PERMISSIVE into a column of its own and drops the rows that have one.
	values := map[v1.KafkaFormat][]string{
		v1.KafkaJSON: {`{"id":"j1","qty":1,"ts":"2024-01-01T00:00:01Z"}`, `{"id":"j2","qty":"two","ts":"2024-01-01T00:00:02Z"}`,
			`{"id":"j3","qty":3,"ts":"2024-01-01T00:00:03Z"`, `not json`, `{"id":"j4","qty":null,"ts":"2024-01-01T00:00:04Z"}`},
		v1.KafkaCSV: {`c1,1,2024-01-01T00:00:01Z`, `c2,two,2024-01-01T00:00:02Z`, `c3,,2024-01-01T00:00:03Z`,
			`"c,4",4,1704067204000`, `c5,5,2024-01-01T00:00:05Z`},
	}
	for format, vals := range values {
		topic := "spark-diff-" + string(format)
		recs = recs[:0]
		for _, v := range vals {
			recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(v)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		skip := func(name string) *v1.StreamingQuery {
			return qt.Make("kafka-skip-"+name, "diff").
				KafkaSource("orders", brokers[0], topic, v1.Column{Name: "id", Type: v1.TypeString}, v1.Column{Name: "qty", Type: v1.TypeLong}, v1.Column{Name: "ts", Type: v1.TypeTimestamp}).
				EditSource("orders", func(s *v1.Source) {
					s.Kafka.StartingOffsets, s.Kafka.Format, s.OnMalformed = v1.OffsetsEarliest, format, v1.MalformedSkip
				}).
				SelectColumns("id", "qty", "ts").
				FilesSink(filepath.Join(dir, topic+"-"+name), v1.FormatJSON).AvailableNow().Checkpoint(filepath.Join(dir, "ck-"+topic+"-"+name)).Obj()
		}
		compareRuntimes(t, ctx, runner, string(format)+" values with malformed ones skipped", skip)
		if kept := readOutput(t, ctx, filepath.Join(dir, topic+"-lockstep"), false); len(kept) == len(vals) {
			t.Errorf("%s: the built-in engine kept all %d values, want some skipped as malformed", format, len(vals))
		}
	}
}

// readRecords reads the n records of topic with a read_committed consumer and returns each as
// "key value", its JSON value's fields in order with timestamps in UTC RFC 3339, sorted (a
// multiset). Each record must carry kafka.BatchHeader, <query id>:<batch id>.
func readRecords(t *testing.T, ctx context.Context, brokers []string, topic string, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	batch := regexp.MustCompile(`^[0-9a-f-]{36}:[0-9]+$`)
	var out []string
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("read %s: %d of %d records: %v", topic, len(out), n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var h string
			for _, rh := range r.Headers {
				if rh.Key == kafka.BatchHeader {
					h = string(rh.Value)
				}
			}
			if !batch.MatchString(h) {
				t.Errorf("record %s/%d@%d: header %s = %q, want <query id>:<batch id>", topic, r.Partition, r.Offset, kafka.BatchHeader, h)
			}
			out = append(out, string(r.Key)+" "+jsonFields(t, r.Value))
		})
	}
	slices.Sort(out)
	return out
}

// jsonFields returns a JSON object's fields as sorted name=value pairs, timestamps in UTC RFC
// 3339: equal for the objects both runtimes write of one row.
func jsonFields(t *testing.T, data []byte) string {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		t.Fatalf("JSON object %q: %v", data, err)
	}
	fields := make([]string, 0, len(obj))
	for k, v := range obj {
		if s, ok := v.(string); ok {
			if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
				v = ts.UTC().Format(time.RFC3339Nano)
			}
		}
		fields = append(fields, fmt.Sprintf("%s=%v", k, v))
	}
	slices.Sort(fields)
	return strings.Join(fields, " ")
}
