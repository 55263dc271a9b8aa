package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/webhook"
)

var cols = v1.Columns{{Name: "id", Type: v1.TypeString}, {Name: "n", Type: v1.TypeLong}, {Name: "ts", Type: v1.TypeTimestamp}}

// request is one request the receiver got.
type request struct {
	key    string
	header http.Header
	body   body
}

type body struct {
	QueryID string           `json:"queryId"`
	BatchID int64            `json:"batchId"`
	Chunk   int              `json:"chunk"`
	Chunks  int              `json:"chunks"`
	Rows    []map[string]any `json:"rows"`
}

// receiver records requests and answers with answer (nil: 200).
type receiver struct {
	mu     sync.Mutex
	got    []request
	answer func(n int, w http.ResponseWriter) bool // true: answered
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	var b body
	if err := json.Unmarshal(data, &b); err != nil {
		http.Error(w, "bad json: "+err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.got = append(rc.got, request{key: r.Header.Get(webhook.IdempotencyKeyHeader), header: r.Header.Clone(), body: b})
	n := len(rc.got)
	rc.mu.Unlock()
	if rc.answer != nil && rc.answer(n, w) {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

func newSink(t *testing.T, w *v1.WebhookSink, opts ...webhook.Opt) *webhook.Sink {
	t.Helper()
	s, err := webhook.SinkWith(opts...)(context.Background(), &v1.Sink{Webhook: w}, engine.SinkEnv{QueryID: "q1", Columns: cols})
	if err != nil {
		t.Fatalf("new sink: %v", err)
	}
	t.Cleanup(func() { s.(*webhook.Sink).Close() })
	return s.(*webhook.Sink)
}

func batch(id int64, n int) *engine.Batch {
	b := &engine.Batch{QueryID: "q1", ID: id, Columns: cols}
	for i := range n {
		b.Rows = append(b.Rows, engine.Row{"r" + string(rune('a'+i)), int64(i), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	}
	return b
}

func TestWebhookPostsBatchesInChunksWithIdempotencyKeys(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s := newSink(t, &v1.WebhookSink{URL: srv.URL, MaxRowsPerRequest: 2, Headers: map[string]string{"X-Team": "payments"}})
	if err := s.Write(context.Background(), batch(3, 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(context.Background(), batch(4, 5)); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(context.Background(), batch(5, 0)); err != nil {
		t.Fatal(err)
	}
	got := rc.requests()
	var keys []string
	for _, r := range got {
		keys = append(keys, r.key)
	}
	if want := []string{"q1:3", "q1:4:0", "q1:4:1", "q1:4:2"}; !slices.Equal(keys, want) {
		t.Fatalf("keys %v, want %v (an empty batch sends nothing)", keys, want)
	}
	first := got[0]
	if first.header.Get("X-Team") != "payments" || first.header.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", first.header)
	}
	want := body{QueryID: "q1", BatchID: 3, Chunk: 0, Chunks: 1, Rows: []map[string]any{{"id": "ra", "n": 0.0, "ts": "2026-01-02T03:04:05Z"}}}
	if b := first.body; b.QueryID != want.QueryID || b.BatchID != 3 || b.Chunks != 1 || len(b.Rows) != 1 ||
		b.Rows[0]["id"] != "ra" || b.Rows[0]["ts"] != "2026-01-02T03:04:05Z" {
		t.Errorf("body %+v, want %+v", b, want)
	}
	var n int
	for _, r := range got[1:] {
		n += len(r.body.Rows)
		if r.body.Chunks != 3 {
			t.Errorf("chunk %d says %d chunks, want 3", r.body.Chunk, r.body.Chunks)
		}
	}
	if n != 5 {
		t.Errorf("batch 4 delivered %d rows, want 5", n)
	}
}

func TestWebhookRetriesWithTheSameKey(t *testing.T) {
	tests := []struct {
		name   string
		answer func(n int, w http.ResponseWriter) bool
	}{
		{"5xx", func(n int, w http.ResponseWriter) bool {
			if n < 3 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return true
			}
			return false
		}},
		{"429", func(n int, w http.ResponseWriter) bool {
			if n == 1 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				return true
			}
			return false
		}},
		{"timeout", func(n int, w http.ResponseWriter) bool {
			if n == 1 {
				time.Sleep(700 * time.Millisecond) // beyond the sink's timeout: the request arrived, the answer did not
			}
			return false
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := &receiver{answer: tt.answer}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			s := newSink(t, &v1.WebhookSink{URL: srv.URL, Timeout: "300ms"})
			if err := s.Write(context.Background(), batch(1, 2)); err != nil {
				t.Fatal(err)
			}
			got := rc.requests()
			if len(got) < 2 {
				t.Fatalf("%d requests, want retries", len(got))
			}
			for _, r := range got {
				if r.key != "q1:1" || len(r.body.Rows) != 2 {
					t.Errorf("delivery with key %q and %d rows, want q1:1 and 2", r.key, len(r.body.Rows))
				}
			}
		})
	}
}

func TestWebhookFailsOn4xxWithoutRetry(t *testing.T) {
	rc := &receiver{answer: func(_ int, w http.ResponseWriter) bool {
		http.Error(w, "field n must be positive", http.StatusUnprocessableEntity)
		return true
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s := newSink(t, &v1.WebhookSink{URL: srv.URL})
	err := s.Write(context.Background(), batch(2, 1))
	if err == nil || !strings.Contains(err.Error(), "422") || !strings.Contains(err.Error(), "field n must be positive") ||
		!strings.Contains(err.Error(), "q1:2") || !strings.Contains(err.Error(), "not retried") {
		t.Fatalf("write: %v, want an error with the status, the body and the key", err)
	}
	if n := len(rc.requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestWebhookGivesUpAfterRetryFor(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusBadGateway)
	}))
	defer srv.Close()
	s := newSink(t, &v1.WebhookSink{URL: srv.URL}, webhook.WithRetryFor(time.Second))
	began := time.Now()
	err := s.Write(context.Background(), batch(2, 1))
	if err == nil || !strings.Contains(err.Error(), "502") || !strings.Contains(err.Error(), "gave up") {
		t.Fatalf("write: %v", err)
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("gave up after %s, want about 1s", took)
	}
}

func TestWebhookHeadersFromSecret(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Authorization"), []byte("Bearer s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s := newSink(t, &v1.WebhookSink{URL: srv.URL, HeadersSecretName: "hook-auth"}, webhook.WithHeadersDir(dir))
	if err := s.Write(context.Background(), batch(0, 1)); err != nil {
		t.Fatal(err)
	}
	if got := rc.requests()[0].header.Get("Authorization"); got != "Bearer s3cret" {
		t.Errorf("Authorization %q", got)
	}
	_, err := webhook.SinkWith(webhook.WithHeadersDir(filepath.Join(dir, "missing")))(context.Background(),
		&v1.Sink{Webhook: &v1.WebhookSink{URL: srv.URL, HeadersSecretName: "hook-auth"}}, engine.SinkEnv{})
	if err == nil || !strings.Contains(err.Error(), "hook-auth") {
		t.Errorf("missing secret folder: %v", err)
	}
}

func TestWebhookInvalidSettings(t *testing.T) {
	_, err := webhook.NewSink(context.Background(), &v1.Sink{Webhook: &v1.WebhookSink{URL: "ftp://x", Timeout: "soon"}}, engine.SinkEnv{})
	if err == nil || !strings.Contains(err.Error(), "ftp://x") || !strings.Contains(err.Error(), "soon") {
		t.Fatalf("new sink: %v, want both problems", err)
	}
}

func TestWebhookWriteHonoursTheContext(t *testing.T) {
	s := newSink(t, &v1.WebhookSink{URL: "http://127.0.0.1:1"})
	if err := s.Write(ctxTimeout(t, 100*time.Millisecond), batch(0, 1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("write to nothing with a short context: %v", err)
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
