package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
	"github.com/lockstep-dev/lockstep/engine"
)

func getHealthz(t *testing.T, h http.Handler) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	return rec.Code, rec.Body.String()
}

// healthStep is one step of a /healthz test: what happens, and the answer wanted after it.
type healthStep struct {
	what string
	act  func()
	want int
}

// checkHealthz takes the steps in order and checks /healthz's answer after each.
func checkHealthz(t *testing.T, srv http.Handler, steps []healthStep) {
	t.Helper()
	for _, s := range steps {
		s.act()
		if code, body := getHealthz(t, srv); code != s.want {
			t.Errorf("%s: /healthz = %d %q, want %d", s.what, code, body, s.want)
		}
	}
}

// TestHealthzFailsWithoutProgress: /healthz answers ok while triggers finish (a commit, or a
// trigger that found nothing new) and fails once none did within the bound.
func TestHealthzFailsWithoutProgress(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	h := newEngineHealth(slog.New(slog.DiscardHandler), clk, 5*time.Minute, 5*time.Minute)
	srv := h.handler()
	step := func(d time.Duration) { clk.SetTime(clk.Now().Add(d)) }

	checkHealthz(t, srv, []healthStep{
		{"at start", func() {}, http.StatusOK},
		{"starting for 4m", func() { step(4 * time.Minute) }, http.StatusOK},
		{"starting for 6m", func() { step(2 * time.Minute) }, http.StatusServiceUnavailable},
		{"started", func() { h.Started(engine.Start{}) }, http.StatusOK},
		{"a batch commits after 4m", func() { step(4 * time.Minute); h.Committed(engine.Progress{}) }, http.StatusOK},
		{"an idle trigger after 4m", func() { step(4 * time.Minute); h.Idle(clk.Now()) }, http.StatusOK},
		{"nothing for 5m01s", func() { step(5*time.Minute + time.Second) }, http.StatusServiceUnavailable},
		{"an idle trigger again", func() { h.Idle(clk.Now()) }, http.StatusOK},
	})
}

// TestHealthzGivesTheStartItsGrace: a spark-runtime engine's first trigger may take the
// progress timeout plus the start's grace (the driver's JVM, the executors, the first batch's
// planning); once a trigger finished, the progress timeout alone bounds the next.
func TestHealthzGivesTheStartItsGrace(t *testing.T) {
	spec := qt.Make("q", "ns").FilesSource("in", "/in", v1.FormatJSON, qt.Col("id", v1.TypeString)).ConsoleSink().
		Edit(func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &v1.SparkRuntime{} }).Spec()
	if got, want := spec.StartTimeout(), spec.ProgressTimeout()+v1.SparkStartGrace; got != want {
		t.Fatalf("StartTimeout = %s, want %s", got, want)
	}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	h := newEngineHealth(slog.New(slog.DiscardHandler), clk, spec.ProgressTimeout(), spec.StartTimeout())
	srv := h.handler()
	step := func(d time.Duration) { clk.SetTime(clk.Now().Add(d)) }
	checkHealthz(t, srv, []healthStep{
		{"started", func() { h.Started(engine.Start{}) }, http.StatusOK},
		{"the first batch planned for 14m", func() { step(14 * time.Minute) }, http.StatusOK},
		{"the first batch commits", func() { h.Committed(engine.Progress{}) }, http.StatusOK},
		{"nothing for 5m01s after it", func() { step(5*time.Minute + time.Second) }, http.StatusServiceUnavailable},
	})
	h = newEngineHealth(slog.New(slog.DiscardHandler), clk, spec.ProgressTimeout(), spec.StartTimeout())
	step(spec.StartTimeout() + time.Second)
	if code, body := getHealthz(t, h.handler()); code != http.StatusServiceUnavailable || !strings.Contains(body, "grace") {
		t.Errorf("no trigger beyond the start's bound: /healthz = %d %q, want 503 naming the grace", code, body)
	}
}

func TestVersionOf(t *testing.T) {
	settings := func(kv ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			out = append(out, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		linked string
		bi     *debug.BuildInfo
		want   string
	}{
		{"linked", "v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v9.9.9"}}, "v1.2.3"},
		{"go install @version", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{"checkout", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: settings("vcs.revision", "1a347cf4f2a1b2c3", "vcs.modified", "true")}, "devel+1a347cf4f2a1-dirty"},
		{"nothing known", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "(devel)"},
	} {
		if got := versionOf(tc.linked, tc.bi, true); got != tc.want {
			t.Errorf("%s: versionOf = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestEngineImage(t *testing.T) {
	for _, tc := range []struct {
		flag, env, version, want string
		ok                       bool
	}{
		{"reg/lockstep:v1", "other:v2", "v1.0.0", "reg/lockstep:v1", true},
		{"", "reg/lockstep@sha256:abc", "(devel)", "reg/lockstep@sha256:abc", true},
		{"", "", "v1.4.0", "ghcr.io/lockstep-dev/lockstep:v1.4.0", true},
		{"", "", "(devel)", "", false},
		{"reg/lockstep:latest", "", "v1.4.0", "", false},
	} {
		got, err := engineImage(tc.flag, tc.env, tc.version)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("engineImage(%q, %q, %q) = %q, %v; want %q, ok %v", tc.flag, tc.env, tc.version, got, err, tc.want, tc.ok)
		}
	}
}

// TestEngineKeepsSecretsOutOfItsLog runs `lockstep engine` as the pod does, with a webhook
// sink whose Authorization header comes from a mounted Secret folder and a receiver that
// fails the first request (so that the retry is logged): the header reaches the receiver,
// and its value appears neither in the log nor in the termination message.
func TestEngineKeepsSecretsOutOfItsLog(t *testing.T) {
	const secret = "Bearer s3cr3t-header-value"
	root := t.TempDir()
	in, headers, ck := filepath.Join(root, "in"), filepath.Join(root, "headers"), filepath.Join(root, "checkpoint")
	for _, dir := range []string{in, headers} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, data string) {
		if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(in, "orders-0.json"), `{"order_id":"a","amount":3.5}`+"\n")
	write(filepath.Join(headers, "Authorization"), secret+"\n")

	var mu sync.Mutex
	var got []string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Header.Get("Authorization"))
		if len(got) == 1 {
			http.Error(w, "try again", http.StatusServiceUnavailable)
		}
	}))
	defer receiver.Close()

	query := filepath.Join(root, "query.yaml")
	write(query, fmt.Sprintf(`apiVersion: streaming.lockstep.dev/v1
kind: StreamingQuery
metadata: {name: orders, namespace: e2e}
spec:
  sources:
  - name: orders
    files: {path: %s, format: json}
    schema:
      columns:
      - {name: order_id, type: string}
      - {name: amount, type: double}
  sink:
    webhook: {url: %s, headersSecretName: hook-auth}
  trigger: {availableNow: true}
  checkpoint: {location: %s}
`, in, receiver.URL, ck))
	term := filepath.Join(root, "termination-log")

	var stderr bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(io.Discard)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"engine", "--query", query, "--health-addr", "", "--termination-message-path", term, "--webhook-headers-dir", headers})
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("lockstep engine = %v\n%s", err, stderr.String())
	}

	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0] != secret || got[1] != secret {
		t.Errorf("the receiver saw Authorization %q, want %q twice (a failed request and its retry)", got, secret)
	}
	msg, err := os.ReadFile(term)
	if err != nil {
		t.Fatal(err)
	}
	log := stderr.String()
	if !strings.Contains(log, "Webhook request failed; retrying") {
		t.Errorf("the retry is not logged:\n%s", log)
	}
	for what, text := range map[string]string{"log": log, "termination message": string(msg)} {
		if strings.Contains(text, "s3cr3t") {
			t.Errorf("the %s holds the header's value:\n%s", what, text)
		}
	}
}
