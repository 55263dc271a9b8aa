package kafka_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// initProducerID sends InitProducerID for the transactional id txn, with the
// producer id and epoch of an earlier answer (KIP-360) or -1, -1.
func initProducerID(t *testing.T, cl *kgo.Client, txn string, id int64, epoch int16) (int64, int16, error) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &txn
	req.TransactionTimeoutMillis = 60_000
	req.ProducerID, req.ProducerEpoch = id, epoch
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatalf("InitProducerID: %v", err)
	}
	return resp.ProducerID, resp.ProducerEpoch, kerr.ErrorForCode(resp.ErrorCode)
}

// TestBrokerFencesStaleProducerEpoch proves what the exactly-once sink rests
// on: once a second producer of a transactional id initialized, the first
// one's producer id and epoch are fenced, also when it asks InitProducerID
// to bump them (the KIP-360 recovery franz-go attempts after an abortable
// error). kfake accepted that request and handed the stale producer a new
// epoch; Apache Kafka answers PRODUCER_FENCED.
func TestBrokerFencesStaleProducerEpoch(t *testing.T) {
	brokers := testenv.Kafka(t)
	cl := client(t, brokers)
	const txn = kafka.TransactionalIDPrefix + "stale"
	id, first, err := initProducerID(t, cl, txn, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	id2, second, err := initProducerID(t, cl, txn, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	if id2 == id && second <= first {
		t.Fatalf("second producer got epoch %d after %d", second, first)
	}
	_, _, err = initProducerID(t, cl, txn, id, first)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("InitProducerID with the stale epoch %d (current %d): %v, want PRODUCER_FENCED", first, second, err)
	}
}

// TestSinkZombieIsFenced runs two sinks of one query, as an engine that
// lost its pod's lease and its replacement do: once the new one wrote a
// batch, the old one's next write fails saying another engine runs the
// query, and a read_committed consumer sees each committed batch once and
// nothing of the fenced one.
func TestSinkZombieIsFenced(t *testing.T) {
	brokers := testenv.Kafka(t)
	createTopic(t, brokers, "out", 2, nil)
	spec := sinkSpec(brokers, "out", true)
	spec.Kafka.KeyColumn = "id"
	batch := func(id int64, key string) *engine.Batch {
		return &engine.Batch{QueryID: "q1", ID: id, Time: time.Now(), Columns: enginetest.SinkColumns,
			Rows: []engine.Row{{key, id}}}
	}
	zombie, err := kafka.SinkWith(kafka.WithBrokerTimeout(time.Second))(testContext(t), spec, engine.SinkEnv{QueryID: "q1",
		Columns: enginetest.SinkColumns, OutputMode: v1.OutputAppend, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { zombie.(*kafka.Sink).Close() })
	if err := zombie.Write(testContext(t), batch(0, "a")); err != nil {
		t.Fatal(err)
	}
	if err := newSink(t, spec, "q1", enginetest.SinkColumns, nil).Write(testContext(t), batch(1, "b")); err != nil {
		t.Fatal(err)
	}
	if err := zombie.Write(testContext(t), batch(2, "c")); err == nil || !contains(err.Error(), "another engine runs query q1") {
		t.Fatalf("the fenced sink's Write: %v, want the fence reported", err)
	}
	got := keys(consume(t, brokers, "out"))
	if want := []string{"a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed consumed keys %v, want %v", got, want)
	}
}
