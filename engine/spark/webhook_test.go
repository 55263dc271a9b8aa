package spark_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine/spark/sparktest"
	"github.com/lockstep-dev/lockstep/engine/webhook"
)

// TestDifferentialWebhook: files → filter → webhook on both runtimes, in chunks of two rows,
// to receivers that answer each runtime's first request 503: both retry it, and deliver the
// same rows, each request with the spec's header and an Idempotency-Key of the built-in form.
func TestDifferentialWebhook(t *testing.T) {
	t.Parallel()
	runner := sparktest.Runner(t)
	ctx := context.Background()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	writeInput(t, in)
	query := func(url, ck string) *v1.StreamingQuery {
		return qt.Make("webhook-diff", "diff").FilesSource("orders", in, v1.FormatJSON, diffColumns...).
			Filter("qty > 1").WebhookSink(url).
			Edit(func(s *v1.StreamingQuerySpec) {
				s.Sink.Webhook.MaxRowsPerRequest = 2
				s.Sink.Webhook.Headers = map[string]string{"X-Team": "payments"}
			}).AvailableNow().Checkpoint(ck).Obj()
	}
	builtin, onSpark := newReceiver(t), newReceiver(t)
	runBuiltin(t, ctx, query(builtin.URL, filepath.Join(dir, "ck-lockstep")))
	runSpark(t, ctx, runner, query(onSpark.URL, filepath.Join(dir, "ck-spark")))
	want, got := builtin.rows(t), onSpark.rows(t)
	if len(want) < 3 {
		t.Fatalf("the built-in engine delivered %d rows: the test compares too little", len(want))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows delivered from spark differ from the built-in engine's (-lockstep +spark):\n%s", diff)
	}
}

// receiver is a webhook receiver that answers its first request 503 and records the rest.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	bodies   [][]byte
	bad      []string
}

var idempotencyKey = regexp.MustCompile(`^[0-9a-f-]{36}:[0-9]+(:[0-9]+)?$`)

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.requests++; r.requests == 1 {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		if key := req.Header.Get(webhook.IdempotencyKeyHeader); !idempotencyKey.MatchString(key) {
			r.bad = append(r.bad, "Idempotency-Key "+key)
		}
		if req.Header.Get("X-Team") != "payments" || req.Header.Get("Content-Type") != "application/json" {
			r.bad = append(r.bad, "headers "+req.Header.Get("X-Team")+" "+req.Header.Get("Content-Type"))
		}
		r.bodies = append(r.bodies, body)
	}))
	t.Cleanup(r.Close)
	return r
}

// rows returns the rows of every request, as jsonFields writes them, sorted (a multiset).
func (r *receiver) rows(t *testing.T) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bad {
		t.Errorf("a request to %s: %s", r.URL, b)
	}
	var out []string
	for _, b := range r.bodies {
		var req struct {
			QueryID string            `json:"queryId"`
			Chunks  int               `json:"chunks"`
			Rows    []json.RawMessage `json:"rows"`
		}
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatalf("request body %q: %v", b, err)
		}
		if req.QueryID == "" || req.Chunks < 1 || len(req.Rows) > 2 {
			t.Errorf("request body %s: want a query id, chunks and at most 2 rows", b)
		}
		for _, row := range req.Rows {
			out = append(out, jsonFields(t, row))
		}
	}
	slices.Sort(out)
	return out
}
