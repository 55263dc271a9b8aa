package enginetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/internal/testenv"
)

// FaultTarget names the requests of one of a sink's operations on S3: its
// data files, its commit (manifest entry, Delta log entry), its reads of
// the log.
type FaultTarget struct {
	Name  string
	Match testenv.Match
}

// SinkFaultKinds are the faults RunSinkFaults aims at every target.
var SinkFaultKinds = []testenv.Kind{testenv.LostReply, testenv.SlowDown, testenv.InternalError, testenv.Reset, testenv.Delay}

// RunSinkFaultsOnS3 runs RunSinkFaults on every S3 server kind
// (testenv.S3Kinds), each behind its own fault proxy. newOutput returns the
// n-th fresh output in srv's bucket, reached with opts (the proxy's
// settings, with retries quick to start).
func RunSinkFaultsOnS3(t *testing.T, targets []FaultTarget, newOutput func(t *testing.T, srv *testenv.S3Server, opts []s3.Option, n int) SinkHarness) {
	for _, kind := range testenv.S3Kinds() {
		t.Run(kind, func(t *testing.T) {
			srv := testenv.S3Of(t, kind)
			proxy := testenv.NewS3Proxy(t, srv, 1)
			opts := append(proxy.Server().Options(), s3.WithRetries(0, time.Millisecond))
			n := 0
			RunSinkFaults(t, proxy, targets, func(t *testing.T) SinkHarness {
				n++
				return newOutput(t, srv, opts, n)
			})
		})
	}
}

// RunSinkFaults aims each fault kind at each target of an exactly-once sink
// on S3 behind proxy, the first matching request and then the next two, and
// checks that the sink rides it out: a batch whose write failed is written
// again by a new instance (a restarted engine), and the output holds every
// batch exactly once, readable (no file it references is missing).
// newOutput returns a fresh, empty output each time it is called; its sinks
// must reach S3 through the proxy.
func RunSinkFaults(t *testing.T, proxy *testenv.S3Proxy, targets []FaultTarget, newOutput func(t *testing.T) SinkHarness) {
	ctx := context.Background()
	at := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	for _, target := range targets {
		for _, kind := range SinkFaultKinds {
			t.Run(target.Name+"/"+string(kind), func(t *testing.T) {
				h := newOutput(t)
				inj := proxy.Inject(testenv.Rule{Kind: kind, Match: target.Match, Nth: 1, Times: 3, Delay: 200 * time.Millisecond})
				defer inj.Remove()
				var want []engine.Row
				for id := range int64(3) {
					rows := []engine.Row{{fmt.Sprintf("a%d", id), id}, {fmt.Sprintf("b%d", id), 10 * id}}
					want = append(want, rows...)
					b := &engine.Batch{QueryID: "q1", ID: id, Time: at.Add(time.Duration(id) * time.Second), Columns: SinkColumns, Rows: rows}
					// A failed write is retried by a new instance, as the
					// engine's restart would; a few failures are allowed.
					var err error
					for attempt := range 4 {
						if err = h.New(t).Write(ctx, b); err == nil {
							break
						}
						t.Logf("batch %d, attempt %d: %v", id, attempt, err)
					}
					if err != nil {
						t.Fatalf("batch %d failed 4 times: %v", id, err)
					}
				}
				if inj.Hits() == 0 {
					t.Fatalf("no request matched the target %s", target.Name)
				}
				got := h.Read(t)
				SortRows(got)
				SortRows(want)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("output after %d %s faults on %s (-want +got):\n%s", inj.Hits(), kind, target.Name, diff)
				}
			})
		}
	}
}
