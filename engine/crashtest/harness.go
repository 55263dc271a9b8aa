package crashtest

import (
	"bufio"
	"bytes"
	"context"
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

	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/internal/gobuild"
)

// RunTimeout bounds how long one run of the binary may go without writing a line: Run kills
// it after that long silent. It stops a hung run, never a slow one: on a busy 2-core machine
// (load average 30) a Spark batch took two minutes and a 150-batch reference run over one,
// and a run that makes progress says so, batch by batch.
const RunTimeout = 5 * time.Minute

// silence kills the process tree of cmd (once started) when the writes it watches stop for
// quiet: Write passes them on and restarts the clock.
type silence struct {
	w     io.Writer
	quiet time.Duration
	timer *time.Timer
}

func newSilence(w io.Writer, cmd *exec.Cmd, quiet time.Duration) *silence {
	return &silence{w: w, quiet: quiet, timer: time.AfterFunc(quiet, func() {
		if cmd.Process != nil {
			killTree(cmd.Process.Pid)
		}
	})}
}

func (s *silence) Write(p []byte) (int, error) {
	s.timer.Reset(s.quiet)
	return s.w.Write(p)
}

func (s *silence) stop() { s.timer.Stop() }

// Build builds cmd/lockstep of the module the tests run in into dir and
// returns the binary's path. It runs `go build`, so it takes seconds: build
// once per test binary.
func Build(dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "lockstep")
	if err := gobuild.Binary(context.Background(), root, "./cmd/lockstep", bin); err != nil {
		return "", err
	}
	return bin, nil
}

// ModuleRoot returns the folder of the go.mod of the module the tests run
// in.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// Env returns the test process's environment without its LOCKSTEP_ and
// AWS_ variables, then extra: a run of the binary sees only the settings
// its test gives it.
func Env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOCKSTEP_") && !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// Point is a phase boundary of a batch, where a run can be made to kill
// itself.
type Point struct {
	Phase engine.Phase
	Batch int64
}

// Points returns where every scenario is killed: each phase of batches 0
// and 2.
func Points() []Point {
	var points []Point
	for _, p := range engine.Phases() {
		for _, b := range []int64{0, 2} {
			points = append(points, Point{p, b})
		}
	}
	return points
}

// String returns <phase>:<batch>, the form engine.CrashAtEnv takes.
func (p Point) String() string { return fmt.Sprintf("%s:%d", p.Phase, p.Batch) }

// Env returns the environment entry that makes the binary kill itself at p.
func (p Point) Env() string { return engine.CrashAtEnv + "=" + p.String() }

// Result is how one run of the binary ended.
type Result struct {
	// Code is the exit code; -1 when a signal ended the run, -2 when
	// waiting for it failed.
	Code int
	// Killed says whether SIGKILL ended the run.
	Killed bool
	// Stderr is what the run wrote: standard error, and standard output
	// when Run or KillRandomly collected it.
	Stderr string
}

// Run runs cmd to its end, collecting its standard output and error, and
// kills it when it writes nothing for RunTimeout. A command that does not start fails t.
func Run(t testing.TB, cmd *exec.Cmd) Result {
	t.Helper()
	return RunFor(t, cmd, RunTimeout)
}

// RunFor is Run with another bound than RunTimeout on a silent run: a Spark run
// starts a JVM, which says nothing for minutes on a busy 2-core machine.
func RunFor(t testing.TB, cmd *exec.Cmd, quiet time.Duration) Result {
	t.Helper()
	var out bytes.Buffer
	w := newSilence(&out, cmd, quiet)
	defer w.stop()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	w.stop()
	return result(err, out.String())
}

// SeedEnv names the environment variable that sets KillRandomly's seed.
const SeedEnv = "LOCKSTEP_CRASH_SEED"

// Rand returns the random source of a test's kill instants: seeded from the clock unless
// SeedEnv holds a seed, which it logs with what (and how to replay it).
func Rand(t testing.TB, what string) *rand.Rand {
	t.Helper()
	seed := time.Now().UnixNano()
	if v := os.Getenv(SeedEnv); v != "" {
		var err error
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: want the integer seed a run logged", SeedEnv, v)
		}
	}
	t.Logf("seed %d, %s (replay with %s=%d)", seed, what, SeedEnv, seed)
	return rand.New(rand.NewPCG(uint64(seed), 0))
}

// KillRandomly runs the commands next returns, one at a time, and SIGKILLs
// each at a random instant within span unless it ended first, until kills
// runs were killed. next learns whether the run before it ended on its own
// (false for the first). A run that ends on its own must exit 0, or t
// fails. It logs the random seed and returns how many runs ended on their
// own. The seed is random unless SeedEnv holds one: set it to the seed a failing run logged
// to kill at the same instants again (as far as the run's own pace allows).
func KillRandomly(t testing.TB, kills int, span time.Duration, next func(finishedLast bool) *exec.Cmd) (finished int) {
	t.Helper()
	rng := Rand(t, fmt.Sprintf("killing within %s", span))
	killed, last := 0, false
	for killed < kills {
		cmd := next(last)
		exited := start(t, cmd)
		var r Result
		select {
		case r = <-exited:
		case <-time.After(time.Duration(rng.Int64N(int64(span)))):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			r = <-exited
		}
		switch {
		case r.Killed:
			killed++
		case r.Code == 0:
			finished++
		default:
			t.Fatalf("run %d: exit %d\n%s", killed+finished, r.Code, r.Stderr)
		}
		last = !r.Killed
	}
	return finished
}

// start starts cmd, its standard output and error captured together; the
// channel yields how it ended once it exits.
func start(t testing.TB, cmd *exec.Cmd) <-chan Result {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan Result, 1)
	go func() { exited <- result(cmd.Wait(), out.String()) }()
	return exited
}

// result is how a run that cmd.Wait ended with err ended.
func result(err error, output string) Result {
	r := Result{Stderr: output}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		r.Code = ws.ExitStatus()
		r.Killed = ws.Signaled() && ws.Signal() == syscall.SIGKILL
	default:
		r.Code = -2
		r.Stderr += err.Error()
	}
	return r
}

// KillAfter runs cmd until a line of its output (standard output and error)
// starts with prefix, waits delay more, then SIGKILLs it together with every
// process it started, as a pod's death kills them all (the Spark runtime's
// driver is a JVM that `lockstep run` starts). A run that ends first returns
// as it ended; timeout bounds it as RunFor's does.
func KillAfter(t testing.TB, cmd *exec.Cmd, prefix string, delay, timeout time.Duration) Result {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var out bytes.Buffer
	w := newSilence(&out, cmd, timeout)
	defer w.stop()
	seen := make(chan struct{})
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		once := false
		for sc.Scan() {
			_, _ = w.Write([]byte(sc.Text() + "\n"))
			if !once && strings.HasPrefix(sc.Text(), prefix) {
				once = true
				close(seen)
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-exited: // or killed by the silence
	case <-seen:
		select {
		case waitErr = <-exited:
		case <-time.After(delay):
			killTree(cmd.Process.Pid)
			waitErr = <-exited
		}
	}
	// A process left holding the pipe (none should) would keep the scan open.
	pr.SetReadDeadline(time.Now().Add(5 * time.Second))
	<-scanned
	pr.Close()
	return result(waitErr, out.String())
}

// killTree SIGKILLs pid and its descendants, found through /proc before any
// is killed.
func killTree(pid int) {
	pids := []int{pid}
	for i := 0; i < len(pids); i++ {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pids[i]))
		for _, task := range tasks {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pids[i], task.Name()))
			for _, f := range strings.Fields(string(b)) {
				if child, err := strconv.Atoi(f); err == nil {
					pids = append(pids, child)
				}
			}
		}
	}
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}
