package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

func sinkSpec(brokers []string, topic string, exactlyOnce bool) *v1.Sink {
	return &v1.Sink{Kafka: &v1.KafkaSink{BootstrapServers: brokers, Topic: topic, Format: v1.KafkaJSON, ExactlyOnce: exactlyOnce}}
}

func newSink(t *testing.T, spec *v1.Sink, query string, cols v1.Columns, reached func(engine.Phase, int64)) *kafka.Sink {
	t.Helper()
	s, err := kafka.NewSink(testContext(t), spec, engine.SinkEnv{QueryID: query, Columns: cols, OutputMode: v1.OutputAppend,
		Logger: testLogger(t), Reached: reached})
	if err != nil {
		t.Fatalf("new sink: %v", err)
	}
	t.Cleanup(func() { s.(*kafka.Sink).Close() })
	return s.(*kafka.Sink)
}

// stableOffsets returns the last stable offsets of topic's partitions once
// they reached the partitions' ends, or after 15 s (a loaded machine's broker may be slow). Apache Kafka writes a
// transaction's commit markers after EndTxn answered, so a commit just made
// is readable a moment later; a transaction left open (by a crashed run)
// keeps the two apart, and stays unread.
func stableOffsets(t *testing.T, adm *kadm.Client, topic string) kadm.ListedOffsets {
	t.Helper()
	ctx := testContext(t)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		stable, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		done := true
		ends.Each(func(o kadm.ListedOffset) {
			if l, ok := stable.Lookup(o.Topic, o.Partition); !ok || l.Offset < o.Offset {
				done = false
			}
		})
		if done || time.Now().After(deadline) {
			return stable
		}
	}
}

// consumed is a record a read_committed consumer saw.
type consumed struct {
	key, value, batch string
}

// values are the records' values, sorted.
func values(recs []consumed) []string {
	return fieldOf(recs, func(r consumed) string { return r.value })
}

// keys are the records' keys, sorted.
func keys(recs []consumed) []string { return fieldOf(recs, func(r consumed) string { return r.key }) }

// fieldOf is one field of each record, sorted.
func fieldOf(recs []consumed, field func(consumed) string) []string {
	var out []string
	for _, r := range recs {
		out = append(out, field(r))
	}
	return sorted(out)
}

// consume reads the whole topic with read_committed: what consumers of the
// output see.
func consume(t *testing.T, brokers []string, topic string) []consumed {
	t.Helper()
	ctx := testContext(t)
	adm := admin(t, brokers)
	ends := stableOffsets(t, adm, topic)
	want := map[int32]int64{}
	ends.Each(func(o kadmListed) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	if len(want) == 0 {
		return nil
	}
	cl := client(t, brokers, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	var out []consumed
	for len(want) > 0 {
		pctx, cancel := context.WithTimeout(ctx, wait)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume %s: %v (still to read %v)", topic, err, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				c := consumed{key: string(r.Key), value: string(r.Value)}
				for _, h := range r.Headers {
					if h.Key == kafka.BatchHeader {
						c.batch = string(h.Value)
					}
				}
				out = append(out, c)
			}
			if end, ok := want[r.Partition]; ok && r.Offset >= end-1 {
				delete(want, r.Partition)
			}
		})
	}
	return out
}

// rowsOf decodes the JSON values of records into rows of cols.
func rowsOf(t *testing.T, recs []consumed, cols v1.Columns) []engine.Row {
	t.Helper()
	var rows []engine.Row
	for _, r := range recs {
		var m map[string]any
		if err := json.Unmarshal([]byte(r.value), &m); err != nil {
			t.Fatalf("value %s: %v", r.value, err)
		}
		row := make(engine.Row, len(cols))
		for i, c := range cols {
			v := m[c.Name]
			if f, ok := v.(float64); ok && c.Type == v1.TypeLong {
				v = int64(f)
			}
			row[i] = v
		}
		rows = append(rows, row)
	}
	return rows
}

// TestSinkExactlyOnceSuite runs the exactly-once conformance suite on the
// transactional sink, each output its own topic, read with read_committed.
func TestSinkExactlyOnceSuite(t *testing.T) {
	brokers := testenv.Kafka(t)
	n := 0
	enginetest.RunSinkSuite(t, func(t *testing.T) enginetest.SinkHarness {
		n++
		topic := "out-" + string(rune('a'+n))
		createTopic(t, brokers, topic, 3, nil)
		return enginetest.SinkHarness{
			New: func(t *testing.T) engine.Sink {
				return newSink(t, sinkSpec(brokers, topic, true), "q1", enginetest.SinkColumns, nil)
			},
			Read: func(t *testing.T) []engine.Row { return rowsOf(t, consume(t, brokers, topic), enginetest.SinkColumns) },
		}
	})
}

// keyedSink is an at-least-once sink of query q1 keyed by id into the topic
// out, of 2 partitions, on brokers.
func keyedSink(t *testing.T) (brokers []string, s *kafka.Sink) {
	t.Helper()
	brokers = testenv.Kafka(t)
	createTopic(t, brokers, "out", 2, nil)
	spec := sinkSpec(brokers, "out", false)
	spec.Kafka.KeyColumn = "id"
	return brokers, newSink(t, spec, "q1", enginetest.SinkColumns, nil)
}

func TestSinkAtLeastOnceReplaysCarryTheBatchKey(t *testing.T) {
	brokers, s := keyedSink(t)
	b := &engine.Batch{QueryID: "q1", ID: 7, Time: time.Now(), Columns: enginetest.SinkColumns,
		Rows: []engine.Row{{"a", int64(1)}, {"b", nil}}}
	for range 2 { // a replay produces the batch again
		if err := s.Write(testContext(t), b); err != nil {
			t.Fatal(err)
		}
	}
	got := consume(t, brokers, "out")
	slices.SortFunc(got, func(a, b consumed) int { return compareStrings(a.value, b.value) })
	want := []consumed{
		{"a", `{"id":"a","n":1}`, "q1:7"}, {"a", `{"id":"a","n":1}`, "q1:7"},
		{"b", `{"id":"b","n":null}`, "q1:7"}, {"b", `{"id":"b","n":null}`, "q1:7"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("consumed %v, want %v", got, want)
	}
}

// TestSinkWritesBatchAfterBatch writes a batch of more than one chunk of
// records and then smaller ones with one sink, which reuses its records and
// buffers: every record has its own key, value and batch.
func TestSinkWritesBatchAfterBatch(t *testing.T) {
	brokers, s := keyedSink(t)
	var want []consumed
	for id, n := range []int{5000, 3, 0, 10} {
		b := &engine.Batch{QueryID: "q1", ID: int64(id), Time: time.Now(), Columns: enginetest.SinkColumns}
		for i := range n {
			key := fmt.Sprintf("b%d-%d%s", id, i, strings.Repeat("x", id)) // longer keys and values later
			b.Rows = append(b.Rows, engine.Row{key, int64(i)})
			want = append(want, consumed{key, fmt.Sprintf(`{"id":%q,"n":%d}`, key, i), fmt.Sprintf("q1:%d", id)})
		}
		if err := s.Write(testContext(t), b); err != nil {
			t.Fatal(err)
		}
	}
	got := consume(t, brokers, "out")
	byKey := func(a, b consumed) int { return compareStrings(a.key, b.key) }
	slices.SortFunc(got, byKey)
	slices.SortFunc(want, byKey)
	if !slices.Equal(got, want) {
		t.Fatalf("consumed %d records, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []consumed) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestSinkExactlyOnceCrashBeforeCommit leaves a transaction open, as a run
// that dies in the sink write does: read_committed consumers never see it,
// and the next run writes the batch once.
func TestSinkExactlyOnceCrashBeforeCommit(t *testing.T) {
	brokers := testenv.Kafka(t)
	createTopic(t, brokers, "out", 2, nil)
	errCrash := errors.New("crash")
	b := &engine.Batch{QueryID: "q1", ID: 0, Time: time.Now(), Columns: enginetest.SinkColumns, Rows: []engine.Row{{"a", int64(1)}}}
	crashed := newSink(t, sinkSpec(brokers, "out", true), "q1", enginetest.SinkColumns, func(p engine.Phase, _ int64) {
		if p == engine.PhaseSinkWrite {
			panic(errCrash)
		}
	})
	func() {
		defer func() {
			if r := recover(); r != errCrash {
				t.Fatalf("recovered %v", r)
			}
		}()
		_ = crashed.Write(testContext(t), b)
	}()
	if got := consume(t, brokers, "out"); len(got) != 0 {
		t.Fatalf("read_committed saw %v of an open transaction", got)
	}
	s := newSink(t, sinkSpec(brokers, "out", true), "q1", enginetest.SinkColumns, nil)
	if err := s.Write(testContext(t), b); err != nil {
		t.Fatal(err)
	}
	if got := consume(t, brokers, "out"); len(got) != 1 {
		t.Fatalf("consumed %v, want the batch once", got)
	}
}

// TestSinkExactlyOnceFencedBeforeCommit starts a producer of the query
// between the batch's last acknowledgement and its commit, as a second
// engine of the query does: the broker answers the fenced commit as a
// retry of an aborted one (INVALID_TXN_STATE, not PRODUCER_FENCED). The
// sink must read that as a fence and wait for the other producer, not fail
// with the broker's error; here none commits, so it fails saying so, and
// the next run writes the batch once.
func TestSinkExactlyOnceFencedBeforeCommit(t *testing.T) {
	brokers := testenv.Kafka(t)
	createTopic(t, brokers, "out", 2, nil)
	spec := sinkSpec(brokers, "out", true)
	b := &engine.Batch{QueryID: "q1", ID: 0, Time: time.Now(), Columns: enginetest.SinkColumns, Rows: []engine.Row{{"a", int64(1)}}}
	// No producer commits in its place, so a short wait for one suffices.
	s, err := kafka.SinkWith(kafka.WithBrokerTimeout(time.Second))(testContext(t), spec, engine.SinkEnv{QueryID: "q1",
		Columns: enginetest.SinkColumns, OutputMode: v1.OutputAppend, Logger: testLogger(t),
		Reached: func(p engine.Phase, _ int64) {
			if p == engine.PhaseSinkWrite {
				other := client(t, brokers, kgo.TransactionalID(kafka.TransactionalIDPrefix+"q1"))
				if _, _, err := other.ProducerID(testContext(t)); err != nil {
					t.Errorf("fence: %v", err)
				}
			}
		}})
	if err != nil {
		t.Fatalf("new sink: %v", err)
	}
	t.Cleanup(func() { s.(*kafka.Sink).Close() })
	if err := s.Write(testContext(t), b); err == nil || !contains(err.Error(), "another engine runs query q1") {
		t.Fatalf("Write of a fenced batch: %v, want the fence reported", err)
	}
	if got := consume(t, brokers, "out"); len(got) != 0 {
		t.Fatalf("read_committed saw %v of a fenced transaction", got)
	}
	if err := newSink(t, spec, "q1", enginetest.SinkColumns, nil).Write(testContext(t), b); err != nil {
		t.Fatal(err)
	}
	if got := consume(t, brokers, "out"); len(got) != 1 {
		t.Fatalf("consumed %v, want the batch once", got)
	}
}

func TestSinkUnknownKeyColumn(t *testing.T) {
	spec := sinkSpec([]string{"127.0.0.1:1"}, "out", false)
	spec.Kafka.KeyColumn = "nope"
	_, err := kafka.NewSink(testContext(t), spec, engine.SinkEnv{QueryID: "q1", Columns: enginetest.SinkColumns})
	if err == nil || !contains(err.Error(), `keyColumn "nope"`) {
		t.Fatalf("new sink: %v", err)
	}
}
