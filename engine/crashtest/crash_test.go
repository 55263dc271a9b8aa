package crashtest

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// lockstep is the binary under test, built once by TestMain.
var lockstep string

func TestMain(m *testing.M) {
	// Most of this package's time is waiting: for a random instant to kill a run, for fsyncs,
	// for a restarted server. Unless -parallel was given, run 4 tests at once rather than
	// GOMAXPROCS, which on 2 cores made this the suite's longest package by far.
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", "4")
	}
	dir, err := os.MkdirTemp("", "crashtest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if lockstep, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "crashtest:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	testenv.Main(m)
}

// query is the files→files query under test: a filter and a projection,
// one or two files a batch, everything available now.
const query = `apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: crash, namespace: test}
spec:
  sources:
  - name: orders
    files: {path: %q, format: json, maxFilesPerTrigger: %d}
    schema:
      columns:
      - {name: id, type: string}
      - {name: amount, type: double}
      - {name: qty, type: long}
  transform:
  - filter: "amount > 0.0"
  - select:
    - {name: id, expr: id}
    - {name: total, expr: "amount * double(qty)"}
  sink:
    files: {path: %q, format: parquet}
  trigger: {availableNow: true}
`

// setup is one scenario's folders: input, output and checkpoint, local or
// on S3, and the rows the query must output for the input written so far.
type setup struct {
	t        *testing.T
	in, out  string // locations
	ckpt     string
	cfg      []s3.Option
	env      []string
	files    int
	perBatch int
	dir      string // scratch folder for specs and logs
	want     []engine.Row
}

func newLocal(t *testing.T, perBatch int) *setup {
	dir := t.TempDir()
	return &setup{t: t, dir: dir, perBatch: perBatch,
		in: filepath.Join(dir, "in"), out: filepath.Join(dir, "out"), ckpt: filepath.Join(dir, "ckpt")}
}

func newS3(t *testing.T, perBatch int) *setup {
	s := testenv.S3(t)
	root := "s3://" + s.Bucket
	return &setup{t: t, dir: t.TempDir(), perBatch: perBatch, env: s.Env(),
		cfg: s.Options(),
		in:  root + "/in", out: root + "/out", ckpt: root + "/ckpt"}
}

// addInput writes n more input files of 10 records each; a third of the
// records are filtered out.
func (s *setup) addInput(n int) {
	s.t.Helper()
	addFiles(s.t, s.in, s.cfg, &s.files, n, "orders-%04d.json", func(i int, b *bytes.Buffer) {
		for j := range 10 {
			id := fmt.Sprintf("o-%04d-%02d", i, j)
			amount := float64(j%3) - 0.5
			qty := int64(j + 1)
			fmt.Fprintf(b, `{"id":%q,"amount":%g,"qty":%d}`+"\n", id, amount, qty)
			if amount > 0 {
				s.want = append(s.want, engine.Row{id, amount * float64(qty)})
			}
		}
	})
}

// addFiles writes n more input files under loc (see putInput), named by the
// format name and numbered on from *files, which it advances; fill writes
// the records of file i.
func addFiles(t testing.TB, loc string, cfg []s3.Option, files *int, n int, name string, fill func(i int, b *bytes.Buffer)) {
	t.Helper()
	for range n {
		i := *files
		*files++
		var b bytes.Buffer
		fill(i, &b)
		putInput(t, loc, cfg, fmt.Sprintf(name, i), b.Bytes(), inputTime(i))
	}
}

// inputTime is the modification time of the i-th input file: distinct, in
// file order.
func inputTime(i int) time.Time {
	return time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)
}

// openFolder opens loc, a local folder or an s3:// location on the server
// cfg points at.
func openFolder(t testing.TB, loc string, cfg []s3.Option) checkpoint.Store {
	t.Helper()
	f, err := s3.OpenFolder(loc, cfg...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// putInput writes data as the file name under loc (see openFolder); a local
// file gets the modification time at, which orders a files source's reads.
func putInput(t testing.TB, loc string, cfg []s3.Option, name string, data []byte, at time.Time) {
	t.Helper()
	if err := openFolder(t, loc, cfg).Put(context.Background(), name, data); err != nil {
		t.Fatal(err)
	}
	if cfg == nil {
		_ = os.Chtimes(filepath.Join(loc, name), at, at)
	}
}

// spec writes the query's manifest for output out and returns its path.
func (s *setup) spec(out string) string {
	s.t.Helper()
	p := filepath.Join(s.dir, fmt.Sprintf("query-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(p, fmt.Appendf(nil, query, s.in, s.perBatch, out), 0o644); err != nil {
		s.t.Fatal(err)
	}
	return p
}

// command returns the binary run on the scenario's checkpoint and output,
// with extra environment variables.
func (s *setup) command(ckpt, out string, env ...string) *exec.Cmd {
	cmd := exec.Command(lockstep, "run", "-f", s.spec(out), "--checkpoint", ckpt)
	cmd.Dir = s.dir
	cmd.Env = Env(append(s.env, env...)...)
	return cmd
}

// runCommand writes manifest into dir under a fresh name and returns `lockstep run` of it on
// the checkpoint ckpt, with env as the run's only settings (see Env).
func runCommand(t testing.TB, dir string, manifest []byte, ckpt string, env ...string) *exec.Cmd {
	t.Helper()
	p := filepath.Join(dir, fmt.Sprintf("query-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(p, manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(lockstep, "run", "-f", p, "--checkpoint", ckpt)
	cmd.Dir = dir
	cmd.Env = Env(env...)
	return cmd
}

// runOnce runs the binary to its end.
func (s *setup) runOnce(ckpt, out string, env ...string) Result {
	s.t.Helper()
	return Run(s.t, s.command(ckpt, out, env...))
}

// finish runs the query to completion and checks the output: the rows of
// the input, each once, equal to an uninterrupted run's.
func (s *setup) finish() {
	s.t.Helper()
	got, uninterrupted := finishRuns(s.t, s.runOnce, s.output, s.ckpt, s.out)
	if diff := cmp.Diff(uninterrupted, got); diff != "" {
		s.t.Errorf("output differs from an uninterrupted run (-uninterrupted +crashed):\n%s", diff)
	}
	want := append([]engine.Row(nil), s.want...)
	enginetest.SortRows(want)
	if diff := cmp.Diff(want, got); diff != "" {
		s.t.Errorf("output differs from the input's rows (-want +got):\n%s", diff)
	}
}

// finishRuns runs a scenario's query to its end on its checkpoint ckpt into out, then once
// uninterrupted over the same input on a fresh checkpoint, and returns both outputs, read
// with output.
func finishRuns(t *testing.T, runOnce func(ckpt, out string, env ...string) Result, output func(out string) []engine.Row, ckpt, out string) (got, uninterrupted []engine.Row) {
	t.Helper()
	if r := runOnce(ckpt, out); r.Code != 0 {
		t.Fatalf("final run: exit %d\n%s", r.Code, r.Stderr)
	}
	got = output(out)
	ref := out + "-reference"
	if r := runOnce(ckpt+"-reference", ref); r.Code != 0 {
		t.Fatalf("reference run: exit %d\n%s", r.Code, r.Stderr)
	}
	return got, output(ref)
}

func (s *setup) output(out string) []engine.Row {
	s.t.Helper()
	return enginetest.OutputRowsAt(s.t, out, s.cfg...)
}

// phaseKills kills the binary at every phase boundary of batches 0 and 2,
// each in a fresh scenario, then lets a run finish.
func phaseKills(t *testing.T, newSetup func(t *testing.T, perBatch int) *setup) {
	for _, p := range Points() {
		t.Run(p.String(), func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, 2)
			s.addInput(7)
			r := s.runOnce(s.ckpt, s.out, p.Env())
			if !r.Killed {
				t.Fatalf("the run was not killed at %s: exit %d\n%s", p, r.Code, r.Stderr)
			}
			s.finish()
		})
	}
}

// randomKills kills the binary at random instants until it was killed
// `kills` times while running, then lets a run finish. Before every run it
// adds two input files, so that every run has work whether or not the run
// before it got to the end.
func randomKills(t *testing.T, s *setup, kills int) {
	// Time a run of 20 batches, and one with nothing to do (start-up).
	const timed = 20
	s.addInput(timed)
	began := time.Now()
	if r := s.runOnce(s.ckpt+"-timing", s.out+"-timing"); r.Code != 0 {
		t.Fatalf("timing run: exit %d\n%s", r.Code, r.Stderr)
	}
	full := time.Since(began)
	began = time.Now()
	if r := s.runOnce(s.ckpt+"-timing", s.out+"-timing"); r.Code != 0 {
		t.Fatalf("timing run: exit %d\n%s", r.Code, r.Stderr)
	}
	startup := time.Since(began)
	perBatch := max(full-startup, time.Millisecond) / timed
	// Kill anywhere from the start to the end of about eight batches.
	span := startup + 8*perBatch
	t.Logf("start-up %s, a batch %s", startup, perBatch)
	finished := KillRandomly(t, kills, span, func(bool) *exec.Cmd {
		s.addInput(2)
		return s.command(s.ckpt, s.out)
	})
	t.Logf("%d runs killed at random instants, %d ran to the end; %d input files", kills, finished, s.files)
	s.finish()
}

func TestPhaseKillsLocal(t *testing.T) { phaseKills(t, newLocal) }

func TestPhaseKillsS3(t *testing.T) { phaseKills(t, newS3) }

func TestRandomKillsLocal(t *testing.T) {
	t.Parallel()
	randomKills(t, newLocal(t, 1), 50)
}

func TestRandomKillsS3(t *testing.T) {
	t.Parallel()
	randomKills(t, newS3(t, 1), 50)
}

// TestTwoEngines starts two engines on one checkpoint at once: one stops
// with "owned by another writer" (exit 3), and the output has no duplicate.
func TestTwoEngines(t *testing.T) {
	for attempt := range 3 {
		s := newLocal(t, 1)
		s.addInput(30)
		var (
			wg      sync.WaitGroup
			results [2]Result
		)
		for i := range results {
			wg.Go(func() { results[i] = s.runOnce(s.ckpt, s.out) })
		}
		wg.Wait()
		var fenced, ok int
		for _, r := range results {
			switch {
			case r.Code == 3 && strings.Contains(r.Stderr, "owned by another writer"):
				fenced++
			case r.Code == 0:
				ok++
			default:
				t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
			}
		}
		if fenced == 0 {
			t.Logf("attempt %d: the engines did not overlap; again", attempt)
			continue
		}
		t.Logf("%d engine(s) stopped as owned by another writer", fenced)
		s.finish()
		return
	}
	t.Fatal("two engines never overlapped in 3 attempts")
}

// TestQuickstartStopsAndResumes runs examples/queries/quickstart.yaml as a
// new user does: Ctrl-C after two batches exits 0 with a summary, and the
// next run says where it resumes.
func TestQuickstartStopsAndResumes(t *testing.T) {
	t.Parallel()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	run := func(untilLine string) (string, Result) {
		cmd := exec.Command(lockstep, "run", "-f", filepath.Join(root, "examples/queries/quickstart.yaml"))
		cmd.Dir = dir // the checkpoint goes to ./.lockstep/checkpoints/default/quickstart
		cmd.Env = Env()
		var stdout, stderr bytes.Buffer
		cmd.Stdout = &stdout
		r := interrupt(t, cmd, &stderr, untilLine, syscall.SIGINT)
		return stdout.String(), r
	}
	out, r := run("batch 1:")
	if r.Code != 0 || !strings.Contains(r.Stderr, "new checkpoint") || !strings.Contains(r.Stderr, "lockstep: stopped:") || !strings.Contains(out, "Batch: 1") {
		t.Fatalf("first run: exit %d\nstderr:\n%s\nstdout:\n%s", r.Code, r.Stderr, out)
	}
	_, r = run("batch ")
	if r.Code != 0 || !strings.Contains(r.Stderr, "resuming from batch") {
		t.Fatalf("second run: exit %d\n%s", r.Code, r.Stderr)
	}
}

// TestSecondSignalExitsAtOnce stops a run in the middle of a batch with two
// signals: it exits 1 without committing, and the next run completes the
// batch exactly once. The proxy in front of S3 holds the batch's first
// output write until the run exits, so the batch is surely under way when
// the signals come, however fast or loaded the machine.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	srv := testenv.S3(t)
	proxy := testenv.NewS3Proxy(t, srv, 1)
	root := "s3://" + srv.Bucket
	s := &setup{t: t, dir: t.TempDir(), perBatch: 3, cfg: srv.Options(), env: proxy.Server().Env(),
		in: root + "/in", out: root + "/out", ckpt: root + "/ckpt"}
	s.addInput(3)
	held := make(chan struct{})
	var once sync.Once
	inj := proxy.Inject(testenv.Rule{Kind: testenv.Custom, Match: testenv.Match{Method: "PUT", Key: `^out/`},
		Handler: func(w http.ResponseWriter, r *http.Request, _ http.Handler) {
			once.Do(func() { close(held) })
			<-r.Context().Done()
		}})
	cmd := s.command(s.ckpt, s.out)
	var stderr bytes.Buffer
	r := runWatching(t, cmd, &stderr, func(line string) {
		switch {
		case strings.HasPrefix(line, "lockstep: query "): // the first line: cmd has started
			go func() {
				<-held
				_ = cmd.Process.Signal(syscall.SIGINT)
			}()
		case strings.HasPrefix(line, "lockstep: stopping after the current batch"):
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
	})
	if r.Code != 1 || !strings.Contains(r.Stderr, "exiting at once") || strings.Contains(r.Stderr, "batch 0:") {
		t.Fatalf("exit %d, want 1 before batch 0 committed:\n%s", r.Code, r.Stderr)
	}
	inj.Remove()
	s.finish()
}

// interrupt runs cmd, copying its standard error to stderr, and sends it
// sig once a line starts with untilLine.
func interrupt(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer, untilLine string, sig os.Signal) Result {
	t.Helper()
	sent := false
	return runWatching(t, cmd, stderr, func(line string) {
		if !sent && strings.HasPrefix(line, untilLine) {
			_ = cmd.Process.Signal(sig)
			sent = true
		}
	})
}

// runWatching runs cmd to its end, copying its standard error to stderr and
// handing each line to onLine as it comes, and kills it when it writes nothing for RunTimeout.
func runWatching(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer, onLine func(line string)) Result {
	t.Helper()
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := newSilence(stderr, cmd, RunTimeout)
	defer w.stop()
	lines := bufio.NewScanner(pipe)
	for lines.Scan() {
		_, _ = w.Write([]byte(lines.Text() + "\n"))
		onLine(lines.Text())
	}
	return result(cmd.Wait(), stderr.String())
}
