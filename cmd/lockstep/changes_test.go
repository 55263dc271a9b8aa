package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep-dev/lockstep/compat"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// changeQuery is a stateless files → files query; %IN%, %IN2%, %OUT%, %URL% and %CHECKPOINT%
// are replaced by each case.
const changeQuery = `apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: orders, namespace: e2e}
spec:
  sources:
  - name: orders
    files: {path: %IN%, format: json, maxFilesPerTrigger: 1}
    schema:
      columns:
      - {name: order_id, type: string}
      - {name: amount, type: double}
      - {name: ts, type: timestamp}
  transform:
  - filter: "amount > 0.0"
  - select: [{name: order_id, expr: order_id}, {name: amount, expr: amount}]
  sink:
    files: {path: %OUT%/a, format: json}
  trigger: {availableNow: true}
  checkpoint: {location: %CHECKPOINT%}
`

// TestChangesAppliedTwiceBeforeTheNextBatch applies every kind of change the planner
// allows twice while the query has no new data, restarting the engine after each, as the
// controller rolls its pod on every change: each start records its shape for the next batch,
// replacing the one the start before it recorded, since no batch ran under it. The next
// batch then runs and commits under the last spec, on a folder and on S3. Before, the second
// start failed for ever with "another writer owns this checkpoint".
func TestChangesAppliedTwiceBeforeTheNextBatch(t *testing.T) {
	var delivered atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/c" {
			delivered.Add(1)
		}
	}))
	t.Cleanup(hook.Close)

	cases := []struct {
		kind  string // the rule that allows the change
		base  string // an edit of changeQuery the query starts from ("" for none)
		edits [2]string
	}{
		{kind: "rate-limit", edits: [2]string{"maxFilesPerTrigger: 1 => maxFilesPerTrigger: 2", "maxFilesPerTrigger: 2 => maxFilesPerTrigger: 3"}},
		{kind: "trigger", edits: [2]string{"availableNow: true => processingTime: 1m", "processingTime: 1m => processingTime: 30s"}},
		{kind: "operator (stateless filter)", edits: [2]string{`"amount > 0.0" => "amount > 1.0"`, `"amount > 1.0" => "amount >= 1.0"`}},
		{kind: "output-columns", edits: [2]string{"expr: amount}] => expr: amount}, {name: twice, expr: amount * 2.0}]", "name: twice, expr: amount * 2.0 => name: thrice, expr: amount * 3.0"}},
		{kind: "source-columns", edits: [2]string{"{name: ts, type: timestamp}\n => {name: ts, type: timestamp}\n      - {name: qty, type: long}\n", "{name: qty, type: long} => {name: note, type: string}"}},
		{kind: "source-added then reverted", edits: [2]string{"  transform: =>   - name: returns\n    files: {path: %IN2%, format: json}\n    schema: {columns: [{name: order_id, type: string}, {name: amount, type: double}, {name: ts, type: timestamp}]}\n  transform:",
			"  - name: returns\n    files: {path: %IN2%, format: json}\n    schema: {columns: [{name: order_id, type: string}, {name: amount, type: double}, {name: ts, type: timestamp}]}\n => "}},
		{kind: "watermark-added (stateless)", edits: [2]string{"  transform:\n =>   transform:\n  - watermark: {column: ts, delay: 1m}\n", "delay: 1m => delay: 2m"}},
		{kind: "watermark-delay (stateful)", base: "  - filter: \"amount > 0.0\"\n  - select: [{name: order_id, expr: order_id}, {name: amount, expr: amount}]\n =>   - watermark: {column: ts, delay: 10m}\n  - aggregate: {name: totals, groupBy: [{window: {column: ts, duration: 5m}}], aggregates: [{name: orders, function: count}]}\n",
			edits: [2]string{"delay: 10m => delay: 15m", "delay: 15m => delay: 20m"}},
		{kind: "webhook-url", base: "files: {path: %OUT%/a, format: json} => webhook: {url: %URL%/a}",
			edits: [2]string{"%URL%/a => %URL%/b", "%URL%/b => %URL%/c"}},
	}
	stores := []struct {
		name     string
		location func(t *testing.T, name string) string
	}{
		{"folder", func(t *testing.T, _ string) string { return filepath.Join(t.TempDir(), "checkpoint") }},
		{"s3", func(t *testing.T, name string) string {
			srv := testenv.S3(t)
			srv.Setenv(t)
			return "s3://" + srv.Bucket + "/" + name
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			for i, tc := range cases {
				t.Run(tc.kind, func(t *testing.T) {
					root := t.TempDir()
					in, in2 := filepath.Join(root, "in"), filepath.Join(root, "in2")
					for _, d := range []string{in, in2} {
						if err := os.MkdirAll(d, 0o755); err != nil {
							t.Fatal(err)
						}
					}
					ck := st.location(t, fmt.Sprintf("case-%d", i))
					fill := strings.NewReplacer("%IN%", in, "%IN2%", in2, "%OUT%", filepath.Join(root, "out"), "%URL%", hook.URL, "%CHECKPOINT%", ck)
					spec := changeQuery
					write := func(name string) string {
						return writeFile(t, filepath.Join(root, name), fill.Replace(spec))
					}
					spec = editQuery(t, spec, tc.base)
					addOrders(t, in, 0)
					engineUntil(t, write("v0.yaml"), "Batch committed")
					for n, e := range tc.edits {
						spec = editQuery(t, spec, e)
						engineUntil(t, write(fmt.Sprintf("v%d.yaml", n+1)), "Engine started")
					}
					sent := delivered.Load()
					addOrders(t, in, 1)
					final := write("final.yaml")
					engineUntil(t, final, "Batch committed")

					c, err := loadCheckpoint(t.Context(), ck)
					if err != nil {
						t.Fatal(err)
					}
					head, err := c.Head(t.Context())
					if err != nil || head.Committed == nil || head.Committed.BatchID != 1 {
						t.Fatalf("head after the last start = %+v, %v; want batch 1 committed", head, err)
					}
					from, data, err := c.CommittedShape(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					got, err := compat.ParseShape(data)
					if err != nil {
						t.Fatal(err)
					}
					q, err := readQueryFile(final)
					if err != nil {
						t.Fatal(err)
					}
					want, err := compat.ShapeOf(&q.Spec)
					if err != nil {
						t.Fatal(err)
					}
					if !got.Equal(want) {
						t.Errorf("batch 1 committed under the shape recorded from batch %d, not the last spec's:\n got %s", from, data)
					}
					if tc.kind == "webhook-url" && delivered.Load() == sent {
						t.Errorf("the last URL got no rows from batch 1")
					}
				})
			}
		})
	}
}

// addOrders writes the n-th input file of the files source in dir, with an order over 1.
func addOrders(t *testing.T, dir string, n int) {
	t.Helper()
	addFile(t, dir, n, fmt.Sprintf(`{"order_id":"o%d","amount":%d.5,"ts":"2026-01-01T00:00:%02dZ"}`+"\n", n, n+2, n))
}

// engineUntil runs lockstep engine on the query in file, as the pod does, until it logs until
// (then stops it as the kubelet does, with a cancelled context) or exits by itself; it fails
// the test unless the engine ends well.
func engineUntil(t *testing.T, file, until string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	logs := &watchWriter{want: until, seen: make(chan struct{})}
	cmd := newRootCommand()
	cmd.SetOut(io.Discard)
	cmd.SetErr(logs)
	cmd.SetArgs([]string{"engine", "--query", file, "--health-addr", "", "--termination-message-path", ""})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-logs.seen:
		cancel()
		err = <-done
		if errors.Is(err, context.Canceled) {
			err = nil
		}
	}
	if err != nil || !logs.saw() {
		t.Fatalf("lockstep engine -f %s: %v (waited for %q); its log:\n%s", filepath.Base(file), err, until, logs.String())
	}
}

// watchWriter keeps what the engine logs and closes seen at the first line holding want.
type watchWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	hit  bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.hit && strings.Contains(w.buf.String(), w.want) {
		w.hit = true
		close(w.seen)
	}
	return len(p), nil
}

func (w *watchWriter) saw() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hit
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
