package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/engine/delta/deltatest"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/engine/sink"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// faultQuery is the query of a fault soak: files in, a transform, a files or
// delta sink, everything available now.
const faultQuery = `apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: faults, namespace: test}
spec:
  sources:
  - name: orders
    %s
    schema:
      columns:
      - {name: id, type: string}
      - {name: amount, type: double}
      - {name: qty, type: long}
      - {name: ts, type: timestamp}
  transform:
%s
  sink:
    %s: {path: %q}
  outputMode: %s
  stateStore: {partitions: 2}
  trigger: {availableNow: true}
`

// faultScenarios are the pipelines soaked in faults; mode is the output
// mode, append when empty.
var faultScenarios = []struct {
	name, source, sink, transform, mode string
}{
	{"files-to-files", "files", "files", `
  - filter: "amount > 0.0"
  - select: [{name: id, expr: id}, {name: total, expr: "amount * double(qty)"}]`, ""},
	{"files-to-delta", "files", "delta", `
  - filter: "amount > 0.0"
  - select: [{name: id, expr: id}, {name: total, expr: "amount * double(qty)"}]`, ""},
	{"kafka-to-delta", "kafka", "delta", `
  - select: [{name: id, expr: id}, {name: total, expr: "amount * double(qty)"}]`, ""},
	{"window-to-delta", "files", "delta", `
  - watermark: {column: ts, delay: 2s}
  - aggregate:
      groupBy: [{window: {column: ts, duration: 10s}}]
      aggregates: [{name: orders, function: count}, {name: revenue, function: sum, column: amount}]`, ""},
	// Update mode: each batch MERGEs the windows and keys it changed into
	// the table (copy-on-write: files removed and rewritten).
	{"window-update-to-delta", "files", "delta", `
  - watermark: {column: ts, delay: 2s}
  - aggregate:
      groupBy: [{window: {column: ts, duration: 10s}}]
      aggregates: [{name: orders, function: count}, {name: revenue, function: sum, column: amount}]`, "update"},
	{"keyed-update-to-delta", "files", "delta", `
  - aggregate:
      groupBy: [{column: qty}]
      aggregates: [{name: orders, function: count}, {name: revenue, function: sum, column: amount}, {name: last, function: max, column: ts}]`, "update"},
}

// faultReport is what a soak writes to $LOCKSTEP_FAULT_REPORT/<test>.json,
// for docs/reliability.md.
type faultReport struct {
	Store, Scenario string
	Seed            uint64
	Requests        int
	Faults          map[string]int // "<kind> <operation>" → count
	Runs            map[string]int // "killed", "exit 0", "exit 1", …
	OutageSeconds   int
	RowsWanted      int
	RowsLost        int
	RowsDuplicated  int
	MissingFiles    int
}

// TestFaultSoak runs each pipeline on S3 (versitygw and MinIO) behind a proxy
// that gives 5% of the requests a fault (a lost reply, 503 SlowDown, 500, a
// reset, a delay) and takes S3 away for 20 s once, while runs of the real
// binary are SIGKILLed at random instants and restarted after every exit,
// as Kubernetes would. The output must equal an uninterrupted run's: no
// row lost, none duplicated, no file that a manifest entry or a Delta
// version references missing. The keyed update aggregation into PostgreSQL
// (input and checkpoint on S3 through the proxy) must leave the table equal
// to the aggregation of all input that the test computes.
func TestFaultSoak(t *testing.T) {
	for _, kind := range testenv.S3Kinds() {
		for _, sc := range faultScenarios {
			t.Run(kind+"/"+sc.name, func(t *testing.T) {
				t.Parallel()
				mode := sc.mode
				if mode == "" {
					mode = "append"
				}
				soak(t, kind, sc.source, sc.sink, sc.transform, mode)
			})
		}
		for _, agg := range upsertAggs {
			if agg.name != "keyed" {
				continue
			}
			t.Run(kind+"/"+agg.name+"-update-to-postgres", func(t *testing.T) {
				t.Parallel()
				soakUpsert(t, kind, agg)
			})
		}
	}
}

func soak(t *testing.T, kind, sourceKind, sinkKind, transform, mode string) {
	srv := testenv.S3Of(t, kind)
	seed := uint64(time.Now().UnixNano())
	proxy := testenv.NewS3Proxy(t, srv, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	root := "s3://" + srv.Bucket
	dir := t.TempDir()
	var brokers []string
	var topic string
	source := fmt.Sprintf("files: {path: %q, format: json, maxFilesPerTrigger: 1}", root+"/in")
	if sourceKind == "kafka" {
		brokers, topic = testenv.KafkaTopic(t, "orders") // a topic of its own: the soaks run in parallel
		source = fmt.Sprintf("kafka: {bootstrapServers: [%q], topics: [%s], startingOffsets: earliest, maxOffsetsPerTrigger: 10, format: json}", brokers[0], topic)
	}
	spec := func(out string) string {
		p := filepath.Join(dir, fmt.Sprintf("query-%d.yaml", time.Now().UnixNano()))
		body := fmt.Sprintf(faultQuery, source, strings.TrimPrefix(transform, "\n"), sinkKind, out, mode)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	command := func(s *testenv.S3Server, ckpt, out string) *exec.Cmd {
		cmd := exec.Command(lockstep, "run", "-f", spec(out), "--checkpoint", ckpt)
		cmd.Dir = dir
		cmd.Env = Env(s.Env()...)
		return cmd
	}
	addInput := soakInput(t, srv, root+"/in", brokers, topic)

	report := faultReport{Store: kind, Scenario: t.Name(), Seed: seed}
	viaProxy := proxy.Server()
	faultRuns(t, proxy, rng, &report, addInput, func() *exec.Cmd { return command(viaProxy, root+"/ckpt", root+"/out") })
	if r := Run(t, command(viaProxy, root+"/ckpt", root+"/out")); r.Code != 0 {
		t.Fatalf("final run: exit %d\n%s", r.Code, r.Stderr)
	}
	if r := Run(t, command(srv, root+"/ckpt-reference", root+"/out-reference")); r.Code != 0 {
		t.Fatalf("reference run: exit %d\n%s", r.Code, r.Stderr)
	}
	got, missing := soakOutput(t, sinkKind, root+"/out", srv)
	want, _ := soakOutput(t, sinkKind, root+"/out-reference", srv)
	report.RowsWanted, report.MissingFiles = len(want), missing
	report.RowsLost, report.RowsDuplicated = diffRows(want, got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("output differs from an uninterrupted run: %d rows lost, %d duplicated (-uninterrupted +faulted):\n%s",
			report.RowsLost, report.RowsDuplicated, diff)
	}
	if missing > 0 {
		t.Errorf("%d referenced files are missing", missing)
	}
	if sinkKind == "delta" && mode == "update" {
		// The MERGEd table at every version, as DuckDB and delta-go read it.
		versions := deltatest.EveryVersion(t, localCopy(t, root+"/out", srv.Options()))
		t.Logf("%d versions read by DuckDB and delta-go", len(versions))
	}
	t.Logf("%d requests, faults %v, runs %v, %d rows", report.Requests, report.Faults, report.Runs, len(got))
	writeReport(t, report)
}

// soakUpsert is soak for an update-mode aggregation into PostgreSQL (the
// server not faulted): its input and checkpoint are on S3 behind the proxy,
// and the table it leaves must hold the aggregation of all input, computed
// by the test, with no key twice and each batch once in lockstep_batches.
func soakUpsert(t *testing.T, kind string, agg upsertAgg) {
	srv := testenv.S3Of(t, kind)
	seed := uint64(time.Now().UnixNano())
	proxy := testenv.NewS3Proxy(t, srv, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	u := newUpsertOn(t, agg, "postgres", srv, "")
	// The engine reaches S3 through the proxy: its variables come after the
	// server's in the environment, and the last of each name wins.
	viaProxy := proxy.Server().Env()
	report := faultReport{Store: kind, Scenario: t.Name(), Seed: seed}
	faultRuns(t, proxy, rng, &report, u.addInput, func() *exec.Cmd { return u.command(viaProxy...) })
	want, got := u.finish(viaProxy...)
	report.RowsWanted = len(want)
	report.RowsLost, report.RowsDuplicated = diffRows(want, got)
	t.Logf("%d requests, faults %v, runs %v, %d rows; %d input files", report.Requests, report.Faults, report.Runs, len(got), u.files)
	writeReport(t, report)
}

// faultRuns runs a query 14 times, its S3 requests going through proxy,
// which faults 5% of them and takes S3 away for 20 s in the middle of one
// run. Before each run addInput(2) adds input; each run is SIGKILLed at a
// random instant within 4 s, unless it exits first, and is restarted after
// every exit, as Kubernetes would. It leaves the proxy clear, and counts
// the runs, requests and faults into report.
func faultRuns(t *testing.T, proxy *testenv.S3Proxy, rng *rand.Rand, report *faultReport, addInput func(n int), command func() *exec.Cmd) {
	t.Helper()
	const runs, outage = 14, 20 * time.Second
	outageRun := 3 + rng.IntN(runs-6)
	proxy.Random(0.05)
	report.Runs, report.OutageSeconds = map[string]int{}, int(outage.Seconds())
	for run := range runs {
		addInput(2)
		cmd := command()
		exited := start(t, cmd)
		var r Result
		if run == outageRun {
			// S3 goes away in the middle of the run, which must ride it out.
			time.Sleep(time.Duration(rng.Int64N(int64(time.Second))))
			outageMode := []testenv.OutageMode{testenv.OutageRefuse, testenv.OutageReset, testenv.OutageUnavailable}[rng.IntN(3)]
			t.Logf("run %d: S3 outage of %s (%s)", run, outage, outageMode)
			proxy.Outage(outage, outageMode)
			r = <-exited
		} else {
			select {
			case r = <-exited:
			case <-time.After(time.Duration(rng.Int64N(int64(4 * time.Second)))):
				_ = cmd.Process.Signal(syscall.SIGKILL)
				r = <-exited
			}
		}
		switch {
		case r.Killed:
			report.Runs["killed"]++
		default:
			report.Runs[fmt.Sprintf("exit %d", r.Code)]++
			if r.Code != 0 {
				t.Logf("run %d: exit %d (restarted, as Kubernetes would):\n%s", run, r.Code, lastLines(r.Stderr, 5))
			}
		}
		if run == outageRun && !r.Killed && r.Code != 0 {
			t.Errorf("run %d: an outage of %s, shorter than the operation timeout, ended the run: exit %d\n%s", run, outage, r.Code, r.Stderr)
		}
	}
	proxy.Clear()
	proxy.EndOutage()
	report.Requests = proxy.Requests()
	report.Faults = classifyFaults(proxy.Faults())
}

// soakInput returns a function that adds n more input files (or batches of
// Kafka records to topic, when brokers are given) of 10 orders each, directly
// to the server, not through the proxy.
func soakInput(t *testing.T, srv *testenv.S3Server, in string, brokers []string, topic string) func(n int) {
	var put func(name string, lines [][]byte)
	if brokers != nil {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		put = func(_ string, lines [][]byte) {
			var recs []*kgo.Record
			for _, l := range lines {
				recs = append(recs, &kgo.Record{Value: l})
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		f, err := s3.OpenFolder(in, srv.Options()...)
		if err != nil {
			t.Fatal(err)
		}
		put = func(name string, lines [][]byte) {
			if err := f.Put(context.Background(), name, bytes.Join(lines, []byte("\n"))); err != nil {
				t.Fatal(err)
			}
		}
	}
	files := 0
	return func(n int) {
		for range n {
			var lines [][]byte
			for j := range 10 {
				at := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC).Add(time.Duration(files*10+j) * 300 * time.Millisecond)
				lines = append(lines, fmt.Appendf(nil, `{"id":"o-%04d-%d","amount":%g,"qty":%d,"ts":%q}`, files, j, float64(j%3)-0.5, j+1, at.Format(time.RFC3339Nano)))
			}
			put(fmt.Sprintf("orders-%04d.json", files), lines)
			files++
		}
	}
}

// soakOutput returns the committed rows of the output at loc, sorted, and
// how many files that some committed manifest entry or Delta version
// references are missing.
func soakOutput(t *testing.T, sinkKind, loc string, srv *testenv.S3Server) ([]engine.Row, int) {
	t.Helper()
	ctx := context.Background()
	f, err := s3.OpenFolder(loc, srv.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := f.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	exists := map[string]bool{}
	for _, o := range objs {
		exists[o.Key] = true
	}
	missing := 0
	var rows []engine.Row
	switch sinkKind {
	case "files":
		ms, err := sink.ReadManifest(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			for _, df := range m.Files {
				if !exists[df.Path] {
					t.Errorf("batch %d's manifest entry names %s, which is missing", m.BatchID, df.Path)
					missing++
				}
			}
		}
		if missing == 0 {
			rows = enginetest.OutputRows(t, f)
		}
	case "delta":
		tbl := delta.Open(f)
		snaps := deltatest.Snapshots(t, tbl)
		latest := snaps[len(snaps)-1]
		for _, s := range snaps {
			for _, a := range s.Files() {
				if p := unescape(a.Path); !exists[p] {
					t.Errorf("version %d references %s, which is missing", s.Version, p)
					missing++
				}
			}
		}
		if missing == 0 {
			_, rs, err := tbl.ReadAll(ctx, latest)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				rows = append(rows, engine.Row(r))
			}
		}
	}
	enginetest.SortRows(rows)
	return rows, missing
}

// unescape turns a Delta add path (URL-escaped per segment) back into a key.
func unescape(p string) string {
	if k, err := url.PathUnescape(p); err == nil {
		return k
	}
	return p
}

// diffRows counts the rows of want missing from got and the rows of got
// beyond want's count, both sorted.
func diffRows[R any](want, got []R) (lost, dup int) {
	count := map[string]int{}
	for _, r := range want {
		count[fmt.Sprint(r)]++
	}
	for _, r := range got {
		count[fmt.Sprint(r)]--
	}
	for _, n := range count {
		if n > 0 {
			lost += n
		} else {
			dup -= n
		}
	}
	return lost, dup
}

var (
	checkpointKey = regexp.MustCompile(`(^|/)ckpt/`)
	inputKey      = regexp.MustCompile(`(^|/)in/`)
	commitKey     = regexp.MustCompile(`_delta_log/\d+\.json$|_lockstep_manifest/`)
)

// classifyFaults counts the injected faults by kind and the operation they
// hit: the checkpoint, the source's reads, the sink's data files (written, or
// read by a MERGE), its commit (Delta log entry, manifest entry) or its reads
// of its log.
func classifyFaults(faults []testenv.Fault) map[string]int {
	out := map[string]int{}
	for _, f := range faults {
		var op string
		switch {
		case f.Kind == testenv.Outage:
			op = "outage window"
		case f.Outage:
			op = "during the outage"
		case checkpointKey.MatchString(f.Key):
			op = "checkpoint " + strings.ToLower(f.Method)
		case inputKey.MatchString(f.Key):
			op = "source read"
		case f.Method == "PUT" && commitKey.MatchString(f.Key):
			op = "sink commit"
		case f.Method == "PUT":
			op = "sink data file"
		case f.Method == "GET" && strings.HasSuffix(f.Key, ".parquet"):
			op = "sink data file read" // a MERGE reads the files it rewrites
		case f.List || f.Method == "GET" || f.Method == "HEAD":
			op = "sink log read"
		default:
			op = "sink " + strings.ToLower(f.Method)
		}
		out[string(f.Kind)+" / "+op]++
	}
	return out
}

func writeReport(t *testing.T, r faultReport) {
	dir := os.Getenv("LOCKSTEP_FAULT_REPORT")
	if dir == "" {
		return
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	name := strings.NewReplacer("/", "_").Replace(t.Name()) + ".json"
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Error(err)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// TestOutageLongerThanTheOperationTimeout takes S3 away for longer than the
// operation timeout: the run fails the batch with an error that names the
// timeout and how to raise it, and the restart replays the batch once S3 is
// back, exactly once.
func TestOutageLongerThanTheOperationTimeout(t *testing.T) {
	t.Parallel()
	srv := testenv.S3(t)
	proxy := testenv.NewS3Proxy(t, srv, 7)
	root := "s3://" + srv.Bucket
	s := &setup{t: t, dir: t.TempDir(), perBatch: 1, cfg: srv.Options(),
		env: append(proxy.Server().Env(), "LOCKSTEP_S3_OPERATION_TIMEOUT=2s"),
		in:  root + "/in", out: root + "/out", ckpt: root + "/ckpt"}
	s.addInput(3)
	// The outage starts once the engine has planned batch 0 (offsets/0 is
	// written) and lasts well beyond the 2 s timeout.
	inj := proxy.Inject(testenv.Rule{Kind: testenv.Custom, Match: testenv.Match{Method: "PUT", Key: `ckpt/offsets/0+$`},
		Handler: func(w http.ResponseWriter, r *http.Request, forward http.Handler) {
			forward.ServeHTTP(w, r)
			go proxy.Outage(time.Minute, testenv.OutageUnavailable)
		}})
	r := s.runOnce(s.ckpt, s.out)
	if r.Code != 1 || !strings.Contains(r.Stderr, "LOCKSTEP_S3_OPERATION_TIMEOUT") || !strings.Contains(r.Stderr, "gave up after") {
		t.Fatalf("run during a long outage: exit %d, want 1 with an error naming the operation timeout:\n%s", r.Code, r.Stderr)
	}
	if inj.Hits() != 1 {
		t.Fatalf("the outage did not start at batch 0 (%d hits)", inj.Hits())
	}
	proxy.EndOutage()
	s.finish()
}
