package kafka_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/crashtest"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/webhook"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// The crash tests run the real `lockstep run` binary with the engine's crash
// test harness (engine/crashtest) and kill it: at a phase boundary of a
// batch (the binary SIGKILLs itself), or with SIGKILL at random instants.

var (
	binOnce sync.Once
	binDir  string // removed by TestMain
	binPath string
	binErr  error
)

// lockstepBinary builds cmd/lockstep once per test binary, when a crash
// test first needs it.
func lockstepBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "kafka-crash"); binErr == nil {
			binPath, binErr = crashtest.Build(binDir)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// scenario is a query spec, its checkpoint and the runs of the binary on it.
type scenario struct {
	t    *testing.T
	dir  string
	spec string   // the manifest, with %[1]s standing for the output (topic or folder)
	env  []string // settings of every run, such as the Schema Registry's credentials
}

func newScenario(t *testing.T, spec string) *scenario {
	return &scenario{t: t, dir: t.TempDir(), spec: spec}
}

// command returns the binary run on checkpoint ckpt writing to out.
func (s *scenario) command(ckpt, out string, env ...string) *exec.Cmd {
	s.t.Helper()
	file := filepath.Join(s.dir, fmt.Sprintf("query-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(file, fmt.Appendf(nil, s.spec, out), 0o644); err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(lockstepBinary(s.t), "run", "-f", file, "--checkpoint", filepath.Join(s.dir, ckpt))
	cmd.Dir = s.dir
	cmd.Env = crashtest.Env(append(slices.Clip(s.env), env...)...)
	return cmd
}

// runOnce runs the binary to its end.
func (s *scenario) runOnce(ckpt, out string, env ...string) crashtest.Result {
	s.t.Helper()
	return crashtest.Run(s.t, s.command(ckpt, out, env...))
}

// finish runs the query to its end on checkpoint "ckpt".
func (s *scenario) finish(out string) {
	s.t.Helper()
	if r := s.runOnce("ckpt", out); r.Code != 0 {
		s.t.Fatalf("final run: exit %d\n%s", r.Code, r.Stderr)
	}
}

// reference runs the query uninterrupted on a fresh checkpoint into out.
func (s *scenario) reference(out string) {
	s.t.Helper()
	if r := s.runOnce("ckpt-reference", out); r.Code != 0 {
		s.t.Fatalf("reference run: exit %d\n%s", r.Code, r.Stderr)
	}
}

// killAt runs the binary until it kills itself at p.
func (s *scenario) killAt(out string, p crashtest.Point) {
	s.t.Helper()
	r := s.runOnce("ckpt", out, p.Env())
	if !r.Killed {
		s.t.Fatalf("the run was not killed at %s: exit %d\n%s", p, r.Code, r.Stderr)
	}
}

// killRandomly runs the binary and SIGKILLs it at random instants within
// span until it was killed kills times; runs that end on their own are
// fine. It returns how many runs ended on their own.
func (s *scenario) killRandomly(out string, kills int, span time.Duration) int {
	s.t.Helper()
	return crashtest.KillRandomly(s.t, kills, span, func(bool) *exec.Cmd { return s.command("ckpt", out) })
}

// timing returns how long an uninterrupted run of the scenario takes.
func (s *scenario) timing(out string) time.Duration {
	s.t.Helper()
	began := time.Now()
	if r := s.runOnce("ckpt-timing", out); r.Code != 0 {
		s.t.Fatalf("timing run: exit %d\n%s", r.Code, r.Stderr)
	}
	return time.Since(began)
}

// ordersSpec is the crash tests' query of orders {id, amount} from source that keeps those
// with a positive amount, then runs the extra steps, into sink. In the spec, %[1] stands for
// the output and %[2]s for the brokers (see withBrokers).
func ordersSpec(source, sink string, steps ...string) string {
	var extra strings.Builder
	for _, st := range steps {
		extra.WriteString("  - " + st + "\n")
	}
	return `apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: crash, namespace: test}
spec:
  sources:
  - name: orders
    ` + source + `
    schema: {columns: [{name: id, type: string}, {name: amount, type: double}]}
  transform:
  - filter: "amount > 0.0"
` + extra.String() + `  sink:
    ` + sink + `
  trigger: {availableNow: true}
`
}

// kafkaOrdersSpec is ordersSpec reading the topic orders from its start, maxOffsets records
// a batch.
func kafkaOrdersSpec(maxOffsets int, sink string, steps ...string) string {
	return ordersSpec(kafkaOrders(maxOffsets, ""), sink, steps...)
}

// kafkaOrders is the source of the topic orders on the brokers, read from its start,
// maxOffsets records a batch, with more settings.
func kafkaOrders(maxOffsets int, more string) string {
	return "kafka: {bootstrapServers: [%[2]s], topics: [orders], startingOffsets: earliest, maxOffsetsPerTrigger: " + strconv.Itoa(maxOffsets) + more + "}"
}

var kafkaToFiles = kafkaOrdersSpec(15, "files: {path: %[1]q, format: json}", `select: [{name: id, expr: id}, {name: amount, expr: amount}, {name: partition, expr: _partition}]`)

// withBrokers fills the brokers into a spec, keeping %[1]s for the output.
func withBrokers(spec string, brokers []string) string {
	return strings.ReplaceAll(spec, "%[2]s", strings.Join(brokers, ","))
}

func produceOrders(t *testing.T, brokers []string, topic string, partitions int32, perPartition int) []string {
	t.Helper()
	createTopic(t, brokers, topic, partitions, nil)
	var kept []string
	for p := range partitions {
		recs, k := orders(topic, p, 0, perPartition)
		produce(t, brokers, recs...)
		kept = append(kept, k...)
	}
	slices.Sort(kept)
	return kept
}

// checkIDs compares got, the rows a crashed run left in its output (what
// names it), with ref, an uninterrupted run's, and their first column, the
// order ids, with want.
func checkIDs(t *testing.T, what string, got, ref []engine.Row, want []string) {
	t.Helper()
	if diff := cmp.Diff(ref, got); diff != "" {
		t.Errorf("%s differs from an uninterrupted run's (-uninterrupted +crashed):\n%s", what, diff)
	}
	checkWantIDs(t, what, got, want)
}

// checkWantIDs compares the first column of rows, the order ids, with want.
func checkWantIDs(t *testing.T, what string, rows []engine.Row, want []string) {
	t.Helper()
	var ids []string
	for _, r := range rows {
		ids = append(ids, r[0].(string))
	}
	slices.Sort(ids)
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("ids in the %s (-want +got):\n%s", what, diff)
	}
}

// TestCrashKafkaToFiles kills a kafka→files query at every phase and at
// random instants: the output equals an uninterrupted run's.
func TestCrashKafkaToFiles(t *testing.T) {
	check := func(t *testing.T, s *scenario, want []string) {
		t.Helper()
		out := filepath.Join(s.dir, "out")
		s.finish(out)
		ref := filepath.Join(s.dir, "ref")
		s.reference(ref)
		checkIDs(t, "output", enginetest.OutputRowsAt(t, out), enginetest.OutputRowsAt(t, ref), want)
	}
	for _, cp := range crashtest.Points() {
		t.Run(cp.String(), func(t *testing.T) {
			brokers := testenv.Kafka(t)
			want := produceOrders(t, brokers, "orders", 3, 20)
			s := newScenario(t, withBrokers(kafkaToFiles, brokers))
			s.killAt(filepath.Join(s.dir, "out"), cp)
			check(t, s, want)
		})
	}
	t.Run("random", func(t *testing.T) {
		brokers := testenv.Kafka(t)
		want := produceOrders(t, brokers, "orders", 3, 100)
		s := newScenario(t, withBrokers(kafkaToFiles, brokers))
		span := s.timing(filepath.Join(s.dir, "timing"))
		s.killRandomly(filepath.Join(s.dir, "out"), 10, span)
		check(t, s, want)
	})
}

var filesToKafka = ordersSpec("files: {path: %[3]q, format: json, maxFilesPerTrigger: 1}",
	"kafka: {bootstrapServers: [%[2]s], topic: %[1]s, keyColumn: id, exactlyOnce: true}")

// writeOrderFiles writes n files of 10 orders each into dir and returns the
// values a read_committed consumer must see.
func writeOrderFiles(t *testing.T, dir string, n int) []string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var want []string
	for f := range n {
		var data []byte
		for i := range 10 {
			id := fmt.Sprintf("f%03d-%d", f, i)
			amount := float64(i%3) - 0.5
			data = fmt.Appendf(data, `{"id":%q,"amount":%g}`+"\n", id, amount)
			if amount > 0 {
				want = append(want, fmt.Sprintf(`{"id":%q,"amount":%g}`, id, amount))
			}
		}
		name := filepath.Join(dir, fmt.Sprintf("orders-%03d.json", f))
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		at := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC).Add(time.Duration(f) * time.Millisecond)
		_ = os.Chtimes(name, at, at)
	}
	slices.Sort(want)
	return want
}

// TestCrashFilesToKafkaExactlyOnce kills a files→kafka query with
// exactlyOnce at every phase (including between the produce and the
// transaction's commit) and at random instants: a read_committed consumer
// sees exactly an uninterrupted run's records.
func TestCrashFilesToKafkaExactlyOnce(t *testing.T) {
	exactlyOnceCrashes(t, 10, values, func(t *testing.T, random bool) (*scenario, []string, []string) {
		brokers := testenv.Kafka(t)
		for _, topic := range []string{"out", "ref", "timing"} {
			createTopic(t, brokers, topic, 3, nil)
		}
		files := 5
		if random {
			files = 30
		}
		in := filepath.Join(t.TempDir(), "in")
		want := writeOrderFiles(t, in, files)
		spec := strings.ReplaceAll(withBrokers(filesToKafka, brokers), "%[3]q", fmt.Sprintf("%q", in))
		return newScenario(t, spec), brokers, want
	})
}

// exactlyOnceCrashes kills a query with an exactly-once Kafka sink writing to the topic "out"
// at every phase and at random instants (kills times): then a read_committed consumer must
// see in "out" what an uninterrupted run writes to "ref", and field of those records must be
// want. setUp makes the scenario (random: for the random kills), its brokers and want.
func exactlyOnceCrashes(t *testing.T, kills int, field func([]consumed) []string, setUp func(t *testing.T, random bool) (*scenario, []string, []string)) {
	check := func(t *testing.T, s *scenario, brokers, want []string) {
		t.Helper()
		s.finish("out")
		s.reference("ref")
		got := field(consume(t, brokers, "out"))
		if diff := cmp.Diff(field(consume(t, brokers, "ref")), got); diff != "" {
			t.Errorf("read_committed output differs from an uninterrupted run's (-uninterrupted +crashed):\n%s", diff)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("read_committed output (-want +got):\n%s", diff)
		}
	}
	for _, cp := range crashtest.Points() {
		t.Run(cp.String(), func(t *testing.T) {
			s, brokers, want := setUp(t, false)
			s.killAt("out", cp)
			check(t, s, brokers, want)
		})
	}
	t.Run("random", func(t *testing.T) {
		s, brokers, want := setUp(t, true)
		span := s.timing("timing")
		s.killRandomly("out", kills, span)
		check(t, s, brokers, want)
	})
}

var kafkaToKafka = kafkaOrdersSpec(25, "kafka: {bootstrapServers: [%[2]s], topic: %[1]s, keyColumn: id}")

// TestCrashKafkaToKafkaAtLeastOnce kills an at-least-once kafka→kafka query
// at every phase and at random instants: nothing is lost; duplicates are
// counted, and every copy of a record carries the same batch key.
func TestCrashKafkaToKafkaAtLeastOnce(t *testing.T) {
	check := func(t *testing.T, s *scenario, brokers, want []string) int {
		t.Helper()
		s.finish("out")
		recs := consume(t, brokers, "out")
		batchOf := map[string]string{}
		var ids []string
		for _, r := range recs {
			if b, ok := batchOf[r.key]; ok && b != r.batch {
				t.Errorf("record %s came in batches %s and %s; a replay must repeat its batch", r.key, b, r.batch)
			}
			batchOf[r.key] = r.batch
			ids = append(ids, r.key)
		}
		slices.Sort(ids)
		distinct := slices.Compact(slices.Clone(ids))
		if diff := cmp.Diff(want, distinct); diff != "" {
			t.Errorf("distinct records (-want +got):\n%s", diff)
		}
		dups := len(ids) - len(distinct)
		t.Logf("%d records for %d distinct: %d duplicates", len(ids), len(distinct), dups)
		return dups
	}
	dupsAt := map[engine.Phase]int{}
	for _, cp := range crashtest.Points() {
		t.Run(cp.String(), func(t *testing.T) {
			brokers := testenv.Kafka(t)
			want := produceOrders(t, brokers, "orders", 2, 40)
			createTopic(t, brokers, "out", 2, nil)
			s := newScenario(t, withBrokers(kafkaToKafka, brokers))
			s.killAt("out", cp)
			dupsAt[cp.Phase] += check(t, s, brokers, want)
		})
	}
	// A kill after the sink wrote a batch and before commits/N replays that
	// batch: its records come twice.
	if dupsAt[engine.PhaseSinkWrite] == 0 || dupsAt[engine.PhaseSinkCommitted] == 0 {
		t.Errorf("kills between the produce and commits/N made no duplicates: %v", dupsAt)
	}
	if dupsAt[engine.PhaseOffsetsWritten] != 0 || dupsAt[engine.PhaseCommitted] != 0 {
		t.Errorf("kills before the produce or after commits/N made duplicates: %v", dupsAt)
	}
	t.Run("random", func(t *testing.T) {
		brokers := testenv.Kafka(t)
		want := produceOrders(t, brokers, "orders", 3, 100)
		createTopic(t, brokers, "out", 2, nil)
		createTopic(t, brokers, "timing", 2, nil)
		s := newScenario(t, withBrokers(kafkaToKafka, brokers))
		span := s.timing("timing")
		s.killRandomly("out", 10, span)
		check(t, s, brokers, want)
	})
}

// kafkaToKafkaExactlyOnce reads batches of 12,000 records (three of them): each streams through the query in
// several chunks (ReadChunks, a chunked transaction), so that random kills land between them.
var kafkaToKafkaExactlyOnce = kafkaOrdersSpec(12_000, "kafka: {bootstrapServers: [%[2]s], topic: %[1]s, keyColumn: id, exactlyOnce: true}")

// TestCrashKafkaToKafkaExactlyOnce kills an exactly-once kafka→kafka query, whose batches are
// read, transformed and produced a chunk at a time, at every phase and at random instants: a
// read_committed consumer sees every kept record once, as an uninterrupted run's.
func TestCrashKafkaToKafkaExactlyOnce(t *testing.T) {
	exactlyOnceCrashes(t, 8, keys, func(t *testing.T, _ bool) (*scenario, []string, []string) {
		brokers := testenv.Kafka(t)
		want := produceOrders(t, brokers, "orders", 3, 12_000)
		for _, topic := range []string{"out", "ref", "timing"} {
			createTopic(t, brokers, topic, 3, nil)
		}
		return newScenario(t, withBrokers(kafkaToKafkaExactlyOnce, brokers)), brokers, want
	})
}

var kafkaToWebhook = kafkaOrdersSpec(15, "webhook: {url: %[1]q, maxRowsPerRequest: 4}")

// hookReceiver records, for every row id, the Idempotency-Keys of the
// requests that delivered it.
type hookReceiver struct {
	mu       sync.Mutex
	keys     map[string][]string
	requests int
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	var body struct {
		Rows []struct {
			ID string `json:"id"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	key := r.Header.Get(webhook.IdempotencyKeyHeader)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests++
	for _, row := range body.Rows {
		h.keys[row.ID] = append(h.keys[row.ID], key)
	}
	w.WriteHeader(http.StatusOK)
}

// TestCrashKafkaToWebhook kills a kafka→webhook query at every phase and at
// random instants: no row is lost, and every delivery of a row carries the
// same Idempotency-Key, so a receiver that de-duplicates by it sees each
// row once.
func TestCrashKafkaToWebhook(t *testing.T) {
	run := func(t *testing.T, kill func(s *scenario, url string)) {
		brokers := testenv.Kafka(t)
		want := produceOrders(t, brokers, "orders", 2, 30)
		h := &hookReceiver{keys: map[string][]string{}}
		srv := httptest.NewServer(h)
		defer srv.Close()
		s := newScenario(t, withBrokers(kafkaToWebhook, brokers))
		kill(s, srv.URL)
		s.finish(srv.URL)
		h.mu.Lock()
		defer h.mu.Unlock()
		var got []string
		dups := 0
		for id, keys := range h.keys {
			got = append(got, id)
			if k := slices.Compact(slices.Clone(keys)); len(k) != 1 {
				t.Errorf("row %s came with keys %v, want one key", id, keys)
			}
			dups += len(keys) - 1
		}
		slices.Sort(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("rows delivered (-want +got):\n%s", diff)
		}
		t.Logf("%d requests; %d rows delivered more than once, each time with its first key", h.requests, dups)
	}
	for _, cp := range crashtest.Points() {
		t.Run(cp.String(), func(t *testing.T) {
			run(t, func(s *scenario, url string) { s.killAt(url, cp) })
		})
	}
	t.Run("random", func(t *testing.T) {
		run(t, func(s *scenario, url string) {
			discard := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
			defer discard.Close()
			span := s.timing(discard.URL)
			s.killRandomly(url, 10, span)
		})
	})
}
