package crashtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// restartQuery reads JSON files one at a time and counts rows per id into files; the
// checkpoint, with the aggregation's state, is on S3. %s is the transform.
const restartQuery = `apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: restart, namespace: bench}
spec:
  sources:
  - name: events
    files: {path: %q, format: json, maxFilesPerTrigger: 1}
    schema:
      columns:
      - {name: id, type: string}
      - {name: amount, type: double}
  transform:
%s
  sink:
    files: {path: %q, format: json}
  outputMode: %s
  trigger: {availableNow: true}
`

// BenchmarkRestart measures what issue 19 calls the restart cost: the time from starting the
// process to its first committed batch after a restart, with the checkpoint on S3 (versitygw on
// loopback, LOCKSTEP_TEST_S3 picks another), for a stateless query and for an aggregation
// holding 1M keys of state. Each op writes one small input file and runs the binary until it
// reports the batch committed; first-batch-ms is the median over the ops.
//
//	go test -run '^$' -bench Restart -benchtime 5x ./engine/crashtest/
func BenchmarkRestart(b *testing.B) {
	for _, c := range []struct {
		name, transform, mode string
		keys                  int
	}{
		{"stateless", "  - filter: \"amount > 0.0\"", "append", 1000},
		{"state=1M-keys", "  - aggregate:\n      groupBy: [{column: id}]\n      aggregates: [{name: events, function: count}]", "update", 1_000_000},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv := testenv.S3(b)
			dir := b.TempDir()
			in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
			ckpt := "s3://" + srv.Bucket + "/restart/" + c.name
			spec := filepath.Join(dir, "query.yaml")
			if err := os.WriteFile(spec, fmt.Appendf(nil, restartQuery, in, c.transform, out, c.mode), 0o644); err != nil {
				b.Fatal(err)
			}
			run := func() *exec.Cmd {
				cmd := exec.Command(lockstep, "run", "-f", spec, "--checkpoint", ckpt)
				cmd.Dir, cmd.Env = dir, Env(srv.Env()...)
				return cmd
			}
			// The first run builds the state: one file holding every key once.
			writeRestartInput(b, in, 0, c.keys)
			if r := Run(b, run()); r.Code != 0 {
				b.Fatalf("first run: exit %d\n%s", r.Code, r.Stderr)
			}
			var took []time.Duration
			file := 1
			for b.Loop() {
				b.StopTimer()
				writeRestartInput(b, in, file, 10)
				file++
				b.StartTimer()
				took = append(took, untilFirstCommit(b, run()))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "first-batch-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// writeRestartInput writes input file number n with rows rows, ids id-0… (so later files update
// keys the first one created).
func writeRestartInput(b *testing.B, in string, n, rows int) {
	b.Helper()
	if err := os.MkdirAll(in, 0o755); err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	for i := range rows {
		fmt.Fprintf(&buf, `{"id":"id-%d","amount":%d.5}`+"\n", (i*7919+n)%max(rows, 1_000_000), i%10)
	}
	p := filepath.Join(in, fmt.Sprintf("events-%06d.json", n))
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Second)
	_ = os.Chtimes(p, at, at)
}

// untilFirstCommit starts cmd and returns how long it took until the run reported its first
// committed batch ("batch N: …" on standard error); then it lets the run end.
func untilFirstCommit(b *testing.B, cmd *exec.Cmd) time.Duration {
	b.Helper()
	pipe, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	timer := time.AfterFunc(RunTimeout, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	var took time.Duration
	var log strings.Builder
	lines := bufio.NewScanner(pipe)
	for lines.Scan() {
		log.WriteString(lines.Text() + "\n")
		if took == 0 && strings.HasPrefix(lines.Text(), "batch ") {
			took = time.Since(start)
		}
	}
	if err := cmd.Wait(); err != nil || took == 0 {
		b.Fatalf("run: %v, committed no batch:\n%s", err, log.String())
	}
	return took
}
