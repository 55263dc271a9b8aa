package kafka_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/engine/crashtest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// TestCrashKafkaAvroToDeltaBrokerKilled is TestCrashKafkaAvroToDelta with the broker
// itself killed (SIGKILL) and restarted while the query runs, once its first batch has
// committed. The run either rides out the outage or fails its batch with an error that
// names Kafka, and the next run replays what was planned. The table then holds every kept
// order once.
func TestCrashKafkaAvroToDeltaBrokerKilled(t *testing.T) {
	b := testenv.KafkaProcess(t)
	brokers := []string{b.Addr}
	s, want := kafkaAvroToDeltaScenario(t, brokers, 100) // 20 batches of 15
	out := filepath.Join(s.dir, "out")

	killBrokerMidRun(t, s, b, out)
	s.finish(out)

	checkWantIDs(t, "table", deltaOutput(t, out), want)
}

// TestCrashDeltaToKafkaAvroBrokerKilled is the sink's side: delta → kafka(avro, exactly once)
// with the broker SIGKILLed and restarted once the first batch has committed, while a batch's
// transaction may be open. The run rides it out or fails naming Kafka; the next run aborts what
// the broker kept open (its new producer epoch fences the old one) and replays the batch. A
// read_committed consumer then reads every kept order once, as an uninterrupted run writes them.
func TestCrashDeltaToKafkaAvroBrokerKilled(t *testing.T) {
	b := testenv.KafkaProcess(t)
	brokers := []string{b.Addr}
	s, reg, want := deltaToKafkaAvroScenario(t, brokers, 30, "out", "ref")
	killBrokerMidRun(t, s, b, "out")
	checkReadCommitted(t, s, brokers, reg, want)
}

// killBrokerMidRun runs the scenario's query into out and, once its first batch has committed,
// kills the broker b (SIGKILL) and starts it again two seconds later. The run must then end
// on its own: done, or failed with an error that names Kafka (the next run replays it).
func killBrokerMidRun(t *testing.T, s *scenario, b *testenv.KafkaBroker, out string) {
	t.Helper()
	cmd := s.command("ckpt", out)
	done := make(chan crashtest.Result, 1)
	go func() { done <- crashtest.Run(t, cmd) }()
	first := filepath.Join(s.dir, "ckpt", checkpoint.CommitsDir, checkpoint.BatchName(0))
	deadline := time.Now().Add(crashtest.RunTimeout)
	for {
		if _, err := os.Stat(first); err == nil {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the run ended (exit %d) before the broker was killed:\n%s", r.Code, r.Stderr)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no batch committed before the broker was to be killed")
		}
	}
	b.Kill()
	time.Sleep(2 * time.Second) // long enough for the query's requests to fail and retry
	b.Start()
	switch r := <-done; {
	case r.Code == 0:
		t.Log("the run rode out the broker's outage")
	case r.Killed:
		t.Fatalf("the run was killed:\n%s", r.Stderr)
	case !strings.Contains(strings.ToLower(r.Stderr), "kafka"):
		t.Errorf("the run failed (exit %d) without naming Kafka:\n%s", r.Code, r.Stderr)
	default:
		t.Logf("the run failed its batch during the outage (exit %d); the next run replays it", r.Code)
	}
}
