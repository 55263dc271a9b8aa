package kafka_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// lossCase sets up a source that read t/0 up to offset 4 of 10, then removes
// records 4..6 while the query is stopped, with remove.
type lossCase struct {
	name   string
	remove func(t *testing.T, brokers []string)
}

func deleteRecords(t *testing.T, brokers []string) {
	t.Helper()
	o := kadm.Offsets{}
	o.AddOffset("t", 0, 7, -1)
	resp, err := admin(t, brokers).DeleteRecords(testContext(t), o)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("delete records: %v", err)
	}
}

// expire sets retention.ms on the topic and waits until the broker's
// cleaner removed the old records, as retention does while a query is
// stopped.
func expire(t *testing.T, brokers []string) {
	t.Helper()
	adm := admin(t, brokers)
	ctx := testContext(t)
	ms := "600000" // 10 minutes: the old records only
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &ms}}, "t"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	for {
		l, err := adm.ListStartOffsets(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := l.Lookup("t", 0); o.Offset >= 7 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("retention removed nothing")
		}
		time.Sleep(50 * time.Millisecond)
	}
	none := "-1"
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &none}}, "t"); err != nil {
		t.Fatal(err)
	}
}

func lossCases() []lossCase {
	return []lossCase{{"DeleteRecords", deleteRecords}, {"retention", expire}}
}

// setUpLoss returns brokers, the end offsets of a committed batch that read
// t/0 up to offset 4, and the source's checkpoint folder. Then, while the
// query is stopped, records 7..9 arrive and remove (if any) removes 4..6.
// Records 0..6 are an hour old, so retention takes them and not 7..9:
// Kafka's retention removes whole segments, by their newest record, and
// segment.ms of a minute rolls a new segment when 7..9 arrive an hour after
// the first record of the old one.
func setUpLoss(t *testing.T, remove func(*testing.T, []string)) (brokers []string, end engine.Offset, dir string) {
	t.Helper()
	brokers = testenv.Kafka(t) // its log.retention.check.interval.ms is short
	minute := "60000"
	createTopic(t, brokers, "t", 1, map[string]*string{"segment.ms": &minute})
	old := jsonRecords("t", 0, 0, 7)
	for _, r := range old {
		r.Timestamp = time.Now().Add(-time.Hour)
	}
	produce(t, brokers, old...)
	dir = t.TempDir()
	spec := kafkaSpec(brokers, "t")
	four := int64(4)
	spec.Kafka.MaxOffsetsPerTrigger = &four
	s := newSource(t, spec, dir)
	p := plan(t, s, 0, nil, true)
	if string(p.End) != `{"t":{"0":4}}` {
		t.Fatalf("batch 0 planned %s", p.End)
	}
	read(t, s, 0, nil, p.End)
	s.Close()
	produce(t, brokers, jsonRecords("t", 0, 7, 3)...)
	if remove != nil {
		remove(t, brokers)
	}
	return brokers, p.End, dir
}

func TestFailOnDataLossStopsTheQuery(t *testing.T) {
	for _, c := range lossCases() {
		t.Run(c.name, func(t *testing.T) {
			brokers, end, dir := setUpLoss(t, c.remove)
			s := newSource(t, kafkaSpec(brokers, "t"), dir)
			_, err := s.Plan(testContext(t), engine.PlanRequest{Batch: 1, Start: end, Limit: true})
			var loss *kafka.DataLossError
			if !errors.As(err, &loss) || loss.Topic != "t" || loss.Partition != 0 || loss.From != 4 || loss.Available != 7 {
				t.Fatalf("plan after records went: %v, want a DataLossError for t/0 from 4 to 7", err)
			}
			for _, want := range []string{"topic t partition 0", "offsets 4 to 6", "failOnDataLoss: false"} {
				if !contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestNoFailOnDataLossSkipsAndCounts(t *testing.T) {
	for _, c := range lossCases() {
		t.Run(c.name, func(t *testing.T) {
			brokers, end, dir := setUpLoss(t, c.remove)
			spec := kafkaSpec(brokers, "t")
			no := false
			spec.Kafka.FailOnDataLoss = &no
			s := newSource(t, spec, dir)
			p := plan(t, s, 1, end, true)
			if string(p.End) != `{"t":{"0":10}}` {
				t.Fatalf("batch 1 planned %s, want up to 10", p.End)
			}
			if got := ids(read(t, s, 1, end, p.End)); !slices.Equal(got, []string{"t-0-7", "t-0-8", "t-0-9"}) {
				t.Fatalf("batch 1 read %v, want t-0-7..9", got)
			}
			if n := s.LostRecords(); n != 3 {
				t.Errorf("LostRecords = %d, want 3", n)
			}
		})
	}
}

// TestDataLossOnReplay removes records of a batch that was planned but not
// committed: the replay reads exactly its range or reports the loss.
func TestDataLossOnReplay(t *testing.T) {
	for _, fail := range []bool{true, false} {
		t.Run(map[bool]string{true: "fail", false: "skip"}[fail], func(t *testing.T) {
			brokers, end, dir := setUpLoss(t, nil)
			spec := kafkaSpec(brokers, "t")
			spec.Kafka.FailOnDataLoss = &fail
			s := newSource(t, spec, dir)
			p := plan(t, s, 1, end, true)
			s.Close()
			deleteRecords(t, brokers) // the run died; records 4..6 go
			s = newSource(t, spec, dir)
			res, err := s.Read(testContext(t), engine.ReadRequest{Batch: 1, Start: end, End: p.End})
			if fail {
				var loss *kafka.DataLossError
				if !errors.As(err, &loss) || loss.From != 4 || loss.Available != 7 {
					t.Fatalf("replay: %v, want a DataLossError from 4 to 7", err)
				}
				return
			}
			if err != nil || !slices.Equal(ids(res.Rows), []string{"t-0-7", "t-0-8", "t-0-9"}) || s.LostRecords() != 3 {
				t.Fatalf("replay: %v, rows %v, lost %d", err, ids(res.Rows), s.LostRecords())
			}
		})
	}
}

func TestDataLossVanishedPartition(t *testing.T) {
	for _, fail := range []bool{true, false} {
		t.Run(map[bool]string{true: "fail", false: "skip"}[fail], func(t *testing.T) {
			brokers := testenv.Kafka(t)
			createTopic(t, brokers, "a", 1, nil)
			createTopic(t, brokers, "b", 1, nil)
			produce(t, brokers, jsonRecords("a", 0, 0, 2)...)
			produce(t, brokers, jsonRecords("b", 0, 0, 2)...)
			spec := kafkaSpec(brokers, "a", "b")
			spec.Kafka.FailOnDataLoss = &fail
			dir := t.TempDir()
			s := newSource(t, spec, dir)
			p := plan(t, s, 0, nil, true)
			read(t, s, 0, nil, p.End)
			if _, err := admin(t, brokers).DeleteTopic(testContext(t), "b"); err != nil {
				t.Fatal(err)
			}
			produce(t, brokers, jsonRecords("a", 0, 2, 1)...)
			p1, err := s.Plan(testContext(t), engine.PlanRequest{Batch: 1, Start: p.End, Limit: true})
			if fail {
				var loss *kafka.DataLossError
				if !errors.As(err, &loss) || loss.Topic != "b" || loss.Available != -1 || !contains(err.Error(), "is gone") {
					t.Fatalf("plan with topic b deleted: %v", err)
				}
				return
			}
			if err != nil || string(p1.End) != `{"a":{"0":3}}` {
				t.Fatalf("plan with topic b deleted: %v, end %s", err, p1.End)
			}
		})
	}
}

// TestRetained: a rebuild needs every record the committed batches read; a partition whose
// log start moved past the first of them, or a topic that is gone, says so.
func TestRetained(t *testing.T) {
	brokers, end, dir := setUpLoss(t, nil)
	s := newSource(t, kafkaSpec(brokers, "t"), dir)
	if err := s.Retained(testContext(t), end); err != nil {
		t.Fatalf("Retained with every record there: %v", err)
	}
	deleteRecords(t, brokers)
	want := "Kafka partition t-0 starts at offset 7 now; the committed batches read it from offset 0, so offsets 0–6 are gone"
	if err := s.Retained(testContext(t), end); err == nil || !contains(err.Error(), want) {
		t.Errorf("Retained after records 0..6 went: %v, want %q", err, want)
	}
	if _, err := admin(t, brokers).DeleteTopic(testContext(t), "t"); err != nil {
		t.Fatal(err)
	}
	// The broker forgets the topic a moment after it answers the deletion.
	want = "Kafka partition t-0 is gone; the committed batches read its offsets 0–3"
	for deadline := time.Now().Add(wait); ; time.Sleep(50 * time.Millisecond) {
		err := s.Retained(testContext(t), end)
		if err != nil && contains(err.Error(), want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Retained after the topic went: %v, want %q", err, want)
		}
	}
}
