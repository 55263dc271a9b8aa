package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(cleanup{m}) }

// cleanup removes what the tests left outside their temporary folders
// (the lockstep binary the crash tests build) after the tests ran.
type cleanup struct{ m *testing.M }

func (c cleanup) Run() int {
	code := c.m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	return code
}

// wait bounds every wait of these tests: a deadline for what must happen, far above how long
// it takes even on a busy machine (a load average of 30 slowed a batch past a minute).
const wait = 3 * time.Minute

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*wait)
	t.Cleanup(cancel)
	return ctx
}

// client returns a plain client of brokers, closed with the test.
func client(t testing.TB, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func admin(t testing.TB, brokers []string) *kadm.Client {
	return kadm.NewClient(client(t, brokers))
}

func createTopic(t testing.TB, brokers []string, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := admin(t, brokers).CreateTopic(testContext(t), partitions, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	// The broker answers before every partition is in its metadata: a source started now
	// could list none of them (on a busy machine it did, and a query that waits for records
	// to wake it waited on no partition).
	deadline := time.Now().Add(wait)
	for {
		l, err := admin(t, brokers).ListEndOffsets(testContext(t), topic)
		n := 0
		if err == nil {
			l.Each(func(o kadm.ListedOffset) {
				if o.Err == nil {
					n++
				}
			})
		}
		if n == int(partitions) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s: %d of %d partitions listed after %s (%v)", topic, n, partitions, wait, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// produce writes records to their partitions (Partition set) or by key.
func produce(t testing.TB, brokers []string, recs ...*kgo.Record) {
	t.Helper()
	cl := client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(testContext(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// jsonRecords returns n records {"id":"<topic>-<p>-<i>","n":i} for partition p.
func jsonRecords(topic string, p int32, from, n int) []*kgo.Record {
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprint("k", i)),
			Value: fmt.Appendf(nil, `{"id":"%s-%d-%d","n":%d}`, topic, p, i, i)})
	}
	return recs
}

var idCols = v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeLong}}

func kafkaSpec(brokers []string, topics ...string) *v1.Source {
	fail := true
	return &v1.Source{
		Name:        "in",
		OnMalformed: v1.MalformedFail,
		Kafka: &v1.KafkaSource{BootstrapServers: brokers, Topics: topics, StartingOffsets: v1.OffsetsEarliest,
			FailOnDataLoss: &fail, Format: v1.KafkaJSON},
		Schema: &v1.Schema{Columns: idCols},
	}
}

// sourceStore returns the store of a source's checkpoint folder in dir.
func sourceStore(t testing.TB, dir string) checkpoint.Store {
	t.Helper()
	st, err := checkpoint.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newSource builds a Kafka source with its checkpoint folder in dir.
func newSource(t *testing.T, spec *v1.Source, dir string, opts ...kafka.Opt) *kafka.Source {
	t.Helper()
	s, err := kafka.SourceWith(opts...)(testContext(t), spec, engine.SourceEnv{
		Name: spec.Name, QueryID: "q1", Store: sourceStore(t, dir), Logger: testLogger(t),
		Open: func(loc string) (checkpoint.Store, error) { return s3.OpenFolder(loc) },
	})
	if err != nil {
		t.Fatalf("new source: %v", err)
	}
	t.Cleanup(func() { s.(*kafka.Source).Close() })
	return s.(*kafka.Source)
}

// ids returns the first column of rows.
func ids(rows []engine.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprint(r[0])
	}
	return out
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}

type kadmListed = kadm.ListedOffset

func compareStrings(a, b string) int { return strings.Compare(a, b) }
