package crashtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/enginetest"
)

// nexmarkQuery is Nexmark's q7-style highest bid per 10 s window, and the
// number of bids, over 50,000 events in batches of 10,000 (4 s of event
// time each), to Parquet files: a replayable source, state, an
// exactly-once sink.
const nexmarkQuery = `apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: nexmark, namespace: test}
spec:
  sources:
  - name: bids
    nexmark: {eventsPerSecond: 2500, asFastAsPossible: true, maxEventsPerTrigger: 10000, numEvents: 50000, seed: 9, startTime: "2026-01-05T10:00:00Z"}
  transform:
  - watermark: {column: dateTime, delay: 0s}
  - aggregate:
      groupBy: [{window: {column: dateTime, duration: 10s}}]
      aggregates: [{name: highest, function: max, column: price}, {name: bids, function: count}]
  sink:
    files: {path: %q, format: parquet}
  outputMode: append
  trigger: {availableNow: true}
`

// TestNexmarkPhaseKills kills the binary at every phase boundary of
// batches 0 and 2 of the Nexmark query, then lets a run finish: the output
// equals an uninterrupted run's, each window once.
func TestNexmarkPhaseKills(t *testing.T) {
	for _, p := range Points() {
		t.Run(p.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			run := func(name string, env ...string) Result {
				out := filepath.Join(dir, name+"-out")
				spec := filepath.Join(dir, name+".yaml")
				if err := os.WriteFile(spec, fmt.Appendf(nil, nexmarkQuery, out), 0o644); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(lockstep, "run", "-f", spec, "--checkpoint", filepath.Join(dir, name+"-ckpt"))
				cmd.Dir = dir
				cmd.Env = Env(env...)
				return Run(t, cmd)
			}
			output := func(name string) []engine.Row {
				return enginetest.OutputRowsAt(t, filepath.Join(dir, name+"-out"))
			}
			if r := run("crashed", p.Env()); !r.Killed {
				t.Fatalf("the run was not killed at %s: exit %d\n%s", p, r.Code, r.Stderr)
			}
			if r := run("crashed"); r.Code != 0 {
				t.Fatalf("final run: exit %d\n%s", r.Code, r.Stderr)
			}
			if r := run("reference"); r.Code != 0 {
				t.Fatalf("reference run: exit %d\n%s", r.Code, r.Stderr)
			}
			want, got := output("reference"), output("crashed")
			// 50,000 events at 2,500 a second span 20 s: the watermark closes the first window only.
			if len(want) != 1 || want[0][3] != int64(23_000) {
				t.Errorf("uninterrupted output = %v, want one window of 23,000 bids", want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("output differs from an uninterrupted run (-uninterrupted +crashed):\n%s", diff)
			}
		})
	}
}
