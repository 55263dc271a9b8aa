package kafka_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kgo"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/engine/webhook"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// registry is the built-in registry with this package's kinds, as `lockstep
// run` fills it.
func registry(t testing.TB, opts ...kafka.Opt) *engine.Registry {
	t.Helper()
	reg := enginetest.Registry(t)
	for _, err := range []error{
		reg.RegisterSource(v1.SourceKafka, kafka.SourceSpec(), kafka.SourceWith(opts...)),
		reg.RegisterSink(v1.SinkKafka, kafka.SinkSpec(), kafka.SinkWith(opts...)),
		reg.RegisterSink(v1.SinkWebhook, webhook.SinkSpec(), webhook.NewSink),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// orders returns n order records for partition p of topic: {"id","amount"};
// every third has a non-positive amount, which the queries filter out.
func orders(topic string, p int32, from, n int) ([]*kgo.Record, []string) {
	var recs []*kgo.Record
	var kept []string
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("%s-%d-%04d", topic, p, i)
		amount := float64(i%3) - 0.5
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(id),
			Value: fmt.Appendf(nil, `{"id":%q,"amount":%g}`, id, amount)})
		if amount > 0 {
			kept = append(kept, id)
		}
	}
	return recs, kept
}

var orderCols = []v1.Column{querytest.Col("id", v1.TypeString), querytest.Col("amount", v1.TypeDouble)}

func kafkaQuery(brokers []string, topic string, maxOffsets int64) *querytest.Query {
	return querytest.Make("orders", "test").
		KafkaSource("in", brokers[0], topic, orderCols...).
		EditSource("in", func(s *v1.Source) {
			s.Kafka.BootstrapServers = brokers
			s.Kafka.StartingOffsets = v1.OffsetsEarliest
			if maxOffsets > 0 {
				s.Kafka.MaxOffsetsPerTrigger = &maxOffsets
			}
		}).
		Filter("amount > 0.0").
		Select(querytest.As("id", "id"), querytest.As("amount", "amount"), querytest.As("partition", "_partition"))
}

func runQuery(t *testing.T, obj *v1.StreamingQuery, ckpt string, opts ...engine.Option) (engine.Summary, *enginetest.Recorder) {
	t.Helper()
	rec := enginetest.NewRecorder()
	q, err := engine.New(obj, registry(t), append([]engine.Option{engine.WithCheckpoint(ckpt), engine.WithObserver(rec),
		engine.WithLogger(testLogger(t))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := q.Run(testContext(t))
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return sum, rec
}

func TestQueryKafkaToFiles(t *testing.T) {
	brokers := testenv.Kafka(t)
	createTopic(t, brokers, "orders", 3, nil)
	var want []string
	for p := range int32(3) {
		recs, kept := orders("orders", p, 0, 40)
		produce(t, brokers, recs...)
		want = append(want, kept...)
	}
	out := t.TempDir()
	obj := kafkaQuery(brokers, "orders", 25).FilesSink(out, v1.FormatJSON).AvailableNow().Obj()
	ckpt := t.TempDir()
	sum, rec := runQuery(t, obj, ckpt)
	if sum.Batches != 5 || sum.NumInputRows != 120 || sum.NumOutputRows != int64(len(want)) {
		t.Errorf("summary %+v, want 5 batches of at most 25 of 120 records", sum)
	}
	if g := rec.Starts()[0].Guarantee; g.Level != v1.GuaranteeExactlyOnce {
		t.Errorf("guarantee %v", g)
	}
	if lag := rec.Batches()[0].Sources[0].Lag; lag == nil || *lag != 95 {
		t.Errorf("batch 0 lag %v, want 95", lag)
	}
	// The commit records the partitions' high-water marks when the batch was planned.
	const hw = `{"orders":{"0":40,"1":40,"2":40}}`
	if got := string(rec.Batches()[0].Sources[0].LatestOffset); got != hw {
		t.Errorf("batch 0 latestOffset %s, want %s", got, hw)
	}
	c := enginetest.LoadCheckpoint(t, ckpt)
	if cm, err := c.Commit(t.Context(), 0); err != nil || string(cm.Progress.Sources[0].LatestOffset) != hw {
		t.Errorf("commits/0 = %+v, %v; want sources[0].latestOffset %s", cm.Progress, err, hw)
	}
	checkOutputIDs(t, out, want)
}

// checkOutputIDs checks that the files in out hold rows whose first columns
// are want, in any order.
func checkOutputIDs(t *testing.T, out string, want []string) {
	t.Helper()
	f, err := s3.OpenFolder(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range enginetest.OutputRows(t, f) {
		got = append(got, r[0].(string))
	}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("output ids (-want +got):\n%s", diff)
	}
}

func TestQueryFilesToKafkaExactlyOnce(t *testing.T) {
	brokers := testenv.Kafka(t)
	createTopic(t, brokers, "out", 2, nil)
	in := t.TempDir()
	var want []string
	for f := range 3 {
		var data []byte
		for i := range 10 {
			id := fmt.Sprintf("f%d-%d", f, i)
			data = fmt.Appendf(data, `{"id":%q,"amount":%d}`+"\n", id, i%2)
			if i%2 == 1 {
				want = append(want, fmt.Sprintf(`{"id":%q,"amount":1}`, id))
			}
		}
		if err := os.WriteFile(filepath.Join(in, fmt.Sprintf("f%d.json", f)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	obj := querytest.Make("export", "test").FilesSource("in", in, v1.FormatJSON, orderCols...).
		EditSource("in", func(s *v1.Source) { one := int32(1); s.Files.MaxFilesPerTrigger = &one }).
		Filter("amount > 0.0").
		KafkaSink(brokers[0], "out").
		Edit(func(s *v1.StreamingQuerySpec) {
			s.Sink.Kafka.BootstrapServers, s.Sink.Kafka.ExactlyOnce = brokers, true
		}).
		AvailableNow().Obj()
	sum, rec := runQuery(t, obj, t.TempDir())
	if sum.Batches != 3 {
		t.Errorf("summary %+v, want 3 batches", sum)
	}
	if g := rec.Starts()[0].Guarantee; g.Level != v1.GuaranteeExactlyOnce || !contains(g.Reason, "read_committed") {
		t.Errorf("guarantee %v", g)
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, values(consume(t, brokers, "out"))); diff != "" {
		t.Errorf("consumed (-want +got):\n%s", diff)
	}
}

// TestQueryKafkaToKafkaDefaultTrigger runs a kafka→kafka query with the
// default trigger while records arrive, and reports at-least-once.
// runInBackground starts obj on a fresh checkpoint, observed by rec, polling every 20ms when
// idle; done yields what its Run returned, once q is stopped.
func runInBackground(t *testing.T, obj *v1.StreamingQuery) (q *engine.Query, rec *enginetest.Recorder, done <-chan error) {
	t.Helper()
	rec = enginetest.NewRecorder()
	q, err := engine.New(obj, registry(t), engine.WithCheckpoint(t.TempDir()), engine.WithObserver(rec),
		engine.WithLogger(testLogger(t)), engine.WithIdlePoll(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { _, err := q.Run(context.Background()); ran <- err }()
	return q, rec, ran
}

func TestQueryKafkaToKafkaDefaultTrigger(t *testing.T) {
	brokers := testenv.Kafka(t)
	createTopic(t, brokers, "in", 2, nil)
	createTopic(t, brokers, "out", 2, nil)
	obj := kafkaQuery(brokers, "in", 0).KafkaSink(brokers[0], "out").
		Edit(func(s *v1.StreamingQuerySpec) { s.Sink.Kafka.BootstrapServers, s.Sink.Kafka.KeyColumn = brokers, "id" }).Obj()
	q, rec, done := runInBackground(t, obj)
	var want []string
	for round := range 3 {
		recs, kept := orders("in", int32(round%2), round*10, 10)
		produce(t, brokers, recs...)
		want = append(want, kept...)
		rec.Next(t, wait)
	}
	deadline := time.Now().Add(wait)
	for len(consume(t, brokers, "out")) < len(want) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	q.Stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if g := rec.Starts()[0].Guarantee; g.Level != v1.GuaranteeAtLeastOnce {
		t.Errorf("guarantee %v", g)
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, keys(consume(t, brokers, "out"))); diff != "" {
		t.Errorf("consumed keys (-want +got):\n%s", diff)
	}
}

// idleSignal is a Recorder that also says when a trigger found no new data.
type idleSignal struct {
	*enginetest.Recorder
	idle chan struct{}
}

func (r idleSignal) Idle(time.Time) {
	select {
	case r.idle <- struct{}{}:
	default:
	}
}

// TestDefaultTriggerWakesOnNewRecords: an idle query with the default trigger
// runs a batch as soon as records arrive, without waiting out its idle poll:
// the engine's clock never moves here, so only the source's wake-up can
// start a batch. The topic is empty at the start, so the source also waits
// on partitions that have had no records yet.
func TestDefaultTriggerWakesOnNewRecords(t *testing.T) {
	brokers := testenv.Kafka(t)
	createTopic(t, brokers, "wake", 2, nil)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	rec := idleSignal{Recorder: enginetest.NewRecorder(), idle: make(chan struct{}, 1)}
	out := t.TempDir()
	obj := kafkaQuery(brokers, "wake", 0).FilesSink(out, v1.FormatJSON).Obj()
	q, err := engine.New(obj, registry(t), engine.WithCheckpoint(t.TempDir()), engine.WithObserver(rec),
		engine.WithLogger(testLogger(t)), engine.WithClock(clk), engine.WithIdlePoll(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := q.Run(testContext(t)); done <- err }()
	var want []string
	for round := range 2 {
		select {
		case <-rec.idle:
		case err := <-done:
			t.Fatalf("run ended: %v", err)
		case <-time.After(wait):
			t.Fatal("the query never went idle")
		}
		n := 0
		for p := range int32(2) {
			recs, kept := orders("wake", p, round*10, 10)
			produce(t, brokers, recs...)
			want = append(want, kept...)
			n += len(recs)
		}
		for got := int64(0); got < int64(n); {
			got += rec.Next(t, wait).NumInputRows
		}
	}
	q.Stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkOutputIDs(t, out, want)
}
