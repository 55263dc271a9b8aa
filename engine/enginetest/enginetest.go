package enginetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/sink"
	"github.com/lockstep-dev/lockstep/engine/source"
)

// Registry returns a registry with the built-in sources (files, rate, nexmark),
// sinks (files, console) and static join side (files), as `lockstep run` fills it.
func Registry(t testing.TB) *engine.Registry {
	t.Helper()
	reg := engine.NewRegistry()
	for _, err := range []error{
		reg.RegisterSource(v1.SourceFiles, source.FilesSpec(), source.NewFiles),
		reg.RegisterSource(v1.SourceRate, source.RateSpec(), source.NewRate),
		reg.RegisterSource(v1.SourceNexmark, source.NexmarkSpec(), source.NewNexmark),
		reg.RegisterSink(v1.SinkFiles, sink.FilesSpec(), sink.NewFiles),
		reg.RegisterSink(v1.SinkConsole, sink.ConsoleSpec(), sink.NewConsole),
		reg.RegisterStatic(v1.StaticFilesKind, source.StaticFilesSpec(), source.NewStaticFiles),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// Recorder is an engine.Observer that records a run. It is safe for
// concurrent use.
type Recorder struct {
	mu        sync.Mutex
	starts    []engine.Start
	batches   []engine.Progress
	committed chan engine.Progress
}

var _ engine.Observer = (*Recorder)(nil)

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{committed: make(chan engine.Progress, 1024)} }

// Started records s.
func (r *Recorder) Started(s engine.Start) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, s)
}

// Committed records p.
func (r *Recorder) Committed(p engine.Progress) {
	r.mu.Lock()
	r.batches = append(r.batches, p)
	r.mu.Unlock()
	r.committed <- p
}

// Starts returns the starts recorded so far.
func (r *Recorder) Starts() []engine.Start {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.starts)
}

// Batches returns the batches recorded so far.
func (r *Recorder) Batches() []engine.Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

// Next waits for the next committed batch, failing the test after timeout.
func (r *Recorder) Next(t testing.TB, timeout time.Duration) engine.Progress {
	t.Helper()
	select {
	case p := <-r.committed:
		return p
	case <-time.After(timeout):
		t.Fatalf("no batch committed within %s", timeout)
		return engine.Progress{}
	}
}

// Step waits until something waits on the fake clock (a trigger), then
// advances the clock by d. It never sleeps: it yields until the waiter is
// there, failing the test after timeout.
func Step(t testing.TB, c *clocktesting.FakeClock, d time.Duration, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !c.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatalf("nothing waits on the clock after %s", timeout)
		}
		time.Sleep(time.Millisecond) // yield to the engine's goroutine
	}
	c.Step(d)
}

// LoadCheckpoint loads the checkpoint in the local folder dir, failing the test if it
// cannot be opened or read.
func LoadCheckpoint(t testing.TB, dir string) *checkpoint.Checkpoint {
	t.Helper()
	store, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Load(context.Background(), store)
	if err != nil {
		t.Fatalf("load the checkpoint in %s: %v", dir, err)
	}
	return ck
}

// OutputRows reads the rows a files sink committed in folder, through the
// manifest, sorted so that runs compare regardless of batch boundaries.
func OutputRows(t testing.TB, folder checkpoint.Store) []engine.Row {
	t.Helper()
	_, rows, err := sink.ReadRows(context.Background(), folder)
	if err != nil {
		t.Fatalf("read output of %s: %v", folder.Location(), err)
	}
	SortRows(rows)
	return rows
}

// OutputRowsAt reads the rows a files sink committed at loc, a folder or an s3:// location
// (opts pointing at its server), like OutputRows.
func OutputRowsAt(t testing.TB, loc string, opts ...s3.Option) []engine.Row {
	t.Helper()
	f, err := s3.OpenFolder(loc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return OutputRows(t, f)
}

// SortRows sorts rows by their printed form.
func SortRows(rows []engine.Row) {
	slices.SortFunc(rows, func(a, b engine.Row) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
}

// CPU is this process's user and system CPU time; with children, also that of its children
// that were waited for (a runtime's JVM).
func CPU(children bool) time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	d := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if children {
		_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
		d += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return d
}

// ReportRebuild reports a rebuild benchmark's figures: rows per CPU-second of the rebuild and
// of the normal run over the same rows, and the run's CPU over the rebuild's (x-run-cpu, the
// goal table's row: above 1, the rebuild is the cheaper).
func ReportRebuild(b *testing.B, rows int64, rebuildCPU, runCPU time.Duration) {
	b.ReportMetric(float64(rows)/runCPU.Seconds(), "run-rows/cpu-s")
	b.ReportMetric(float64(rows)/rebuildCPU.Seconds(), "rows/cpu-s")
	b.ReportMetric(runCPU.Seconds()/rebuildCPU.Seconds(), "x-run-cpu")
}
