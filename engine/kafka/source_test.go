package kafka_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kgo"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// plan plans a batch and fails the test on error.
func plan(t *testing.T, s *kafka.Source, batch int64, start engine.Offset, limit bool) engine.Planned {
	t.Helper()
	p, err := s.Plan(testContext(t), engine.PlanRequest{Batch: batch, Start: start, Time: time.Now(), Limit: limit})
	if err != nil {
		t.Fatalf("plan batch %d: %v", batch, err)
	}
	return p
}

func read(t *testing.T, s *kafka.Source, batch int64, start, end engine.Offset) []engine.Row {
	t.Helper()
	res, err := s.Read(testContext(t), engine.ReadRequest{Batch: batch, Start: start, End: end})
	if err != nil {
		t.Fatalf("read batch %d: %v", batch, err)
	}
	return res.Rows
}

func TestSourceReadsExactlyTheLoggedRange(t *testing.T) {
	brokers := testenv.Kafka(t)
	createTopic(t, brokers, "orders", 2, nil)
	produce(t, brokers, jsonRecords("orders", 0, 0, 3)...)
	produce(t, brokers, jsonRecords("orders", 1, 0, 2)...)
	dir := t.TempDir()
	s := newSource(t, kafkaSpec(brokers, "orders"), dir)

	p0 := plan(t, s, 0, nil, true)
	if !p0.HasData || string(p0.End) != `{"orders":{"0":3,"1":2}}` {
		t.Fatalf("batch 0 planned %s (data %v), want {\"orders\":{\"0\":3,\"1\":2}}", p0.End, p0.HasData)
	}
	rows := read(t, s, 0, nil, p0.End)
	got := ids(rows)
	slices.Sort(got)
	if want := []string{"orders-0-0", "orders-0-1", "orders-0-2", "orders-1-0", "orders-1-1"}; !slices.Equal(got, want) {
		t.Fatalf("batch 0 read %v, want %v", got, want)
	}
	// Metadata columns follow the record's.
	r := rows[0]
	if len(r) != 7 || r[3] != "orders" || r[4] == nil || r[5] == nil {
		t.Fatalf("row %v: want id, n, _key, _topic, _partition, _offset, _timestamp", r)
	}
	if _, ok := r[6].(time.Time); !ok {
		t.Errorf("_timestamp %T, want time.Time", r[6])
	}

	// Records produced after the plan belong to the next batch.
	produce(t, brokers, jsonRecords("orders", 0, 3, 2)...)
	if again := read(t, s, 0, nil, p0.End); len(again) != 5 {
		t.Fatalf("re-reading batch 0 gave %d rows, want 5", len(again))
	}
	p1 := plan(t, s, 1, p0.End, true)
	if string(p1.End) != `{"orders":{"0":5,"1":2}}` || *p1.Lag != 0 {
		t.Fatalf("batch 1 planned %s lag %d", p1.End, *p1.Lag)
	}
	if got := ids(read(t, s, 1, p0.End, p1.End)); !slices.Equal(got, []string{"orders-0-3", "orders-0-4"}) {
		t.Fatalf("batch 1 read %v", got)
	}
	if p := plan(t, s, 2, p1.End, true); p.HasData {
		t.Fatalf("batch 2 has data with nothing new: %s", p.End)
	}

	// Another process replays batch 1 with its logged range.
	s2 := newSource(t, kafkaSpec(brokers, "orders"), dir)
	if got := ids(read(t, s2, 1, p0.End, p1.End)); !slices.Equal(got, []string{"orders-0-3", "orders-0-4"}) {
		t.Fatalf("replayed batch 1 read %v", got)
	}
	// And the first batch, whose start is the recorded starting offsets:
	// the same rows in the same order (partition by partition).
	if got := ids(read(t, s2, 0, nil, p0.End)); !slices.Equal(got, ids(rows)) {
		t.Fatalf("replayed batch 0 read %v, first read %v", got, ids(rows))
	}
}

func TestSourceStartingOffsetsRecordedOnce(t *testing.T) {
	brokers := testenv.Kafka(t)
	createTopic(t, brokers, "t", 2, nil)
	produce(t, brokers, jsonRecords("t", 0, 0, 4)...)
	produce(t, brokers, jsonRecords("t", 1, 0, 4)...)

	tests := []struct {
		starting string
		want     string
	}{
		{v1.OffsetsEarliest, `{"t":{"0":0,"1":0}}`},
		{v1.OffsetsLatest, `{"t":{"0":4,"1":4}}`},
		{`{"t":{"0":1,"1":-1}}`, `{"t":{"0":1,"1":4}}`},
		{`{"t":{"0":-2,"1":3}}`, `{"t":{"0":0,"1":3}}`},
	}
	for _, tt := range tests {
		t.Run(tt.starting, func(t *testing.T) {
			spec := kafkaSpec(brokers, "t")
			spec.Kafka.StartingOffsets = tt.starting
			dir := t.TempDir()
			s := newSource(t, spec, dir)
			p := plan(t, s, 0, nil, true)
			var rec struct {
				ClusterID string          `json:"clusterId"`
				Offsets   json.RawMessage `json:"offsets"`
			}
			data, err := sourceStore(t, dir).Get(testContext(t), kafka.StartKey)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &rec); err != nil {
				t.Fatal(err)
			}
			if cluster := testenv.KafkaShared(t).ClusterID; string(rec.Offsets) != tt.want || rec.ClusterID != cluster {
				t.Fatalf("recorded %s, want offsets %s on cluster %s", data, tt.want, cluster)
			}
			// A restart with another startingOffsets keeps the recorded
			// ones: the setting applies only to a source new to the
			// checkpoint.
			spec2 := kafkaSpec(brokers, "t")
			spec2.Kafka.StartingOffsets = v1.OffsetsLatest
			s2 := newSource(t, spec2, dir)
			if diff := cmp.Diff(sorted(ids(read(t, s, 0, nil, p.End))), sorted(ids(read(t, s2, 0, nil, p.End)))); diff != "" {
				t.Errorf("replay after a settings change differs:\n%s", diff)
			}
		})
	}
	t.Run("partitions must all be named", func(t *testing.T) {
		spec := kafkaSpec(brokers, "t")
		spec.Kafka.StartingOffsets = `{"t":{"0":1}}`
		s := newSource(t, spec, t.TempDir())
		_, err := s.Plan(testContext(t), engine.PlanRequest{})
		if err == nil || !contains(err.Error(), "partition 1") {
			t.Fatalf("plan with a partition missing from startingOffsets: %v", err)
		}
	})
}

func TestSourceMaxOffsetsPerTriggerSplitsByBacklog(t *testing.T) {
	brokers := testenv.Kafka(t)
	createTopic(t, brokers, "t", 3, nil)
	produce(t, brokers, jsonRecords("t", 0, 0, 60)...)
	produce(t, brokers, jsonRecords("t", 1, 0, 30)...)
	produce(t, brokers, jsonRecords("t", 2, 0, 10)...)
	spec := kafkaSpec(brokers, "t")
	limit := int64(20)
	spec.Kafka.MaxOffsetsPerTrigger = &limit
	s := newSource(t, spec, t.TempDir())
	p := plan(t, s, 0, nil, true)
	if string(p.End) != `{"t":{"0":12,"1":6,"2":2}}` || *p.Lag != 80 {
		t.Fatalf("planned %s lag %d, want {\"t\":{\"0\":12,\"1\":6,\"2\":2}} lag 80", p.End, *p.Lag)
	}
	if n := len(read(t, s, 0, nil, p.End)); n != 20 {
		t.Fatalf("read %d rows, want 20", n)
	}
	// The once trigger lifts the limit.
	if p := plan(t, s, 0, nil, false); string(p.End) != `{"t":{"0":60,"1":30,"2":10}}` {
		t.Fatalf("planned without limit %s", p.End)
	}
}

func TestSourceNewPartitionsStartAtEarliest(t *testing.T) {
	brokers := testenv.Kafka(t)
	createTopic(t, brokers, "t", 1, nil)
	produce(t, brokers, jsonRecords("t", 0, 0, 2)...)
	spec := kafkaSpec(brokers, "t")
	spec.Kafka.StartingOffsets = v1.OffsetsLatest
	s := newSource(t, spec, t.TempDir())
	p0 := plan(t, s, 0, nil, true)
	if p0.HasData {
		t.Fatalf("latest planned data: %s", p0.End)
	}
	if _, err := admin(t, brokers).CreatePartitions(testContext(t), 2, "t"); err != nil {
		t.Fatal(err)
	}
	produce(t, brokers, jsonRecords("t", 1, 0, 3)...)
	produce(t, brokers, jsonRecords("t", 2, 0, 1)...)
	var p1 engine.Planned
	deadline := time.Now().Add(wait)
	for p1 = plan(t, s, 0, nil, true); !p1.HasData || string(p1.End) != `{"t":{"0":2,"1":3,"2":1}}`; p1 = plan(t, s, 0, nil, true) {
		if time.Now().After(deadline) {
			t.Fatalf("new partitions not planned: %s", p1.End)
		}
		time.Sleep(100 * time.Millisecond)
	}
	got := ids(read(t, s, 0, nil, p1.End))
	slices.Sort(got)
	if want := []string{"t-1-0", "t-1-1", "t-1-2", "t-2-0"}; !slices.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}

func TestSourceTopicPattern(t *testing.T) {
	brokers := testenv.Kafka(t)
	createTopic(t, brokers, "orders-eu", 1, nil)
	createTopic(t, brokers, "orders-us", 1, nil)
	createTopic(t, brokers, "payments", 1, nil)
	for _, topic := range []string{"orders-eu", "orders-us", "payments"} {
		produce(t, brokers, jsonRecords(topic, 0, 0, 1)...)
	}
	spec := kafkaSpec(brokers)
	spec.Kafka.Topics, spec.Kafka.TopicPattern = nil, "orders-.*"
	s := newSource(t, spec, t.TempDir())
	p := plan(t, s, 0, nil, true)
	got := ids(read(t, s, 0, nil, p.End))
	slices.Sort(got)
	if want := []string{"orders-eu-0-0", "orders-us-0-0"}; !slices.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}

func TestSourceFormats(t *testing.T) {
	brokers := testenv.Kafka(t)
	createTopic(t, brokers, "t", 1, nil)
	produce(t, brokers,
		&kgo.Record{Topic: "t", Value: []byte("a,1,2.5,true,2026-01-02T03:04:05Z")},
		&kgo.Record{Topic: "t", Value: []byte(`"b,c",,,,1700000000000`)},
	)
	cols := v1.Columns{{Name: "s", Type: v1.TypeString}, {Name: "l", Type: v1.TypeLong}, {Name: "d", Type: v1.TypeDouble},
		{Name: "b", Type: v1.TypeBoolean}, {Name: "ts", Type: v1.TypeTimestamp}}
	t.Run("csv", func(t *testing.T) {
		spec := kafkaSpec(brokers, "t")
		spec.Kafka.Format, spec.Schema = v1.KafkaCSV, &v1.Schema{Columns: cols}
		s := newSource(t, spec, t.TempDir())
		rows := read(t, s, 0, nil, plan(t, s, 0, nil, true).End)
		want := []engine.Row{
			{"a", int64(1), 2.5, true, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
			{"b,c", nil, nil, nil, time.UnixMilli(1700000000000).UTC()},
		}
		for i := range want {
			if diff := cmp.Diff(want[i], rows[i][:5]); diff != "" {
				t.Errorf("row %d (-want +got):\n%s", i, diff)
			}
		}
	})
	t.Run("raw", func(t *testing.T) {
		spec := kafkaSpec(brokers, "t")
		spec.Kafka.Format, spec.Schema = v1.KafkaRaw, nil
		s := newSource(t, spec, t.TempDir())
		rows := read(t, s, 0, nil, plan(t, s, 0, nil, true).End)
		if len(rows) != 2 || rows[0][0] != "a,1,2.5,true,2026-01-02T03:04:05Z" || rows[0][1] != nil || rows[1][3] != int64(0) || rows[1][4] != int64(1) {
			t.Fatalf("raw rows %v", rows)
		}
	})
	t.Run("json", func(t *testing.T) {
		createTopic(t, brokers, "j", 1, nil)
		produce(t, brokers,
			&kgo.Record{Topic: "j", Value: []byte(`{"s":"x\"y\u00e9","l":-3,"d":1e3,"b":false,"ts":"2026-01-02T03:04:05.123+01:00","extra":{"a":[1,{"b":null}]}}`)},
			&kgo.Record{Topic: "j", Value: []byte(` {"l":null} `)},
		)
		spec := kafkaSpec(brokers, "j")
		spec.Schema = &v1.Schema{Columns: cols}
		s := newSource(t, spec, t.TempDir())
		rows := read(t, s, 0, nil, plan(t, s, 0, nil, true).End)
		want := []engine.Row{
			{"x\"yé", int64(-3), 1000.0, false, time.Date(2026, 1, 2, 2, 4, 5, 123e6, time.UTC)},
			{nil, nil, nil, nil, nil},
		}
		for i := range want {
			if diff := cmp.Diff(want[i], rows[i][:5]); diff != "" {
				t.Errorf("row %d (-want +got):\n%s", i, diff)
			}
		}
	})
}

func TestSourceMalformed(t *testing.T) {
	brokers := testenv.Kafka(t)
	createTopic(t, brokers, "t", 1, nil)
	produce(t, brokers,
		&kgo.Record{Topic: "t", Value: []byte(`{"id":"a","n":1}`)},
		&kgo.Record{Topic: "t", Value: []byte(`{"id":"b","n":"two"}`)},
		&kgo.Record{Topic: "t", Value: []byte(`not json`)},
		&kgo.Record{Topic: "t", Value: []byte(`{"id":"c","n":3}`)},
	)
	t.Run("fail", func(t *testing.T) {
		s := newSource(t, kafkaSpec(brokers, "t"), t.TempDir())
		p := plan(t, s, 0, nil, true)
		_, err := s.Read(testContext(t), engine.ReadRequest{End: p.End})
		if err == nil || !contains(err.Error(), "topic t partition 0 offset 1") {
			t.Fatalf("read: %v, want an error naming topic t partition 0 offset 1", err)
		}
	})
	t.Run("skip", func(t *testing.T) {
		spec := kafkaSpec(brokers, "t")
		spec.OnMalformed = v1.MalformedSkip
		s := newSource(t, spec, t.TempDir())
		res, err := s.Read(testContext(t), engine.ReadRequest{End: plan(t, s, 0, nil, true).End})
		if err != nil || res.Malformed != 2 || !slices.Equal(ids(res.Rows), []string{"a", "c"}) {
			t.Fatalf("read: %v, %d malformed, rows %v", err, res.Malformed, ids(res.Rows))
		}
	})
	t.Run("deadLetter", func(t *testing.T) {
		spec := kafkaSpec(brokers, "t")
		dead := t.TempDir()
		spec.OnMalformed, spec.DeadLetterPath = v1.MalformedDeadLetter, dead
		s := newSource(t, spec, t.TempDir())
		res, err := s.Read(testContext(t), engine.ReadRequest{Batch: 0, End: plan(t, s, 0, nil, true).End})
		if err != nil || res.Malformed != 2 {
			t.Fatalf("read: %v, %d malformed", err, res.Malformed)
		}
		data := readFile(t, dead+"/q1/in/00000000000000000000.jsonl")
		if !contains(data, `"offset":1`) || !contains(data, `"value":"not json"`) {
			t.Fatalf("dead letters:\n%s", data)
		}
	})
}

func TestSourceSkipsAbortedTransactions(t *testing.T) {
	brokers := testenv.Kafka(t)
	createTopic(t, brokers, "t", 1, nil)
	ctx := testContext(t)
	txn := client(t, brokers, kgo.TransactionalID("writer"), kgo.DefaultProduceTopic("t"))
	for i, commit := range []bool{true, false, true} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := txn.ProduceSync(ctx, jsonRecords("t", 0, i, 1)...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	// An open transaction is not read yet.
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, jsonRecords("t", 0, 3, 1)...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	s := newSource(t, kafkaSpec(brokers, "t"), t.TempDir())
	p := plan(t, s, 0, nil, true)
	if got := ids(read(t, s, 0, nil, p.End)); !slices.Equal(got, []string{"t-0-0", "t-0-2"}) {
		t.Fatalf("read %v (end %s), want the committed t-0-0 and t-0-2", got, p.End)
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	stableOffsets(t, admin(t, brokers), "t") // the commit marker lands after EndTxn answered
	p1 := plan(t, s, 1, p.End, true)
	if got := ids(read(t, s, 1, p.End, p1.End)); !slices.Equal(got, []string{"t-0-3"}) {
		t.Fatalf("batch 1 read %v (range %s..%s)", got, p.End, p1.End)
	}
}

func TestSourceRefusesAnotherCluster(t *testing.T) {
	first := testenv.KafkaShared(t)
	brokers := []string{first.Addr}
	createTopic(t, brokers, "t", 1, nil)
	dir := t.TempDir()
	s := newSource(t, kafkaSpec(brokers, "t"), dir)
	plan(t, s, 0, nil, true)

	other := testenv.KafkaProcess(t) // a second cluster, with an id of its own
	spec := kafkaSpec([]string{other.Addr}, "t")
	_, err := kafka.NewSource(testContext(t), spec, engine.SourceEnv{Name: "in", Store: sourceStore(t, dir), Logger: testLogger(t)})
	if !errors.Is(err, engine.ErrRefused) || !contains(err.Error(), strconv.Quote(first.ClusterID)) || !contains(err.Error(), strconv.Quote(other.ClusterID)) {
		t.Fatalf("start on another cluster: %v, want ErrRefused naming both cluster ids", err)
	}
}

func TestSourceUnreachableBrokerFailsAfterBoundedWait(t *testing.T) {
	spec := kafkaSpec([]string{"127.0.0.1:1"}, "t")
	began := time.Now()
	_, err := kafka.SourceWith(kafka.WithConnectTimeout(2*time.Second))(testContext(t), spec,
		engine.SourceEnv{Name: "in", Store: sourceStore(t, t.TempDir()), Logger: testLogger(t)})
	took := time.Since(began)
	var ce *kafka.ConnectError
	if !errors.As(err, &ce) || !contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("start with no broker: %v, want a ConnectError naming the broker", err)
	}
	if took < 2*time.Second || took > 10*time.Second {
		t.Errorf("failed after %s, want about 2s", took)
	}
	t.Log(err)
}
