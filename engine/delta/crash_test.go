package delta_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/engine/kafka"
	"github.com/lockstep-dev/lockstep/engine/sink"
	"github.com/lockstep-dev/lockstep/engine/source"
)

// The crash tests run the query in a child process (this test binary again,
// in child mode) and kill it with SIGKILL: at each phase of a batch (the
// child kills itself there) and at random instants (the parent kills it).
const (
	envChild   = "LOCKSTEP_DELTA_CHILD"    // the query's JSON file: run it and exit
	envCrashAt = "LOCKSTEP_DELTA_CRASH_AT" // <phase>:<batch>: SIGKILL self there
)

// runChild runs the query in file to the end (availableNow) and returns the
// exit code; the summary goes to stdout.
func runChild(file string) int {
	data, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var q v1.StreamingQuery
	if err := json.Unmarshal(data, &q); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	reg := engine.NewRegistry()
	for _, err := range []error{
		reg.RegisterSource(v1.SourceFiles, source.FilesSpec(), source.NewFiles),
		reg.RegisterSource(v1.SourceDelta, delta.SourceSpec(), delta.NewSource),
		reg.RegisterSource(v1.SourceKafka, kafka.SourceSpec(), kafka.NewSource),
		reg.RegisterSink(v1.SinkFiles, sink.FilesSpec(), sink.NewFiles),
		reg.RegisterSink(v1.SinkDelta, delta.SinkSpec(), delta.NewSink),
	} {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	var opts []engine.Option
	if at := os.Getenv(envCrashAt); at != "" {
		phase, batch, _ := strings.Cut(at, ":")
		n, _ := strconv.ParseInt(batch, 10, 64)
		opts = append(opts, engine.WithPhaseHook(func(p engine.Phase, b int64) {
			if string(p) == phase && b == n {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
		}))
	}
	opts = append(opts, engine.WithObserver(startLine{}))
	eq, err := engine.New(&q, reg, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	sum, err := eq.Run(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	json.NewEncoder(os.Stdout).Encode(sum)
	return 0
}

// startLine prints "started" when the run has claimed its checkpoint, so
// the parent times its kill from there rather than from the process start.
type startLine struct{}

func (startLine) Started(engine.Start)      { fmt.Println("started") }
func (startLine) Committed(engine.Progress) {}

// child returns the command that runs q in a child process on the
// pipeline's stores, with extra environment variables.
func (p *pipeline) child(t *testing.T, q *v1.StreamingQuery, env ...string) *exec.Cmd {
	t.Helper()
	file := filepath.Join(t.TempDir(), "query.json")
	data, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// Under -race a process sleeps 1s at exit unless told not to.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(append(append(os.Environ(), envChild+"="+file, "GORACE="+gorace), p.env...), env...)
	return cmd
}

// runToEnd runs q in a child to the end and returns its summary.
func (p *pipeline) runToEnd(t *testing.T, q *v1.StreamingQuery) engine.Summary {
	t.Helper()
	out, err := p.child(t, q).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("child run: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var sum engine.Summary
	out = bytes.TrimPrefix(out, []byte("started\n"))
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatalf("child summary %q: %v", out, err)
	}
	return sum
}

// killAfterStart runs cmd and SIGKILLs it delay after it printed "started"
// (a child that ends before that line is not killed). It returns how cmd
// ended: nil if it finished first, an error with the child's standard error
// if it failed. A run still going after wait is killed and fails the test.
func killAfterStart(t *testing.T, cmd *exec.Cmd, delay time.Duration) error {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	hung := time.AfterFunc(wait, func() {
		t.Errorf("child run still going after %s; killed", wait)
		cmd.Process.Kill()
	})
	defer hung.Stop()
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line == "started\n" {
		timer := time.AfterFunc(delay, func() { cmd.Process.Kill() })
		defer timer.Stop()
	}
	go io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	if err != nil && !killed(err) {
		return fmt.Errorf("%w\n%s", err, stderr.Bytes())
	}
	return err
}

// killAt runs q in a child that SIGKILLs itself at phase of batch, and
// fails the test unless it was killed there.
func (p *pipeline) killAt(t *testing.T, q *v1.StreamingQuery, phase engine.Phase, batch int64) {
	t.Helper()
	cmd := p.child(t, q, fmt.Sprintf("%s=%s:%d", envCrashAt, phase, batch))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	hung := time.AfterFunc(wait, func() { cmd.Process.Kill() })
	defer hung.Stop()
	if err := cmd.Wait(); !killed(err) || !hung.Stop() {
		t.Fatalf("child run of %s = %v, want killed by SIGKILL at %s of batch %d\n%s", q.Name, err, phase, batch, stderr.Bytes())
	}
}

func killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// SIGKILL at each phase of a batch, then a restart: the table's content
// equals an uninterrupted run's, with one commit per batch.
func TestFilesToDeltaSIGKILLAtEveryPhase(t *testing.T) {
	killAtEveryPhase(t, 6, 1, (*pipeline).queryA, (*pipeline).checkTable)
}

// killAtEveryPhase runs, on every store kind in parallel and for every phase,
// a new pipeline over files input files whose query is SIGKILLed at that
// phase of batch, then run to its end; check judges the end.
func killAtEveryPhase(t *testing.T, files int, batch int64, query func(*pipeline) *v1.StreamingQuery, check func(*pipeline, *testing.T, engine.Summary)) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			for _, phase := range engine.Phases() {
				t.Run(string(phase), func(t *testing.T) {
					p := newPipeline(t, kind)
					p.add(t, files)
					p.killAt(t, query(p), phase, batch)
					check(p, t, p.runToEnd(t, query(p)))
				})
			}
		})
	}
}

// SIGKILL at 50 random instants of a files → delta query, then a run to the
// end: no row lost, none duplicated, one commit per batch.
func TestFilesToDeltaSIGKILLAtRandomInstants(t *testing.T) {
	const kills = 50
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			p := newPipeline(t, kind)
			p.aMaxFiles = 1
			p.add(t, 20)
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 8))
			n, finished := 0, 0
			for n < kills {
				// Kill at a random instant of the run's first 150 ms of
				// batches (a batch of one file takes a few ms to tens of ms).
				err := killAfterStart(t, p.child(t, p.queryA()), time.Duration(rng.IntN(150_000))*time.Microsecond)
				switch {
				case killed(err):
					n++
				case err == nil:
					finished++
				default:
					t.Fatalf("child run: %v", err)
				}
				if s, _ := p.tableRows(t); s.Version+1 >= int64(p.files) {
					p.add(t, 10) // it caught up: give it more to do
				}
			}
			sum := p.runToEnd(t, p.queryA())
			p.checkTable(t, sum)
			_, got := p.tableRows(t)
			if len(got) != len(p.want) {
				t.Errorf("table holds %d rows, want %d", len(got), len(p.want))
			}
			t.Logf("%d kills, %d runs that finished first, %d batches, %d rows", n, finished, sum.LastCommitted+1, len(got))
		})
	}
}
