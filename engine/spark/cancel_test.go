package spark_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine/spark"
	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
)

// TestCancelKillsTheRunner: a cancelled run asks the runner's JVM to stop and, when it has not
// within Options.KillAfter, kills its process group, so that cancelling a run (a pod told to
// stop, a test's deadline) never leaves a JVM behind. The JVM here is cancelled while it still
// starts, before it reads the request, and KillAfter is short: it must be killed.
func TestCancelKillsTheRunner(t *testing.T) {
	t.Parallel()
	runner := sparktest.Runner(t)
	dir := t.TempDir()
	obj := oneFileQuery(t, "cancelled", dir, &v1.SparkRuntime{})
	logs := &syncBuffer{}
	q, err := spark.New(obj, spark.Options{Runner: runner, LogPath: filepath.Join(dir, "spark.log"),
		Logger: slog.New(slog.NewTextHandler(logs, nil)), KillAfter: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := q.Run(ctx)
		errc <- err
	}()

	// The JVM's pid, from the plan path the run logs as it starts it.
	var pid int
	var plan string
	deadline := time.Now().Add(2 * time.Minute)
	for pid == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no runner JVM started within 2 minutes; the run's log:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
		if plan = loggedPlan(logs.String()); plan != "" {
			pid = processWith(t, plan)
		}
	}
	// The JVM's temporary files (Spark's block manager, native libraries) go to the launch's
	// folder, which the run removes: the shared temporary folder keeps nothing of it.
	launchDir := filepath.Dir(plan)
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil &&
		!bytes.Contains(cmdline, []byte("-Djava.io.tmpdir="+filepath.Join(launchDir, "tmp")+"\x00")) {
		t.Errorf("the runner's JVM does not keep its temporary files in %s/tmp: %q", launchDir, cmdline)
	}
	cancel()
	select {
	case err := <-errc:
		if err == nil {
			t.Error("the cancelled run returned no error")
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the cancelled run did not return within 2 minutes")
	}
	// Run returns after the JVM has been waited for: it is gone, not a zombie.
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the runner's JVM (pid %d) is still there after the cancelled run returned: kill(0) = %v", pid, err)
	}
	if _, err := os.Stat(launchDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run's folder %s is still there after it returned: %v", launchDir, err)
	}
	if !strings.Contains(logs.String(), "did not stop in time") {
		t.Errorf("the run did not say it killed the JVM; its log:\n%s", logs.String())
	}
}

// TestRunnerFailureSaysWhy: a Spark that cannot start (here a setting naming a class that is
// not there) fails the run with Spark's reason, not only the JVM's exit status: the runner
// reports what ended it, whatever it was.
func TestRunnerFailureSaysWhy(t *testing.T) {
	t.Parallel()
	runner := sparktest.Runner(t)
	dir := t.TempDir()
	obj := oneFileQuery(t, "unstartable", dir, &v1.SparkRuntime{Conf: map[string]string{"spark.serializer": "com.example.NoSuchSerializer"}})
	q, err := spark.New(obj, spark.Options{Runner: runner, LogPath: filepath.Join(dir, "spark.log")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = q.Run(t.Context())
	if err == nil {
		t.Fatal("a Spark that cannot start ran")
	}
	for _, want := range []string{"the Spark query failed: start Spark", "com.example.NoSuchSerializer", filepath.Join(dir, "spark.log")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the run's error %q does not say %q", err, want)
		}
	}
}

// oneFileQuery is a Spark query named name over one file of orders in dir/in (which it
// writes), to the files sink in dir/out, availableNow, its checkpoint in dir/ck.
func oneFileQuery(t *testing.T, name, dir string, rt *v1.SparkRuntime) *v1.StreamingQuery {
	t.Helper()
	writeCrashInput(t, filepath.Join(dir, "in"), 1)
	return qt.Make(name, "spark").FilesSource("orders", filepath.Join(dir, "in"), v1.FormatJSON, diffColumns...).
		FilesSink(filepath.Join(dir, "out"), v1.FormatJSON).AvailableNow().Checkpoint(filepath.Join(dir, "ck")).
		Edit(func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = rt }).Obj()
}

// loggedPlan returns the plan path of the run's "Starting the Spark runner" line, "" before it.
func loggedPlan(log string) string {
	for line := range strings.Lines(log) {
		if !strings.Contains(line, "Starting the Spark runner") {
			continue
		}
		for f := range strings.FieldsSeq(line) {
			if p, ok := strings.CutPrefix(f, "plan="); ok {
				return p
			}
		}
	}
	return ""
}

// processWith returns the pid of the process whose command line holds arg, 0 if none.
func processWith(t *testing.T, arg string) int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue // not a process
		}
		if cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline")); err == nil && bytes.Contains(cmdline, []byte(arg)) {
			return pid
		}
	}
	return 0
}

// syncBuffer is a bytes.Buffer safe for the logger's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
