package kafka_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestBrokerRestartMidQuery kills the broker (a separate process) under a
// running kafka→kafka query and starts it again: the query waits, resumes,
// and no record is lost.
func TestBrokerRestartMidQuery(t *testing.T) {
	for _, exactlyOnce := range []bool{false, true} {
		t.Run(map[bool]string{false: "at-least-once", true: "exactly-once"}[exactlyOnce], func(t *testing.T) {
			brokerRestart(t, exactlyOnce)
		})
	}
}

func brokerRestart(t *testing.T, exactlyOnce bool) {
	b := testenv.KafkaProcess(t)
	brokers := []string{b.Addr}
	createTopic(t, brokers, "in", 2, nil)
	createTopic(t, brokers, "out", 2, nil)
	obj := kafkaQuery(brokers, "in", 0).KafkaSink(b.Addr, "out").
		Edit(func(s *v1.StreamingQuerySpec) { s.Sink.Kafka.KeyColumn, s.Sink.Kafka.ExactlyOnce = "id", exactlyOnce }).Obj()
	q, rec, done := runInBackground(t, obj)

	var want []string
	add := func(p int32, from int) {
		recs, kept := orders("in", p, from, 20)
		produce(t, brokers, recs...)
		want = append(want, kept...)
	}
	add(0, 0)
	add(1, 0)
	rec.Next(t, wait)

	b.Kill()
	time.Sleep(500 * time.Millisecond) // the query notices: its requests fail and are retried
	b.Start()
	add(0, 20)
	add(1, 20)

	deadline := time.Now().Add(wait)
	var got, all []string
	for {
		all = keys(consume(t, brokers, "out"))
		got = slices.Compact(slices.Clone(all))
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the query stopped: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	q.Stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("distinct keys consumed (-want +got):\n%s", diff)
	}
	if exactlyOnce && len(all) != len(got) {
		t.Errorf("exactly-once output holds %d records for %d keys", len(all), len(got))
	}
	t.Logf("%d records for %d keys", len(all), len(got))
}
