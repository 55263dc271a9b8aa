package delta_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kgo"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// The kafka → delta SIGKILL tests run the query in a child process (see
// crash_test.go); the broker is the test binary's shared Apache Kafka
// broker, so it outlives every killed child, which reaches it over TCP.
// The tests run in parallel, each with a topic of its own.

// producer writes orders to a topic of one test.
type producer struct {
	t       *testing.T
	brokers []string
	topic   string
	cl      *kgo.Client
	n       int // orders written so far
}

func newProducer(t *testing.T) *producer {
	t.Helper()
	brokers, topic := testenv.KafkaTopic(t, "orders")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &producer{t: t, brokers: brokers, topic: topic, cl: cl}
}

// produce writes n more orders and returns the rows queryKafka outputs for
// them, with the partition and offset each record got.
func (pr *producer) produce(n int) []engine.Row {
	pr.t.Helper()
	countries := []string{"de", "fr", "us"}
	var recs []*kgo.Record
	var rows []engine.Row
	for range n {
		i := pr.n
		pr.n++
		id, country, amount := fmt.Sprintf("k-%05d", i), countries[i%3], float64(i)/4
		recs = append(recs, &kgo.Record{Topic: pr.topic, Key: []byte(id),
			Value: fmt.Appendf(nil, `{"id":%q,"country":%q,"amount":%g}`, id, country, amount)})
		rows = append(rows, engine.Row{id, strings.ToUpper(country), amount})
	}
	if err := pr.cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		pr.t.Fatal(err)
	}
	for i, r := range recs { // the client set each record's partition and offset
		rows[i] = append(rows[i], int64(r.Partition), r.Offset)
	}
	return rows
}

// queryKafka is kafka → delta: each order with the partition and offset it
// was read from, at most 5 records a batch, into a table partitioned by
// country.
func (p *pipeline) queryKafka(pr *producer) *v1.StreamingQuery {
	return querytest.Make("kafka-to-delta", "shop").
		KafkaSource("orders", pr.brokers[0], pr.topic,
			querytest.Col("id", v1.TypeString), querytest.Col("country", v1.TypeString), querytest.Col("amount", v1.TypeDouble)).
		EditSource("orders", func(s *v1.Source) {
			s.Kafka.StartingOffsets = "earliest"
			s.Kafka.MaxOffsetsPerTrigger = new(int64(5))
		}).
		Select(querytest.As("id", "id"), querytest.As("country", "country.upperAscii()"), querytest.As("amount", "amount"),
			querytest.As("partition", v1.ColumnKafkaPartition), querytest.As("offset", v1.ColumnKafkaOffset)).
		DeltaSink(p.table, "country").
		Checkpoint(p.ckptA).
		AvailableNow().Obj()
}

// checkKafkaTable checks the table after a run to the end that summed up
// as sum: its content is every order produced (p.want), each once, and
// equals an uninterrupted run's on a fresh table and checkpoint; each batch
// is one table commit.
func (p *pipeline) checkKafkaTable(t *testing.T, pr *producer, sum engine.Summary) {
	t.Helper()
	p.checkTable(t, sum)
	ref := newPipeline(t, p.kind)
	ref.run(t, ref.queryKafka(pr))
	_, want := ref.tableRows(t)
	if _, got := p.tableRows(t); !cmp.Equal(want, got) {
		t.Errorf("table content differs from an uninterrupted run's (-uninterrupted +crashed):\n%s", cmp.Diff(want, got))
	}
}

// SIGKILL at each phase of the first batch (which also records where the
// source starts) and of the second, more records, then a run to the end:
// the table's content equals an uninterrupted run's, with one commit per
// batch.
func TestKafkaToDeltaSIGKILLAtEveryPhase(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			for _, phase := range engine.Phases() {
				for _, batch := range []int64{0, 1} {
					t.Run(fmt.Sprintf("%s:%d", phase, batch), func(t *testing.T) {
						t.Parallel()
						pr := newProducer(t)
						p := newPipeline(t, kind)
						p.want = pr.produce(23)
						p.killAt(t, p.queryKafka(pr), phase, batch)
						p.want = append(p.want, pr.produce(9)...)
						p.checkKafkaTable(t, pr, p.runToEnd(t, p.queryKafka(pr)))
					})
				}
			}
		})
	}
}

// SIGKILL at 50 random instants of a kafka → delta query, with records
// produced before every run, then a run to the end: the table's content
// equals an uninterrupted run's, with one commit per batch.
func TestKafkaToDeltaSIGKILLAtRandomInstants(t *testing.T) {
	const kills = 50
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			pr := newProducer(t)
			p := newPipeline(t, kind)
			seed := time.Now().UnixNano()
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(uint64(seed), 9))
			q := p.queryKafka(pr)
			tbl := delta.Open(p.folder(t, p.table))
			version := int64(-1)
			n, finished, early := 0, 0, 0
			for n < kills {
				p.want = append(p.want, pr.produce(6)...)
				// Kill at a random instant of the run's first 150 ms of
				// batches (a batch takes a few ms to tens of ms).
				err := killAfterStart(t, p.child(t, q), time.Duration(rng.IntN(150_000))*time.Microsecond)
				before := version
				if s, err := tbl.Snapshot(context.Background()); err == nil {
					version = s.Version
				}
				switch {
				case killed(err):
					n++
					if version == before {
						early++
					}
				case err == nil:
					finished++
				default:
					t.Fatalf("child run: %v", err)
				}
			}
			sum := p.runToEnd(t, q)
			p.checkKafkaTable(t, pr, sum)
			t.Logf("%d kills (%d before the run's first table commit), %d runs that finished first; %d batches, %d records",
				n, early, finished, sum.LastCommitted+1, len(p.want))
		})
	}
}
