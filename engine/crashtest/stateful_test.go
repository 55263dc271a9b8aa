package crashtest

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
)

// statefulQuery is a query from files with stateful steps, one input file
// a batch: its transform, sink and output mode are filled in per scenario.
const statefulQuery = `apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: crash-stateful, namespace: test}
spec:
  sources:
  - name: events
    files: {path: %q, format: json, maxFilesPerTrigger: 1}
    schema:
      columns:
      - {name: id, type: string}
      - {name: country, type: string}
      - {name: amount, type: double}
      - {name: ts, type: timestamp}
  transform:
%s
  sink:
    %s
  outputMode: %s
  stateStore: {partitions: 4}
  trigger: {availableNow: true}
`

// keyedByCountry is a keyed aggregation of the events per country: their
// count, revenue, distinct buyers and top amount.
const keyedByCountry = `
  - aggregate:
      groupBy: [{column: country}]
      aggregates:
      - {name: orders, function: count}
      - {name: revenue, function: sum, column: amount}
      - {name: buyers, function: count_distinct, column: id}
      - {name: top, function: max, column: amount}`

// statefulScenarios are the stateful queries killed: a windowed count and
// sum with a watermark in append mode, a keyed aggregation in update mode,
// a deduplication, sessions per country in append mode, and an aggregate
// over the windows of another.
var statefulScenarios = []struct {
	name, transform, mode string
}{
	{"windowed-append", `
  - watermark: {column: ts, delay: 5s}
  - aggregate:
      groupBy: [{window: {column: ts, duration: 10s}}]
      aggregates: [{name: orders, function: count}, {name: revenue, function: sum, column: amount}]`, "append"},
	{"keyed-update", keyedByCountry, "update"},
	{"dedup", `
  - dropDuplicates: {columns: [id]}`, "append"},
	{"session-append", `
  - watermark: {column: ts, delay: 5s}
  - aggregate:
      groupBy: [{column: country}, {session: {column: ts, gap: 4s}}]
      aggregates: [{name: orders, function: count}, {name: revenue, function: sum, column: amount}, {name: first, function: min, column: id}]`, "append"},
	{"chained-windows", `
  - watermark: {column: ts, delay: 5s}
  - aggregate:
      name: per-country
      groupBy: [{column: country}, {window: {column: ts, duration: 10s}}]
      aggregates: [{name: revenue, function: sum, column: amount}]
  - aggregate:
      name: best
      groupBy: [{window: {column: window_end, duration: 30s}}]
      aggregates: [{name: top, function: max, column: revenue}, {name: windows, function: count}]`, "append"},
}

// statefulSetup is one scenario's folders, local.
type statefulSetup struct {
	t                  *testing.T
	dir, in, out, ckpt string
	transform, mode    string
	files              int
}

func newStateful(t *testing.T, transform, mode string) *statefulSetup {
	dir := t.TempDir()
	return &statefulSetup{t: t, dir: dir, in: filepath.Join(dir, "in"), out: filepath.Join(dir, "out"),
		ckpt: filepath.Join(dir, "ckpt"), transform: strings.TrimPrefix(transform, "\n"), mode: mode}
}

// addInput writes n more files of 12 events each: event time advances 5s a
// file with some disorder, one row a file is a minute late, ids repeat.
func (s *statefulSetup) addInput(n int) {
	s.t.Helper()
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	countries := []string{"DE", "FR", "US"}
	addFiles(s.t, s.in, nil, &s.files, n, "events-%04d.json", func(f int, b *bytes.Buffer) {
		for j := range 13 {
			id, country, sec := fmt.Sprintf("o-%d", (f*12+j)%40), countries[(f+j)%3], f*5+j%7-3
			if j == 12 {
				id, sec = "late", f*5-60
			}
			ts := t0.Add(time.Duration(sec) * time.Second).Format(time.RFC3339)
			fmt.Fprintf(b, `{"id":%q,"country":%q,"amount":%g,"ts":%q}`+"\n", id, country, float64(j%5)+0.25, ts)
		}
	})
}

func (s *statefulSetup) command(ckpt, out string, env ...string) *exec.Cmd {
	return runCommand(s.t, s.dir, fmt.Appendf(nil, statefulQuery, s.in, s.transform, fmt.Sprintf("files: {path: %q, format: json}", out), s.mode), ckpt, env...)
}

func (s *statefulSetup) runOnce(ckpt, out string, env ...string) Result {
	s.t.Helper()
	return Run(s.t, s.command(ckpt, out, env...))
}

// finish runs the query to its end and checks that its output equals an
// uninterrupted run's over the same input, row for row.
func (s *statefulSetup) finish() {
	s.t.Helper()
	got, want := finishRuns(s.t, s.runOnce, s.output, s.ckpt, s.out)
	if len(want) == 0 {
		s.t.Fatal("the uninterrupted run wrote nothing")
	}
	if diff := cmp.Diff(fmt.Sprint(want), fmt.Sprint(got)); diff != "" {
		s.t.Errorf("output differs from an uninterrupted run (-uninterrupted +crashed):\n%s", diff)
	}
}

func (s *statefulSetup) output(out string) []engine.Row {
	s.t.Helper()
	return enginetest.OutputRowsAt(s.t, out)
}

// TestStatefulPhaseKills kills each stateful query with SIGKILL at every
// phase boundary of batches 0 and 2 (the state of a batch is written before
// its sink), then lets a run finish.
func TestStatefulPhaseKills(t *testing.T) {
	for _, sc := range statefulScenarios {
		for _, p := range Points() {
			t.Run(fmt.Sprintf("%s/%s", sc.name, p), func(t *testing.T) {
				t.Parallel()
				s := newStateful(t, sc.transform, sc.mode)
				s.addInput(6)
				r := s.runOnce(s.ckpt, s.out, p.Env())
				if !r.Killed {
					t.Fatalf("the run was not killed at %s: exit %d\n%s", p, r.Code, r.Stderr)
				}
				s.finish()
			})
		}
	}
}

// TestStatefulRandomKills kills each stateful query with SIGKILL at 50
// random instants, adding input whenever a run got to the end, then lets a
// run finish.
func TestStatefulRandomKills(t *testing.T) {
	for _, sc := range statefulScenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			s := newStateful(t, sc.transform, sc.mode)
			s.addInput(20)
			began := time.Now()
			if r := s.runOnce(s.ckpt+"-timing", s.out+"-timing"); r.Code != 0 {
				t.Fatalf("timing run: exit %d\n%s", r.Code, r.Stderr)
			}
			span := max(time.Since(began), 200*time.Millisecond)
			const kills = 50
			finished := KillRandomly(t, kills, span, func(finishedLast bool) *exec.Cmd {
				if finishedLast {
					s.addInput(3)
				}
				return s.command(s.ckpt, s.out)
			})
			t.Logf("%d runs killed at random instants within %s, %d ran to the end; %d input files", kills, span, finished, s.files)
			s.finish()
		})
	}
}
